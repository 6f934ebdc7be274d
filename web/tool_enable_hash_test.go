package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/registry"
)

// A tool page opened before rediscovery changed the tool's definition does not enable
// the new definition, which the person never saw: its Enable form carries the hash the
// page showed, and the enable is refused (a flash on the page, 409 from the API) with
// the tool left as it was. With the current hash, or a disable, it goes through.
func TestToolEnableTiedToDefinition(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, nil)
	sv := seedTools(t, srv, "enhash", true, toolDef("deploy", "Deploys the build to the environment given.", `{"readOnlyHint":true}`))
	id := srv.ToolID(t, "enhash__deploy")
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	it, err := srv.Tools.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	seen, was := it.DefinitionHash, it.Status

	// The page's Enable form sends the hash the page shows, also after a live update
	// has replaced the head (the input is outside it, tied to the form by its id).
	doc := page(t, srv.Get(t, admin, "/tools/"+id))
	formID := doc.Find("[data-testid=tool-enable-toggle]").Closest("form").AttrOr("id", "")
	hash := doc.Find("input[name=definition_hash]").FilterFunction(func(_ int, s *goquery.Selection) bool {
		return formID != "" && s.AttrOr("form", "") == formID
	})
	if hash.Length() != 1 || hash.AttrOr("value", "") != seen || doc.Find("[data-testid=definition-hash]").Text() != seen {
		t.Fatalf("the Enable form (id %q) sends definition_hash %q (%d inputs), want the %s the page shows",
			formID, hash.AttrOr("value", ""), hash.Length(), seen)
	}
	if doc.Find("#tool-head-"+id).Find("input[name=definition_hash]").Length() != 0 {
		t.Error("the hash is inside the head, which live updates replace with the new definition's")
	}

	// The server changes the tool's description; rediscovery stores the new definition.
	changed := toolDef("deploy", "Deploys the build, then deletes every older build.", `{"readOnlyHint":true}`)
	if _, err := srv.Registry.ApplyDiscovery(ctx, sv.ID, registry.Discovery{Trigger: "manual", Actor: audit.System,
		StartedAt: time.Now(), Pages: 1, Tools: []registry.ToolDef{changed}}); err != nil {
		t.Fatal(err)
	}
	if it, _ = srv.Tools.Get(ctx, id); it.DefinitionHash == seen || it.Status != was {
		t.Fatalf("after rediscovery: hash %s (was %s), status %s (was %s)", it.DefinitionHash, seen, it.Status, was)
	}
	current := it.DefinitionHash
	enables := func() int {
		return testkit.Count(t, srv.Pool, `SELECT count(*) FROM audit_log WHERE action = 'tool.enable' AND target_id = $1`, id)
	}

	// The old page's form: refused, said on the page, nothing changed.
	res := srv.PostForm(t, admin, "/tools/"+id+"/enable", url.Values{"back": {"/tools/" + id}, "definition_hash": {seen}})
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("enable from the old page: got %d, want 303 back to the page", res.StatusCode)
	}
	flash := page(t, srv.Get(t, admin, res.Header.Get("Location"))).Find("[data-testid=flash]")
	if !flash.HasClass("error") || !strings.Contains(flash.Text(), "changed since you opened it") {
		t.Errorf("flash %q (class %q), want an error saying the definition changed", flash.Text(), flash.AttrOr("class", ""))
	}
	if it, _ = srv.Tools.Get(ctx, id); it.Status != was || enables() != 0 {
		t.Fatalf("the refused enable changed the tool: %s, %d tool.enable rows", it.Status, enables())
	}

	// The list's card toggle carries the definition the card shows; one from an old
	// list is refused the same way.
	toggle := page(t, srv.Get(t, admin, "/tools")).Find("[data-testid=tool-toggle]").FilterFunction(func(_ int, s *goquery.Selection) bool {
		return strings.Contains(s.AttrOr("formaction", ""), id)
	})
	if fa := toggle.AttrOr("formaction", ""); !strings.Contains(fa, "definition_hash="+current) {
		t.Errorf("the card's toggle posts to %q, want the definition_hash of the definition it shows (%s)", fa, current)
	}
	res = srv.PostForm(t, admin, "/tools/"+id+"/enable?definition_hash="+seen, url.Values{"back": {"/tools"}})
	res.Body.Close()
	if it, _ = srv.Tools.Get(ctx, id); it.Status != was || enables() != 0 {
		t.Fatalf("an enable from an old list's card changed the tool: %s, %d tool.enable rows", it.Status, enables())
	}

	// The API with the old hash: 409 with the current hash in the details.
	api := webtest.API{T: t, Srv: srv, Bearer: srv.Token(t, "admin")}
	e := api.Error(http.MethodPost, "/api/v1/tools/"+id+"/enable", map[string]any{"definition_hash": seen},
		http.StatusConflict, "stale_definition")
	if !strings.Contains(e.Error.Message, "changed since you opened it") || !strings.Contains(string(e.Error.Details), current) {
		t.Errorf("API refusal: %q, details %s", e.Error.Message, e.Error.Details)
	}
	if it, _ = srv.Tools.Get(ctx, id); it.Status != was || enables() != 0 {
		t.Fatalf("the refused API enable changed the tool: %s", it.Status)
	}

	// Reloaded, the page shows the new hash and its form enables the tool.
	doc = page(t, srv.Get(t, admin, "/tools/"+id))
	f := url.Values{"back": {"/tools/" + id}, "definition_hash": {doc.Find("input[name=definition_hash]").First().AttrOr("value", "")}}
	if f.Get("definition_hash") != current {
		t.Fatalf("reloaded page sends %q, want %s", f.Get("definition_hash"), current)
	}
	res = srv.PostForm(t, admin, "/tools/"+id+"/enable", f)
	res.Body.Close()
	if it, _ = srv.Tools.Get(ctx, id); res.StatusCode != http.StatusSeeOther || it.Status != "enabled" {
		t.Fatalf("enable with the current hash: got %d, tool %s", res.StatusCode, it.Status)
	}

	// A disable is never refused for an old hash; the API without one behaves as before.
	res = srv.PostForm(t, admin, "/tools/"+id+"/disable", url.Values{"back": {"/tools/" + id}, "definition_hash": {seen}})
	res.Body.Close()
	if it, _ = srv.Tools.Get(ctx, id); it.Status != "disabled" {
		t.Fatalf("disable with an old hash: tool %s, want disabled", it.Status)
	}
	api.JSON(http.MethodPost, "/api/v1/tools/"+id+"/enable", nil, http.StatusOK, nil)
	if it, _ = srv.Tools.Get(ctx, id); it.Status != "enabled" {
		t.Fatalf("API enable without a hash: tool %s", it.Status)
	}
}
