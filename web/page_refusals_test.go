package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/grants"
)

// Refusals meant for a person come back where the person was, not as an error page
// that keeps nothing they had.

// A view name already used, or blank, comes back on the filtered list with the name as
// typed and why at its box (not a 409 error page linking to the dashboard).
func TestAuditSaveViewNameRefusedAtItsBox(t *testing.T) {
	t.Parallel()
	e := auditStart(t)
	e.srv.Get(t, e.user, "/audit").Body.Close() // tina's refused request, to list
	res := e.srv.PostForm(t, e.auditor, "/audit/views", url.Values{"name": {"Refusals"}, "query": {"result=denied"}})
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("the first save: got %d, want 303", res.StatusCode)
	}
	for _, tc := range []struct {
		name, typed string
		status      int
		says        string
	}{
		{"taken", "Refusals", http.StatusConflict, `You already have a view named "Refusals".`},
		{"blank", "   ", http.StatusUnprocessableEntity, "is required"},
	} {
		res := e.srv.PostForm(t, e.auditor, "/audit/views", url.Values{"name": {tc.typed}, "query": {"result=denied&actor=tina"}})
		d := doc(t, res)
		box := d.Find(`[data-testid=save-view] input[name=name]`)
		if res.StatusCode != tc.status || box.AttrOr("value", "") != tc.typed || box.AttrOr("aria-invalid", "") != "true" ||
			strings.TrimSpace(d.Find(`[data-testid=save-view] [data-testid=error-name]`).Text()) != tc.says {
			t.Errorf("%s name: got %d, box %q (aria-invalid %q), error %q; want %d with the name kept and %q at the box", tc.name,
				res.StatusCode, box.AttrOr("value", ""), box.AttrOr("aria-invalid", ""), d.Find(`[data-testid=error-name]`).Text(), tc.status, tc.says)
		}
		// The filters are those of the form, on the page and in what the form saves.
		if got := d.Find(`[data-testid=filter-actor]`).AttrOr("value", ""); got != "tina" {
			t.Errorf("%s name: the actor filter shows %q, want tina", tc.name, got)
		}
		if got := d.Find(`[data-testid=filter-result] option[selected]`).AttrOr("value", ""); got != "denied" {
			t.Errorf("%s name: the result filter shows %q, want denied", tc.name, got)
		}
		if q, _ := url.ParseQuery(d.Find(`[data-testid=save-view] input[name=query]`).AttrOr("value", "")); q.Get("actor") != "tina" || q.Get("result") != "denied" {
			t.Errorf("%s name: the form would save %v, want actor=tina&result=denied", tc.name, q)
		}
		if rows := d.Find(`[data-testid=audit-row]`); rows.Length() != 1 || rows.AttrOr("data-result", "") != "denied" {
			t.Errorf("%s name: %d rows listed, want tina's one refused request", tc.name, rows.Length())
		}
	}
	if n := e.srv.App.Count(t, `SELECT count(*) FROM audit_views`); n != 1 {
		t.Errorf("saved views: %d, want only the first", n)
	}
}

