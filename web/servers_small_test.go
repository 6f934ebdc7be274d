package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/registry"
)

// Deleting a server fails the executions waiting or running on its tools ("no longer
// exists"): its delete confirmation says how many, on the list and on its page, before
// the person confirms. Ended ones are not counted; the API's DELETE is unchanged.
func TestServerDeleteConfirmCountsExecutions(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	liveServer(t, srv, "mt", false, "write-note")
	liveServer(t, srv, "lo", true, "echo")
	srv.CreateUser(t, "ann", auth.RoleToolUser, xpPassword)
	ann := webtest.API{T: t, Srv: srv, Bearer: srv.Token(t, "ann")}
	var ids []string
	for i := range 3 {
		var ex struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		}
		ann.JSON(http.MethodPost, "/api/v1/executions", plan(step("mt__write-note", map[string]any{"text": fmt.Sprint(i)})), http.StatusCreated, &ex)
		if ex.Status != "awaiting_approval" {
			t.Fatalf("plan %d: %s, want awaiting_approval", i, ex.Status)
		}
		ids = append(ids, ex.ID)
	}
	ann.JSON(http.MethodPost, "/api/v1/executions/"+ids[0]+"/cancel", map[string]any{}, http.StatusOK, nil)
	var mt, lo string
	if err := srv.App.Pool.QueryRow(t.Context(), `SELECT (SELECT id::text FROM mcp_servers WHERE name = 'mt'),
		(SELECT id::text FROM mcp_servers WHERE name = 'lo')`).Scan(&mt, &lo); err != nil {
		t.Fatal(err)
	}
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	confirm := func(d *goquery.Document, id string) string {
		return d.Find(`form[action="/servers/`+id+`/delete"]`).First().AttrOr("data-confirm", "")
	}
	for _, path := range []string{"/servers", "/servers/" + mt} {
		d := page(t, srv.Get(t, admin, path))
		if q := confirm(d, mt); !strings.Contains(q, "Delete mt?") || !strings.Contains(q, "2 executions waiting or running call its tools and will fail") {
			t.Errorf("%s: mt's delete confirmation asks %q; want it to say 2 executions waiting or running will fail", path, q)
		}
	}
	if q := confirm(page(t, srv.Get(t, admin, "/servers")), lo); q == "" || strings.Contains(q, "execution") {
		t.Errorf("lo's delete confirmation asks %q; want one that names no execution (none uses it)", q)
	}
	// A live update of mt's card and head (its newest event) keeps the warning: an open
	// confirmation would otherwise no longer match the page.
	var evID int64
	if err := srv.App.Pool.QueryRow(t.Context(), `SELECT max(id) FROM events WHERE topic = $1 AND payload::text LIKE '%' || $2 || '%'`,
		registry.ServersTopic, mt).Scan(&evID); err != nil {
		t.Fatal(err)
	}
	evs, err := srv.Bus.Since(t.Context(), evID-1, []string{registry.ServersTopic}, 1)
	if err != nil || len(evs) != 1 {
		t.Fatalf("mt's newest event: %v (%d)", err, len(evs))
	}
	raw, err := srv.Web.RenderLive(t.Context(), evs[0])
	if err != nil {
		t.Fatal(err)
	}
	d, err := goquery.NewDocumentFromReader(strings.NewReader(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	if q := confirm(d, mt); !strings.Contains(q, "2 executions waiting or running call its tools and will fail") {
		t.Errorf("the live update (%s) of mt's card asks %q; want the warning kept", evs[0].Kind, q)
	}
	api := webtest.API{T: t, Srv: srv, C: admin}
	api.JSON(http.MethodDelete, "/api/v1/servers/"+mt, nil, http.StatusNoContent, nil)
}

// A page past the list's end says there is none and links to the last page, without
// "Page 9223372036854775807 of 2", nor an offset that overflowed back to the first page.
func TestServerListPagePastEnd(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	for i := 1; i <= 30; i++ {
		mustCreate(t, srv, disabledSpec(fmt.Sprintf("pg-%02d", i)))
	}
	for _, p := range []string{"9223372036854775807", "99999999999999999999999", "384307168202282326"} {
		res := srv.Get(t, admin, "/servers?page="+url.QueryEscape(p))
		d := page(t, res)
		if res.StatusCode != http.StatusOK {
			t.Errorf("?page=%s: HTTP %d, want 200", p, res.StatusCode)
			continue
		}
		if n := d.Find("[data-testid=server-card]").Length(); n != 0 {
			t.Errorf("?page=%s: %d cards, want none (no such page)", p, n)
		}
		pager := strings.Join(strings.Fields(d.Find("nav.pager").Text()), " ")
		if strings.Contains(pager, "922337") || !strings.Contains(pager, "No such page") {
			t.Errorf("?page=%s: the pager says %q; want it to say there is no such page", p, pager)
		}
		if prev := d.Find("a[rel=prev]").AttrOr("href", ""); prev != "/servers?page=2" {
			t.Errorf("?page=%s: previous link %q, want the last page /servers?page=2", p, prev)
		}
		if next := d.Find("a[rel=next]").Length(); next != 0 {
			t.Errorf("?page=%s: a next link, want none", p)
		}
	}
}

// An env variable or header whose name is not one HTML id token (a space) still has
// its error announced: the name box's aria-describedby names the id of the error.
func TestServerFormRowErrorIDs(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	f := httpForm("spaced-env", "")
	f.Set("type", registry.TypeStdio)
	f.Set("command", "/usr/bin/env")
	f.Del("enabled")
	f["env_name"], f["env_value"] = []string{"OK_NAME", "MY VAR"}, []string{"x", "y"}
	res := srv.PostForm(t, admin, "/servers", f)
	d := page(t, res)
	if res.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("env name with a space: HTTP %d, want 422", res.StatusCode)
	}
	box := d.Find("[data-testid=env-rows] input[name=env_name]").Eq(1)
	if box.AttrOr("value", "") != "MY VAR" || box.AttrOr("aria-invalid", "") != "true" {
		t.Fatalf("the second name box: value %q aria-invalid %q", box.AttrOr("value", ""), box.AttrOr("aria-invalid", ""))
	}
	by := box.AttrOr("aria-describedby", "")
	ids := strings.Fields(by)
	if len(ids) != 1 {
		t.Fatalf("aria-describedby %q: %d id tokens, want 1", by, len(ids))
	}
	var msg string
	d.Find("[id]").Each(func(_ int, s *goquery.Selection) {
		if s.AttrOr("id", "") == ids[0] {
			msg = s.Text()
		}
	})
	if !strings.Contains(msg, "not a valid variable name") {
		t.Errorf("aria-describedby %q names an element with %q; want the row's error", by, msg)
	}
	if first := d.Find("[data-testid=env-rows] input[name=env_name]").Eq(0); first.AttrOr("aria-invalid", "") == "true" {
		t.Errorf("the first, valid row is marked invalid too")
	}
}
