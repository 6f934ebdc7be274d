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
	"github.com/gorilla/websocket"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/handlers"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/decide"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/web"
)

// The execution history (/executions), the approvals inbox (/approvals), the count of
// waiting approvals in the navigation and its live updates, and the execution settings
// (/settings/executions).

const xlPassword = "executions-password-123"

// xlEnv is a server with the untrusted server xl (echo and add are MEDIUM there,
// write-note HIGH) and one user of every role.
type xlEnv struct {
	srv     *webtest.Server
	users   map[auth.Role]auth.User
	clients map[auth.Role]*http.Client
}

func xlStart(t *testing.T) *xlEnv {
	t.Helper()
	srv := webtest.Start(t, &webtest.Options{Router: &router.Options{UserRate: 60000}})
	liveServer(t, srv, "xl", false, "echo", "add", "write-note")
	e := &xlEnv{srv: srv, users: map[auth.Role]auth.User{}, clients: map[auth.Role]*http.Client{}}
	for _, r := range auth.Roles {
		if r == auth.RoleAdmin {
			u, err := srv.Auth.GetUserByName(context.Background(), "admin")
			if err != nil {
				t.Fatal(err)
			}
			e.users[r], e.clients[r] = u, srv.Login(t, "admin", webtest.AdminPassword)
			continue
		}
		name := "xl-" + strings.ReplaceAll(string(r), "_", "-")
		e.users[r] = srv.CreateUser(t, name, r, xlPassword)
		e.clients[r] = srv.Login(t, name, xlPassword)
	}
	return e
}

func (e *xlEnv) caller(r auth.Role) executions.Caller {
	u := e.users[r]
	return executions.Caller{Actor: audit.Actor{Kind: audit.ActorUser, ID: u.ID, Name: u.Username}, Role: r}
}

// create plans one step as the user of role r.
func (e *xlEnv) create(t *testing.T, r auth.Role, tool, args string) *executions.Execution {
	t.Helper()
	ex, err := e.srv.Executions.Create(context.Background(), e.caller(r), executions.Input{Plan: &executions.Request{
		Steps: []executions.RequestStep{{Tool: tool, Arguments: json.RawMessage(args)}}}})
	if err != nil {
		t.Fatalf("create %s: %v", tool, err)
	}
	return ex
}

// waitStatus polls an execution until it is in want.
func (e *xlEnv) waitStatus(t *testing.T, id string, want executions.Status) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ex, err := e.srv.Executions.Get(context.Background(), id)
		if err == nil && ex.Status == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("execution %s: got %v (%v), want %s", id, ex.Status, err, want)
		}
		time.Sleep(20 * time.Millisecond) // poll interval, not a wait for an outcome
	}
}

func (e *xlEnv) get(t *testing.T, r auth.Role, path string, want int) *goquery.Document {
	t.Helper()
	res := e.srv.Get(t, e.clients[r], path)
	doc := page(t, res)
	if res.StatusCode != want {
		t.Fatalf("GET %s as %s: got %d, want %d", path, r, res.StatusCode, want)
	}
	return doc
}

// rowIDs are the executions the history lists, in order.
func rowIDs(doc *goquery.Document) []string {
	var ids []string
	doc.Find("[data-testid=execution-row]").Each(func(_ int, s *goquery.Selection) {
		ids = append(ids, s.AttrOr("data-execution-id", ""))
	})
	return ids
}

func itemIDs(doc *goquery.Document) []string {
	var ids []string
	doc.Find("[data-testid=approval-item]").Each(func(_ int, s *goquery.Selection) {
		ids = append(ids, s.AttrOr("data-execution-id", ""))
	})
	return ids
}

// xlHistory is a history of four: a (admin, echo, awaiting), b (tool user, add,
// awaiting), c (tool user, write-note, rejected: cancelled), d (admin, echo, succeeded);
// d is the newest.
type xlHistory struct{ a, b, c, d *executions.Execution }