// A refusal because of the current state is a flash on the page the person was on:
// revoking a grant that already ended, deleting a server whose tools have rules the
// person may not lift, answering (without JavaScript) a question answered meanwhile.
func TestStateRefusalsAreFlashed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, nil)
	const pw = "refusal-password-1"
	alice := srv.CreateUser(t, "alice", auth.RoleToolUser, pw)
	srv.CreateUser(t, "tina", auth.RoleToolUser, pw)
	srv.CreateUser(t, "mona", auth.RoleToolManager, pw)
	ca := srv.Login(t, "alice", pw)

	t.Run("grant ended", func(t *testing.T) { // revoked from two tabs, say
		g, err := srv.App.Grants.Create(ctx, grants.Spec{ConversationID: "conv-r", Operation: "file_operations.create_file",
			By: audit.Actor{Kind: audit.ActorUser, ID: alice.ID, Name: "alice"}})
		if err != nil {
			t.Fatal(err)
		}
		if msg := flashAfter(t, srv, ca, srv.PostForm(t, ca, "/grants/"+g.ID+"/revoke", nil)); !strings.HasPrefix(msg, "Revoked") {
			t.Fatalf("the first revoke: flash %q", msg)
		}
		res := srv.PostForm(t, ca, "/grants/"+g.ID+"/revoke", nil)
		if loc := res.Header.Get("Location"); res.StatusCode == http.StatusSeeOther && loc != "/grants" {
			t.Errorf("the second revoke went to %q, want /grants", loc)
		}
		if msg := flashAfter(t, srv, ca, res); !strings.Contains(msg, "already ended (revoked at") || !strings.Contains(msg, "nothing to revoke") {
			t.Errorf("the second revoke: flash %q, want the grant's end", msg)
		}
	})

	t.Run("server with rules", func(t *testing.T) { // a tool manager's delete, one of its tools refused to tina
		admin := svClient{t: t, srv: srv, c: srv.Login(t, "admin", webtest.AdminPassword)}
		sv := seedTools(t, srv, "ruled", true, toolDef("echo", "Sends the message back to its caller.", ""))
		var listed toolList
		admin.json(http.MethodGet, "/api/v1/tools?server="+sv.ID, nil, http.StatusOK, &listed)
		if len(listed.Tools) != 1 {
			t.Fatalf("the seeded tools: %+v", listed.Tools)
		}
		admin.json(http.MethodPut, "/api/v1/tools/"+listed.Tools[0].ID+"/permissions", map[string]any{"username": "tina", "can_use": false}, http.StatusOK, nil)
		cm := srv.Login(t, "mona", pw)
		res := srv.PostFormHeaders(t, cm, "/servers/"+sv.ID+"/delete", nil, map[string]string{"Referer": srv.URL + "/servers/" + sv.ID})
		if loc := res.Header.Get("Location"); loc != "/servers/"+sv.ID {
			t.Errorf("the refused delete from the server's page went to %q, want back to its page", loc)
		}
		if msg := flashAfter(t, srv, cm, res); !strings.HasPrefix(msg, `Deleting server "ruled" would remove 1 per-user rule`) ||
			!strings.Contains(msg, "only an administrator") || !strings.HasSuffix(msg, ".") {
			t.Errorf("a refused delete: flash %q, want why, as a sentence", msg)
		}
		if _, err := srv.Registry.GetServer(ctx, sv.ID); err != nil {
			t.Errorf("the refused delete removed the server: %v", err)
		}
	})

	t.Run("question answered meanwhile", func(t *testing.T) { // from a page without JavaScript: back there, saying so
		var answered string
		if err := srv.Pool.QueryRow(ctx, `INSERT INTO collaborations (user_id, conversation_id, prompt, status) VALUES ($1, 'c', 'Done?', 'answered') RETURNING id`,
			alice.ID).Scan(&answered); err != nil {
			t.Fatal(err)
		}
		res := srv.PostFormHeaders(t, ca, "/collaborations/"+answered+"/respond", url.Values{"decision": {"approve"}},
			map[string]string{"Referer": srv.URL + "/tools?q=files"})
		if loc := res.Header.Get("Location"); res.StatusCode == http.StatusSeeOther && loc != "/tools?q=files" {
			t.Errorf("the late answer went to %q, want the page it was sent from", loc)
		}
		if msg := flashAfter(t, srv, ca, res); msg != "This question is no longer waiting for an answer." {
			t.Errorf("the late answer: flash %q", msg)
		}
	})
}

