package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/registry"
)

// A bulk enable is of the definitions the person saw: the list's bulk form sends, with
// each tick, the definition its card shows, and a tool rediscovered since the list was
// opened (here: it gained a delete_all parameter) is refused for itself while the other
// ticked tools are enabled. The API's bulk action does the same with definition_hashes,
// and without them behaves as before.
func TestToolBulkEnableTiedToDefinition(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, nil)
	wipeDef, readDef := toolDef("wipe", "Removes the file given.", ""), toolDef("read", "Reads the file given.", `{"readOnlyHint":true}`)
	sv := seedTools(t, srv, "bulkhash", true, wipeDef, readDef)
	wipe, read := srv.ToolID(t, "bulkhash__wipe"), srv.ToolID(t, "bulkhash__read")
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	status := func(id string) string {
		it, err := srv.Tools.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return it.Status
	}
	was := status(wipe)
	enables := func(id string) int {
		return testkit.Count(t, srv.Pool, `SELECT count(*) FROM audit_log WHERE action = 'tool.enable' AND target_id = $1`, id)
	}

	// The list as the person opened it, both tools ticked: the form as a browser sends
	// it, each pick box's value as the page has it.
	ticked := func(doc *goquery.Document) url.Values {
		form := url.Values{"action": {"enable"}, "back": {"/tools"}}
		doc.Find("input[form=bulk][name=id][data-testid=tool-pick]").Each(func(_ int, s *goquery.Selection) {
			form.Add("id", s.AttrOr("value", ""))
		})
		return form
	}
	form := ticked(page(t, srv.Get(t, admin, "/tools?server="+sv.ID)))
	old, _ := srv.Tools.Get(ctx, wipe)
	if !slices.Contains(form["id"], wipe+":"+old.DefinitionHash[:32]) || len(form["id"]) != 2 {
		t.Fatalf("the list's pick boxes send %q, want each card's id:start of its definition_hash", form["id"])
	}

	// Rediscovery changes wipe's definition (validated again, as it was) after the list
	// was opened.
	changed := wipeDef
	changed.InputSchema = json.RawMessage(`{"type":"object","properties":{"message":{"type":"string","description":"What to send back."},"delete_all":{"type":"boolean","description":"Remove every file."}},"required":["message"]}`)
	if _, err := srv.Registry.ApplyDiscovery(ctx, sv.ID, registry.Discovery{Trigger: "manual", Actor: audit.System,
		StartedAt: time.Now(), Pages: 1, Tools: []registry.ToolDef{changed, readDef}}); err != nil {
		t.Fatal(err)
	}
	cur, _ := srv.Tools.Get(ctx, wipe)
	if cur.DefinitionHash == old.DefinitionHash || cur.Status != was {
		t.Fatalf("after rediscovery: hash %s (was %s), status %s (was %s)", cur.DefinitionHash, old.DefinitionHash, cur.Status, was)
	}

	res := srv.PostForm(t, admin, "/tools/bulk", form)
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("bulk enable from the old list: %d", res.StatusCode)
	}
	if status(wipe) != was || enables(wipe) != 0 {
		t.Errorf("the bulk enable enabled wipe's new definition, which nobody saw: %s, %d tool.enable rows", status(wipe), enables(wipe))
	}
	if status(read) != "enabled" {
		t.Errorf("read (unchanged) was not enabled with it: %s", status(read))
	}
	if msg := page(t, srv.Get(t, admin, res.Header.Get("Location"))).Find("[data-testid=flash]").Text(); !strings.Contains(msg, "changed since you opened it") {
		t.Errorf("the flash reads %q, want it to say wipe's definition changed", msg)
	}

	// The reloaded list sends the new definition, and enables it.
	form = ticked(page(t, srv.Get(t, admin, "/tools?server="+sv.ID)))
	res = srv.PostForm(t, admin, "/tools/bulk", form)
	res.Body.Close()
	if status(wipe) != "enabled" {
		t.Fatalf("bulk enable from the reloaded list: %s", status(wipe))
	}

	// The API: an old hash refuses that tool (its result says stale_definition), the
	// others move; the current hash, or none, enables as before.
	api := webtest.API{T: t, Srv: srv, Bearer: srv.Token(t, "admin")}
	api.JSON(http.MethodPost, "/api/v1/tools/bulk", map[string]any{"action": "disable", "ids": []string{wipe, read}}, http.StatusOK, nil)
	var got struct {
		Results []struct {
			ID    string `json:"id"`
			To    string `json:"to"`
			Error string `json:"error"`
			Code  string `json:"code"`
		} `json:"results"`
	}
	api.JSON(http.MethodPost, "/api/v1/tools/bulk", map[string]any{"action": "enable", "ids": []string{wipe, read},
		"definition_hashes": map[string]string{wipe: old.DefinitionHash}}, http.StatusOK, &got)
	for _, r := range got.Results {
		switch r.ID {
		case wipe:
			if r.Code != "stale_definition" || !strings.Contains(r.Error, "changed since you opened it") || r.To != "disabled" {
				t.Errorf("API bulk enable of wipe with its old hash: %+v, want refused as stale_definition", r)
			}
		case read:
			if r.Code != "" || r.Error != "" || r.To != "enabled" {
				t.Errorf("API bulk enable of read (no hash sent): %+v, want enabled", r)
			}
		}
	}
	if len(got.Results) != 2 || status(wipe) != "disabled" || status(read) != "enabled" {
		t.Fatalf("API bulk with a stale hash: %+v; wipe %s, read %s", got.Results, status(wipe), status(read))
	}
	api.JSON(http.MethodPost, "/api/v1/tools/bulk", map[string]any{"action": "enable", "ids": []string{wipe},
		"definition_hashes": map[string]string{wipe: cur.DefinitionHash}}, http.StatusOK, nil)
	if status(wipe) != "enabled" {
		t.Fatalf("API bulk enable with the current hash: %s", status(wipe))
	}
}