func (e *xlEnv) history(t *testing.T) xlHistory {
	t.Helper()
	ctx := context.Background()
	var h xlHistory
	h.a = e.create(t, auth.RoleAdmin, "xl__echo", `{"message":"first"}`)
	h.b = e.create(t, auth.RoleToolUser, "xl__add", `{"a":1,"b":2}`)
	h.c = e.create(t, auth.RoleToolUser, "xl__write-note", `{"text":"x"}`)
	if _, err := e.srv.Executions.Reject(ctx, e.caller(auth.RoleAdmin), h.c.ID, "not today"); err != nil {
		t.Fatal(err)
	}
	h.d = e.create(t, auth.RoleAdmin, "xl__echo", `{"message":"last"}`)
	if _, err := e.srv.Executions.Confirm(ctx, e.caller(auth.RoleAdmin), h.d.ID, "", ""); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(t, h.d.ID, executions.Success)
	return h
}

func TestExecutionHistoryPage(t *testing.T) {
	t.Parallel()
	e := xlStart(t)

	// Empty: a way to plan the first one, and a table waiting for live rows.
	doc := e.get(t, auth.RoleAdmin, "/executions", http.StatusOK)
	if got := doc.Find("[data-testid=executions-empty] a[href='/executions/new']").Length(); got != 1 {
		t.Errorf("empty history: got %d links to /executions/new, want 1", got)
	}
	if doc.Find("tbody#execution-rows").Length() != 1 {
		t.Error("empty history: no tbody#execution-rows for live rows")
	}
	if !strings.Contains(doc.Find("[data-topics]").AttrOr("data-topics", ""), executions.Topic) {
		t.Error("the history does not follow the executions topic")
	}

	h := e.history(t)
	all := []string{h.d.ID, h.c.ID, h.b.ID, h.a.ID}
	doc = e.get(t, auth.RoleAdmin, "/executions", http.StatusOK)
	if got := rowIDs(doc); !slices.Equal(got, all) {
		t.Fatalf("history: got %v, want %v (newest first)", got, all)
	}
	if doc.Find("[data-testid=executions-empty]").Length() != 0 {
		t.Error("a history with executions shows the empty state")
	}
	row := doc.Find("#execution-row-" + h.c.ID)
	if got := row.Find("[data-testid=execution-link]"); got.Text() != h.c.Title() || got.AttrOr("href", "") != "/executions/"+h.c.ID {
		t.Errorf("row of c: link %q → %q, want %q → /executions/%s", got.Text(), got.AttrOr("href", ""), h.c.Title(), h.c.ID)
	}
	if got := row.Find("[data-testid=execution-status]").AttrOr("data-status", ""); got != "cancelled" {
		t.Errorf("row of c: status %q, want cancelled", got)
	}
	if got := row.Find("[data-testid=risk-badge]").AttrOr("data-risk", ""); got != "high" {
		t.Errorf("row of c: risk %q, want high", got)
	}
	if got := row.Find("[data-testid=execution-requester]").Text(); got != "xl-tool-user" {
		t.Errorf("row of c: requester %q, want xl-tool-user", got)
	}
	if got := row.Find("time").Length(); got != 2 {
		t.Errorf("row of c (rejected): got %d times, want created and finished", got)
	}
	if got := doc.Find("#execution-row-" + h.a.ID + " time").Length(); got != 1 {
		t.Errorf("row of a (waiting): got %d times, want created only", got)
	}

	// Filters: status (several, also comma-separated), risk, only mine, search.
	cases := []struct {
		role  auth.Role
		query string
		want  []string
	}{
		{auth.RoleAdmin, "status=awaiting_approval", []string{h.b.ID, h.a.ID}},
		{auth.RoleAdmin, "status=awaiting_approval&status=cancelled", []string{h.c.ID, h.b.ID, h.a.ID}},
		{auth.RoleAdmin, "status=success,cancelled", []string{h.d.ID, h.c.ID}},
		{auth.RoleAdmin, "risk=high", []string{h.c.ID}},
		{auth.RoleAdmin, "risk=medium&status=awaiting_approval", []string{h.b.ID, h.a.ID}},
		{auth.RoleAdmin, "requested_by=me", []string{h.d.ID, h.a.ID}},
		{auth.RoleToolUser, "requested_by=me", []string{h.c.ID, h.b.ID}},
		{auth.RoleAuditor, "requested_by=me", nil},
		{auth.RoleAdmin, "q=add", []string{h.b.ID}},
		{auth.RoleAdmin, "q=xl-tool-user", []string{h.c.ID, h.b.ID}},
		{auth.RoleAdmin, "q=nothing-like-this", nil},
	}
	for _, tc := range cases {
		doc := e.get(t, tc.role, "/executions?"+tc.query, http.StatusOK)
		if got := rowIDs(doc); !slices.Equal(got, tc.want) {
			t.Errorf("%s as %s: got %v, want %v", tc.query, tc.role, got, tc.want)
		}
		// A filtered page cannot tell whether a new execution matches: no live additions.
		if doc.Find("#execution-rows").Length() != 0 {
			t.Errorf("%s: a filtered page takes live additions", tc.query)
		}
		if len(tc.want) == 0 && doc.Find("[data-testid=executions-empty] a[href='/executions']").Length() != 1 {
			t.Errorf("%s: no match, but no way back to every execution", tc.query)
		}
	}
	// The form keeps what was asked.
	doc = e.get(t, auth.RoleAdmin, "/executions?status=failed&status=cancelled&risk=high&requested_by=me&q=note", http.StatusOK)
	for _, sel := range []string{"[data-testid=filter-status-failed]", "[data-testid=filter-status-cancelled]", "[data-testid=filter-mine]"} {
		if _, ok := doc.Find(sel).Attr("checked"); !ok {
			t.Errorf("filter form: %s is not ticked", sel)
		}
	}
	if _, ok := doc.Find("[data-testid=filter-status-success]").Attr("checked"); ok {
		t.Error("filter form: success is ticked but was not asked for")
	}
	if got := doc.Find("[data-testid=filter-risk] option[selected]").AttrOr("value", ""); got != "high" {
		t.Errorf("filter form: risk %q, want high", got)
	}
	if got := doc.Find("[data-testid=filter-q]").AttrOr("value", ""); got != "note" {
		t.Errorf("filter form: search %q, want note", got)
	}

	// Bad filters: 400, said next to the field, nothing listed.
	for _, tc := range []struct{ query, field, says string }{
		{"status=bogus", "status", "unknown status"},
		{"risk=extreme", "risk", "unknown risk"},
		{"requested_by=someone", "requested_by", "user id"},
		{"limit=lots", "limit", "whole number"},
		{"limit=500", "limit", "between 1 and 200"},
	} {
		doc := e.get(t, auth.RoleAdmin, "/executions?"+tc.query, http.StatusBadRequest)
		if got := doc.Find("[data-testid=error-" + tc.field + "]").Text(); !strings.Contains(got, tc.says) {
			t.Errorf("%s: error next to %s is %q, want it to say %q", tc.query, tc.field, got, tc.says)
		}
		if doc.Find("[data-testid=execution-filter-errors]").Length() != 1 || len(rowIDs(doc)) != 0 {
			t.Errorf("%s: want the error summary and no rows", tc.query)
		}
	}

	// Pages of two: Next page, then the last page with a way back.
	doc = e.get(t, auth.RoleAdmin, "/executions?limit=2", http.StatusOK)
	if got := rowIDs(doc); !slices.Equal(got, all[:2]) {
		t.Fatalf("page 1: got %v, want %v", got, all[:2])
	}
	next := doc.Find("[data-testid=next-page]").AttrOr("href", "")
	if !strings.Contains(next, "cursor=") || !strings.Contains(next, "limit=2") {
		t.Fatalf("page 1: next link %q, want a cursor and the same page size", next)
	}
	doc = e.get(t, auth.RoleAdmin, next, http.StatusOK)
	if got := rowIDs(doc); !slices.Equal(got, all[2:]) {
		t.Errorf("page 2: got %v, want %v", got, all[2:])
	}
	if doc.Find("[data-testid=next-page]").Length() != 0 || doc.Find("[data-testid=first-page]").Length() != 1 {
		t.Error("page 2: want no next link and a first-page link")
	}
	if doc.Find("#execution-rows").Length() != 0 {
		t.Error("page 2 takes live additions")
	}
	// A cursor filtered by status pages within the filter.
	doc = e.get(t, auth.RoleAdmin, "/executions?limit=1&status=awaiting_approval", http.StatusOK)
	next = doc.Find("[data-testid=next-page]").AttrOr("href", "")
	doc = e.get(t, auth.RoleAdmin, next, http.StatusOK)
	if got := rowIDs(doc); !slices.Equal(got, []string{h.a.ID}) {
		t.Errorf("filtered page 2 (%s): got %v, want [a]", next, got)
	}
	// An outdated cursor: the first page, said so.
	doc = e.get(t, auth.RoleAdmin, "/executions?cursor=not-a-cursor", http.StatusOK)
	if got := rowIDs(doc); !slices.Equal(got, all) || doc.Find("[data-testid=execution-notice]").Length() != 1 {
		t.Errorf("bad cursor: got %v and %d notices, want every row and a notice", got, doc.Find("[data-testid=execution-notice]").Length())
	}

	// Auditors read the history; guests have no executions at all.
	if got := rowIDs(e.get(t, auth.RoleAuditor, "/executions", http.StatusOK)); len(got) != 4 {
		t.Errorf("auditor: got %d rows, want 4", len(got))
	}
	e.get(t, auth.RoleGuest, "/executions", http.StatusForbidden)
}