// A refused filter in the address is left out alone: the search and the other filters
// still apply (and stay in the box, the pager and Back), and the notice names it.
func TestToolListLeavesOutOnlyTheRefusedFilter(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	seedTools(t, srv, "sky", true,
		toolDef("weather_forecast", "Forecasts the weather for a city.", `{"readOnlyHint":true}`),
		toolDef("read_file", "Reads a file from the workspace and returns its text.", `{"readOnlyHint":true}`))
	c := srv.Login(t, "admin", webtest.AdminPassword)
	for _, tc := range []struct {
		q     string
		tools []string
	}{{"weatherzz", nil}, {"weather", []string{"sky__weather_forecast"}}} {
		res := srv.Get(t, c, "/tools?q="+tc.q+"&risk=bogus&server=sky")
		d := page(t, res)
		var got []string
		d.Find(`[data-testid=tool-card]`).Each(func(_ int, s *goquery.Selection) {
			got = append(got, s.AttrOr("data-tool", ""))
		})
		if res.StatusCode != http.StatusOK || strings.Join(got, ",") != strings.Join(tc.tools, ",") {
			t.Errorf("q=%s with a bad risk: got %d %v, want 200 %v", tc.q, res.StatusCode, got, tc.tools)
		}
		if box := d.Find(`[data-testid=tool-search]`).AttrOr("value", ""); box != tc.q {
			t.Errorf("q=%s: the search box holds %q", tc.q, box)
		}
		if sel := d.Find(`[data-testid=filter-server] option[selected]`).AttrOr("value", ""); sel != "sky" {
			t.Errorf("q=%s: the server filter shows %q, want sky", tc.q, sel)
		}
		back, _ := url.Parse(d.Find(`#tool-back`).AttrOr("value", ""))
		if back == nil || back.Query().Get("q") != tc.q || back.Query().Get("server") != "sky" || back.Query().Has("risk") {
			t.Errorf("q=%s: Back is %v, want the search and server without the risk", tc.q, back)
		}
		notice := d.Find(`[data-testid=tool-notice]`).Text()
		if !strings.Contains(notice, "risk filter") || !strings.Contains(notice, "must be low, medium or high") || strings.Contains(notice, "all tools") {
			t.Errorf("q=%s: notice %q, want the risk filter named as left out", tc.q, notice)
		}
	}
}

// A category's or tag's link reaches the list filtered by it whatever the name holds:
// names stored under looser rules than today's (set here by hand) are escaped.
func TestToolLinksEscapeCategoryAndTag(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, nil)
	sv := seedTools(t, srv, "esc", true, toolDef("echo", "Sends the message back to its caller.", ""),
		toolDef("other", "Another tool that is not in the category.", ""))
	const cat, tag = "a&b c", "x&y=1"
	if _, err := srv.Owner.Exec(ctx, `ALTER TABLE tool_categories DROP CONSTRAINT tool_categories_name_check;
		ALTER TABLE tool_tags DROP CONSTRAINT tool_tags_tag_check`); err != nil {
		t.Fatal(err)
	}
	var toolID string
	if err := srv.Owner.QueryRow(ctx, `WITH c AS (INSERT INTO tool_categories (id, name) VALUES (gen_random_uuid(), $1) RETURNING id)
		UPDATE mcp_tools SET category_id = (SELECT id FROM c) WHERE server_id = $2 AND name = 'echo' RETURNING id`, cat, sv.ID).Scan(&toolID); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Owner.Exec(ctx, `INSERT INTO tool_tags (tool_id, tag) VALUES ($1, $2)`, toolID, tag); err != nil {
		t.Fatal(err)
	}
	c := srv.Login(t, "admin", webtest.AdminPassword)
	wantCat, wantTag := "/tools?category="+url.QueryEscape(cat), "/tools?tag="+url.QueryEscape(tag)
	links := map[string]string{
		"categories page": page(t, srv.Get(t, c, "/tools/categories")).Find(`a[href^="/tools?category="]`).AttrOr("href", ""),
		"tool list":       page(t, srv.Get(t, c, "/tools")).Find(`[data-testid=tool-cards] a[href^="/tools?tag="]`).AttrOr("href", ""),
		"tool page":       page(t, srv.Get(t, c, "/tools/"+toolID)).Find(`a.badge[href^="/tools?tag="]`).AttrOr("href", ""),
	}
	for where, href := range links {
		want := wantTag
		if where == "categories page" {
			want = wantCat
		}
		if href != want {
			t.Errorf("%s: link %q, want %q", where, href, want)
			continue
		}
		d := page(t, srv.Get(t, c, href))
		if n := d.Find(`[data-testid=tool-card]`).Length(); n != 1 || d.Find(`[data-testid=tool-notice]`).Length() != 0 {
			t.Errorf("%s: the link lists %d tools (notice %q), want the one", where, n, d.Find(`[data-testid=tool-notice]`).Text())
		}
	}
}