func TestApprovalsInbox(t *testing.T) {
	t.Parallel()
	e := xlStart(t)
	doc := e.get(t, auth.RoleAdmin, "/approvals", http.StatusOK)
	if len(itemIDs(doc)) != 0 || doc.Find("[data-testid=approvals-empty]").Length() != 1 {
		t.Error("empty inbox: want no items and the empty state")
	}
	if doc.Find("ul#approval-items").Length() != 1 {
		t.Error("empty inbox: no ul#approval-items for live additions")
	}

	h := e.history(t)
	for _, r := range []auth.Role{auth.RoleAdmin, auth.RoleToolManager, auth.RoleToolUser} {
		doc := e.get(t, r, "/approvals", http.StatusOK)
		if got, want := itemIDs(doc), []string{h.b.ID, h.a.ID}; !slices.Equal(got, want) {
			t.Errorf("inbox as %s: got %v, want only the waiting ones %v", r, got, want)
		}
	}
	doc = e.get(t, auth.RoleAdmin, "/approvals", http.StatusOK)
	it := doc.Find("#approval-" + h.b.ID)
	if got := it.Find("[data-testid=approval-title]").Text(); got != h.b.Title() {
		t.Errorf("item b: title %q, want %q", got, h.b.Title())
	}
	if got := it.Find("[data-testid=risk-badge]").AttrOr("data-risk", ""); got != "medium" {
		t.Errorf("item b: risk %q, want medium", got)
	}
	if got := it.Find("[data-testid=approval-risk-why]").Text(); got != h.b.RiskWhy || got == "" {
		t.Errorf("item b: risk reason %q, want %q", got, h.b.RiskWhy)
	}
	if got := it.Find("[data-testid=approval-requester]").Text(); got != "xl-tool-user" {
		t.Errorf("item b: requester %q, want xl-tool-user", got)
	}
	if got := it.Find("[data-testid=approval-expires]").Text(); !strings.Contains(got, "Expires in") {
		t.Errorf("item b: expiry %q, want Expires in …", got)
	}
	if got := it.Find("[data-testid=approval-review]").AttrOr("href", ""); got != "/executions/"+h.b.ID {
		t.Errorf("item b: Review links to %q, want /executions/%s", got, h.b.ID)
	}
	// Auditors see executions but may not approve.
	e.get(t, auth.RoleAuditor, "/approvals", http.StatusForbidden)
	e.get(t, auth.RoleGuest, "/approvals", http.StatusForbidden)
}

// navCount reads the navigation's approvals count: its data-count, or "" when absent.
func navCount(doc *goquery.Document) (string, bool) {
	s := doc.Find("#app-nav #nav-approvals-count")
	if s.Length() == 0 {
		return "", false
	}
	return s.AttrOr("data-count", "?"), true
}

func TestNavApprovalsCount(t *testing.T) {
	t.Parallel()
	e := xlStart(t)
	// Nothing waits: the count is there (for live updates) but hidden.
	doc := e.get(t, auth.RoleAdmin, "/tokens", http.StatusOK)
	badge := doc.Find("#nav-approvals-count")
	if _, hidden := badge.Attr("hidden"); badge.Length() != 1 || !hidden || badge.AttrOr("data-count", "") != "0" {
		t.Errorf("no approvals: badge %d, hidden %v, count %q; want one hidden badge of 0", badge.Length(), hidden, badge.AttrOr("data-count", ""))
	}

	e.history(t) // two wait
	n, err := e.srv.Executions.AwaitingCount(context.Background())
	if err != nil || n != 2 {
		t.Fatalf("awaiting: got %d (%v), want 2", n, err)
	}
	for _, path := range []string{"/", "/tools", "/tokens", "/executions", "/approvals"} {
		for _, r := range []auth.Role{auth.RoleAdmin, auth.RoleToolManager, auth.RoleToolUser} {
			doc := e.get(t, r, path, http.StatusOK)
			if got, ok := navCount(doc); !ok || got != "2" {
				t.Errorf("%s as %s: nav count %q (%v), want 2", path, r, got, ok)
			}
			link := doc.Find("#app-nav a[href='/approvals']")
			if txt := link.Text(); !strings.Contains(txt, "2 plans await approval") {
				t.Errorf("%s as %s: the Approvals link reads %q, want the count in words", path, r, txt)
			}
			if _, hidden := link.Find("#nav-approvals-count").Attr("hidden"); hidden {
				t.Errorf("%s as %s: the count is hidden", path, r)
			}
			// Every page follows the executions topic to keep the count current (sampled,
			// on a page that shows no executions: nav:executions), from a cursor of its own.
			topics := strings.Split(doc.Find("[data-topics]").AttrOr("data-topics", ""), ",")
			if !slices.Contains(topics, executions.Topic) && !slices.Contains(topics, handlers.NavTopic(executions.Topic)) {
				t.Errorf("%s as %s: page follows %v, want the executions topic too", path, r, topics)
			}
			if doc.Find("#ws-cursor").AttrOr("data-last-event-id", "0") == "0" {
				t.Errorf("%s as %s: the page has no event cursor", path, r)
			}
		}
	}
	// Roles that may not approve have no count and follow no topic for it.
	doc = e.get(t, auth.RoleAuditor, "/tokens", http.StatusOK)
	if _, ok := navCount(doc); ok {
		t.Error("auditor: the navigation shows an approvals count")
	}
	if doc.Find("#app-nav a[href='/executions']").Length() != 1 || doc.Find("#app-nav a[href='/approvals']").Length() != 0 {
		t.Error("auditor: want Executions and no Approvals in the navigation")
	}
	if doc.Find("[ws-connect]").Length() != 0 {
		t.Error("auditor on /tokens: the page connects a websocket for nothing")
	}
	doc = e.get(t, auth.RoleGuest, "/", http.StatusOK)
	if _, ok := navCount(doc); ok || doc.Find("#app-nav a[href='/executions']").Length() != 0 {
		t.Error("guest: the navigation shows executions or an approvals count")
	}
}

// wsHeader is what a page's websocket handshake sends: c's cookies and this site's Origin.
func wsHeader(srv *webtest.Server, c *http.Client) http.Header {
	u, _ := url.Parse(srv.URL)
	var parts []string
	for _, ck := range c.Jar.Cookies(u) {
		parts = append(parts, ck.Name+"="+ck.Value)
	}
	h := http.Header{}
	h.Set("Cookie", strings.Join(parts, "; "))
	h.Set("Origin", srv.URL)
	return h
}

// wsDial opens /ws with c's session and subscribes to topics from lastID.
func wsDial(t *testing.T, srv *webtest.Server, c *http.Client, topics []string, lastID int64) *websocket.Conn {
	t.Helper()
	return wsDialWith(t, srv, websocket.DefaultDialer, wsHeader(srv, c), topics, lastID)
}

// wsDialWith opens /ws through d with the headers h (a session's or a token's) and
// subscribes to topics from lastID. It is closed at the end of the test.
func wsDialWith(t *testing.T, srv *webtest.Server, d *websocket.Dialer, h http.Header, topics []string, lastID int64) *websocket.Conn {
	t.Helper()
	conn, res, err := d.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/ws", h)
	if err != nil {
		status := 0
		if res != nil {
			status = res.StatusCode
		}
		t.Fatalf("dial /ws: %v (HTTP %d)", err, status)
	}
	t.Cleanup(func() { conn.Close() })
	if err := conn.WriteJSON(map[string]any{"subscribe": topics, "last_id": lastID}); err != nil {
		t.Fatal(err)
	}
	return conn
}

// wsUntil reads messages until one satisfies ok, and returns it parsed.
func wsUntil(t *testing.T, conn *websocket.Conn, what string, ok func(*goquery.Document) bool) *goquery.Document {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_ = conn.SetReadDeadline(deadline)
		_, msg, err := conn.ReadMessage()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		// Inside a template, as htmx parses it: a top-level <tr> survives.
		doc, err := goquery.NewDocumentFromReader(strings.NewReader("<template>" + string(msg) + "</template>"))
		if err != nil {
			t.Fatal(err)
		}
		if ok(doc) {
			return doc
		}
	}
}

func lastEventID(t *testing.T, srv *webtest.Server) int64 {
	t.Helper()
	var id int64
	if err := srv.Pool.QueryRow(context.Background(), `SELECT coalesce(max(id), 0) FROM events`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

func TestExecutionsLiveNavCount(t *testing.T) {
	t.Parallel()
	e := xlStart(t)
	// "approvals" (DESIGN §6's name) is the executions topic.
	conn := wsDial(t, e.srv, e.clients[auth.RoleAdmin], []string{web.ApprovalsTopic}, lastEventID(t, e.srv))

	// A MEDIUM plan waits: the count, a new history row, a new inbox entry and a toast.
	ex := e.create(t, auth.RoleToolUser, "xl__echo", `{"message":"live"}`)
	if ex.Status != executions.AwaitingApproval || ex.Risk != "medium" {
		t.Fatalf("plan: %s %s, want a medium plan awaiting approval", ex.Status, ex.Risk)
	}
	sawCount, sawRow, sawItem, sawToast := false, false, false, false
	wsUntil(t, conn, "the count, the new row, inbox entry and toast", func(doc *goquery.Document) bool {
		if b := doc.Find("#nav-approvals-count"); b.AttrOr("data-count", "") == "1" {
			sawCount = true
			if got := b.Text(); !strings.Contains(got, "1 plan awaits approval") {
				t.Errorf("count fragment reads %q, want the count in words", got)
			}
		}
		if doc.Find("tbody#execution-rows[hx-swap-oob=afterbegin] #execution-row-"+ex.ID).Length() == 1 {
			sawRow = true
		}
		if doc.Find("ul#approval-items[hx-swap-oob=afterbegin] #approval-"+ex.ID).Length() == 1 {
			sawItem = true
		}
		if d := doc.Find("#toasts [data-testid=approval-toast]"); d.Length() == 1 {
			sawToast = true
			if txt := d.Text(); !strings.Contains(txt, "xl-tool-user asks for approval: xl__echo") {
				t.Errorf("toast reads %q", txt)
			}
			if d.AttrOr("data-perm", "") != "execution.approve" {
				t.Error("the approval toast is not limited to approvers")
			}
		}
		return sawCount && sawRow && sawItem && sawToast
	})

	// Rejected: the entry leaves, the row changes in place, the count drops to 0 (hidden).
	if _, err := e.srv.Executions.Reject(context.Background(), e.caller(auth.RoleAdmin), ex.ID, "no"); err != nil {
		t.Fatal(err)
	}
	doc := wsUntil(t, conn, "the rejection", func(d *goquery.Document) bool {
		return d.Find("#approval-"+ex.ID+"[hx-swap-oob=delete]").Length() == 1
	})
	if got := doc.Find("#execution-row-"+ex.ID).AttrOr("data-status", ""); got != "cancelled" {
		t.Errorf("rejection: row status %q, want cancelled", got)
	}
	if doc.Find("#execution-rows").Length() != 0 {
		t.Error("rejection: the row is added again instead of replaced")
	}
	badge := doc.Find("#nav-approvals-count")
	if _, hidden := badge.Attr("hidden"); badge.AttrOr("data-count", "") != "0" || !hidden {
		t.Errorf("rejection: count %q hidden %v, want a hidden 0", badge.AttrOr("data-count", ""), hidden)
	}
}

func TestExecutionSettingsPage(t *testing.T) {
	t.Parallel()
	e := xlStart(t)
	ctx := context.Background()
	doc := e.get(t, auth.RoleAdmin, "/settings/executions", http.StatusOK)
	if got := doc.Find("[data-testid=approval-ttl-value]").AttrOr("value", ""); got != "1" {
		t.Errorf("default expiry: value %q, want 1 (day)", got)
	}
	if got := doc.Find("[data-testid=approval-ttl-unit] option[selected]").AttrOr("value", ""); got != "days" {
		t.Errorf("default expiry: unit %q, want days", got)
	}
	if _, ok := doc.Find("[data-testid=high-separation-auto]").Attr("checked"); !ok {
		t.Error("auto separation is not chosen by default")
	}
	if doc.Find("#app-nav a[href='/settings/executions'][aria-current=page]").Length() != 1 {
		t.Error("admin: the navigation has no current Settings entry")
	}

	post := func(r auth.Role, form url.Values) *http.Response {
		return e.srv.PostForm(t, e.clients[r], "/settings/executions", form)
	}
	res := post(auth.RoleAdmin, url.Values{"approval_ttl_value": {"90"}, "approval_ttl_unit": {"minutes"}, "high_separation": {"always"}})
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/settings/executions" {
		t.Fatalf("save: got %d to %q, want 303 back to the form", res.StatusCode, res.Header.Get("Location"))
	}
	st, err := e.srv.Executions.Settings(ctx)
	if err != nil || st.ApprovalTTL != 90*time.Minute || st.HighSeparation != decide.SeparationAlways {
		t.Fatalf("saved settings %+v (%v), want 90m and a separate approver", st, err)
	}
	var audited int
	if err := e.srv.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action = 'settings.executions' AND actor_name = 'admin'`).Scan(&audited); err != nil || audited != 1 {
		t.Errorf("audit: %d settings.executions rows by admin (%v), want 1", audited, err)
	}
	doc = e.get(t, auth.RoleAdmin, "/settings/executions", http.StatusOK)
	if doc.Find("[data-testid=flash]").Length() != 1 {
		t.Error("save: no flash after the redirect")
	}
	if v, u := doc.Find("[data-testid=approval-ttl-value]").AttrOr("value", ""), doc.Find("[data-testid=approval-ttl-unit] option[selected]").AttrOr("value", ""); v != "90" || u != "minutes" {
		t.Errorf("after save: expiry %s %s, want 90 minutes", v, u)
	}
	if _, ok := doc.Find("[data-testid=high-separation-always]").Attr("checked"); !ok {
		t.Error("after save: always is not the chosen separation")
	}
	// Without a choice (the page always sends one): kept, as the API keeps it.
	res = post(auth.RoleAdmin, url.Values{"approval_ttl_value": {"2"}, "approval_ttl_unit": {"hours"}})
	res.Body.Close()
	if st, _ := e.srv.Executions.Settings(ctx); res.StatusCode != http.StatusSeeOther || st.ApprovalTTL != 2*time.Hour || st.HighSeparation != decide.SeparationAlways {
		t.Errorf("save 2 hours without a separation: got %d, %+v, want always kept", res.StatusCode, st)
	}
	// An unknown separation is refused next to its field.
	res = post(auth.RoleAdmin, url.Values{"approval_ttl_value": {"2"}, "approval_ttl_unit": {"hours"}, "high_separation": {"sometimes"}})
	if doc := page(t, res); res.StatusCode != http.StatusUnprocessableEntity || doc.Find("[data-testid=error-high_separation]").Length() != 1 {
		t.Errorf("unknown separation: got %d, want 422 with the field's error", res.StatusCode)
	}

	// Bad input: 422, the error next to the field, the input kept, nothing saved.
	for _, tc := range []struct{ value, unit, says string }{
		{"0", "minutes", "1 or more"},
		{"", "hours", "required"},
		{"soon", "hours", "whole number"},
		{"45", "days", "between one minute and 30 days"},
		{"1", "fortnights", "minutes, hours or days"},
	} {
		res := post(auth.RoleAdmin, url.Values{"approval_ttl_value": {tc.value}, "approval_ttl_unit": {tc.unit}, "high_separation": {"always"}})
		doc := page(t, res)
		if res.StatusCode != http.StatusUnprocessableEntity {
			t.Errorf("%q %s: got %d, want 422", tc.value, tc.unit, res.StatusCode)
		}
		if got := doc.Find("[data-testid=error-approval_ttl]").Text(); !strings.Contains(got, tc.says) {
			t.Errorf("%q %s: error %q, want it to say %q", tc.value, tc.unit, got, tc.says)
		}
		if got := doc.Find("[data-testid=approval-ttl-value]").AttrOr("value", ""); got != tc.value {
			t.Errorf("%q %s: the form shows %q, want the input kept", tc.value, tc.unit, got)
		}
		if _, ok := doc.Find("[data-testid=high-separation-always]").Attr("checked"); !ok {
			t.Errorf("%q %s: the chosen separation was not kept", tc.value, tc.unit)
		}
	}
	if st, _ := e.srv.Executions.Settings(ctx); st.ApprovalTTL != 2*time.Hour || st.HighSeparation != decide.SeparationAlways {
		t.Errorf("refused input changed the settings: %+v", st)
	}

	// Only settings.manage: tool managers and everyone else get 403, and no nav entry.
	for _, r := range []auth.Role{auth.RoleToolManager, auth.RoleToolUser, auth.RoleAuditor, auth.RoleGuest} {
		e.get(t, r, "/settings/executions", http.StatusForbidden)
		res := post(r, url.Values{"approval_ttl_value": {"5"}, "approval_ttl_unit": {"minutes"}})
		res.Body.Close()
		if res.StatusCode != http.StatusForbidden {
			t.Errorf("POST as %s: got %d, want 403", r, res.StatusCode)
		}
		if r != auth.RoleGuest {
			if doc := e.get(t, r, "/tokens", http.StatusOK); doc.Find("#app-nav a[href='/settings/executions']").Length() != 0 {
				t.Errorf("%s: the navigation offers Settings", r)
			}
		}
	}
	if st, _ := e.srv.Executions.Settings(ctx); st.ApprovalTTL != 2*time.Hour {
		t.Errorf("refused requests changed the settings: %+v", st)
	}
}
