package web_test

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/app"
	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
)

// The audit browser (/audit, /audit/:id) and its API (/api/v1/audit...).

const auditPassword = "audit-browser-password-1"

type auditEnv struct {
	srv     *webtest.Server
	auditor *http.Client
	admin   *http.Client
	user    *http.Client // a tool user: no audit.view
	api     webtest.API  // the auditor's session
}

func auditStart(t *testing.T) *auditEnv {
	t.Helper()
	srv := webtest.Start(t, &webtest.Options{Denials: &audit.DenialOptions{PerActor: 1000, Total: 1000}})
	srv.CreateUser(t, "carol", auth.RoleAuditor, auditPassword)
	srv.CreateUser(t, "tina", auth.RoleToolUser, auditPassword)
	e := &auditEnv{srv: srv, auditor: srv.Login(t, "carol", auditPassword), admin: srv.Login(t, "admin", webtest.AdminPassword),
		user: srv.Login(t, "tina", auditPassword)}
	e.api = webtest.API{T: t, Srv: srv, C: e.auditor}
	return e
}

type auditList struct {
	Items []struct {
		ID         int64           `json:"id"`
		At         string          `json:"at"`
		ActorName  string          `json:"actor_name"`
		Action     string          `json:"action"`
		TargetType string          `json:"target_type"`
		TargetID   string          `json:"target_id"`
		Result     string          `json:"result"`
		RequestID  string          `json:"request_id"`
		Payload    json.RawMessage `json:"payload"`
		Hash       string          `json:"hash"`
	} `json:"items"`
	NextCursor string `json:"next_cursor"`
}

func doc(t *testing.T, res *http.Response) *goquery.Document {
	t.Helper()
	defer res.Body.Close()
	d, err := goquery.NewDocumentFromReader(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Auditors read the log through the page and the API; a role without audit.view is
// refused, and that refusal is itself browsable as denied.
func TestAuditBrowserAccessAndDenied(t *testing.T) {
	t.Parallel()
	e := auditStart(t)
	res := e.srv.Get(t, e.auditor, "/audit")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("/audit as an auditor: got %d", res.StatusCode)
	}
	d := doc(t, res)
	if d.Find(`nav a[href="/audit"]`).Length() != 1 {
		t.Error("the navigation has no link to the audit log for an auditor")
	}
	if d.Find(`[data-testid=audit-row]`).Length() == 0 {
		t.Error("the audit page lists no entries (sign-ins at least)")
	}
	res = e.srv.Get(t, e.user, "/audit")
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("/audit as a tool user: got %d, want 403", res.StatusCode)
	}
	var l auditList
	e.api.JSON(http.MethodGet, "/api/v1/audit?result=denied&actor=tina", nil, http.StatusOK, &l)
	if len(l.Items) != 1 || l.Items[0].Action != "request.denied" || l.Items[0].Result != "denied" || l.Items[0].TargetID != "GET /audit" {
		t.Fatalf("refused requests: got %+v", l.Items)
	}
	d = doc(t, e.srv.Get(t, e.auditor, "/audit?result=denied"))
	rows := d.Find(`[data-testid=audit-row]`)
	if rows.Length() != 1 || rows.AttrOr("data-result", "") != "denied" {
		t.Fatalf("page filtered on denied: got %d rows", rows.Length())
	}
}

func TestAuditAPIFiltersPagesAndErrors(t *testing.T) {
	t.Parallel()
	e := auditStart(t)
	// Names of letters outside hex digits: the text filter matches whole words, and a
	// digit alone can be a word of a random id (3b54… splits into 3, b, 54…).
	for _, w := range []string{"plum", "wren", "lynx", "onyx", "jolt"} {
		e.srv.PostForm(t, e.admin, "/tokens", url.Values{"name": {"tok-" + w}}).Body.Close()
	}
	var l auditList
	e.api.JSON(http.MethodGet, "/api/v1/audit?action=token.create&limit=2", nil, http.StatusOK, &l)
	if len(l.Items) != 2 || l.NextCursor == "" || l.Items[0].ID <= l.Items[1].ID {
		t.Fatalf("first page: got %+v", l)
	}
	seen := len(l.Items)
	for l.NextCursor != "" {
		cur := l.NextCursor
		l = auditList{}
		e.api.JSON(http.MethodGet, "/api/v1/audit?action=token.create&limit=2&cursor="+cur, nil, http.StatusOK, &l)
		seen += len(l.Items)
	}
	if seen != 5 {
		t.Fatalf("pages held %d token.create entries, want 5", seen)
	}
	l = auditList{}
	e.api.JSON(http.MethodGet, "/api/v1/audit?action=auth&actor=admin&q=tok-onyx", nil, http.StatusOK, &l)
	if len(l.Items) != 1 || l.Items[0].Action != "token.create" {
		t.Fatalf("group and text: got %+v", l.Items)
	}
	webtest.Run(t, []webtest.Case{
		{Name: "bad result", As: e.api, Method: http.MethodGet, Path: "/api/v1/audit?result=maybe", Status: 400, Code: "invalid_input", Details: []string{"result"}},
		{Name: "bad from", As: e.api, Method: http.MethodGet, Path: "/api/v1/audit?from=yesterday", Status: 400, Code: "invalid_input", Details: []string{"from"}},
		{Name: "bad limit", As: e.api, Method: http.MethodGet, Path: "/api/v1/audit?limit=0", Status: 400, Code: "invalid_input", Details: []string{"limit"}},
		{Name: "bad cursor", As: e.api, Method: http.MethodGet, Path: "/api/v1/audit?cursor=x", Status: 400, Code: "invalid_input", Details: []string{"cursor"}},
		{Name: "a cursor in time order that names no entry", As: e.api, Method: http.MethodGet, Path: "/api/v1/audit?from=2000-01-01&cursor=999999999",
			Status: 400, Code: "invalid_input", Details: []string{"cursor"}},
		{Name: "bad export format", As: e.api, Method: http.MethodGet, Path: "/api/v1/audit/export?format=xml", Status: 400, Code: "invalid_input", Details: []string{"format"}},
		{Name: "entry not found", As: e.api, Method: http.MethodGet, Path: "/api/v1/audit/999999", Status: 404, Code: "not_found"},
		{Name: "tool user", As: webtest.API{Srv: e.srv, C: e.user}, Method: http.MethodGet, Path: "/api/v1/audit", Status: 403, Code: "forbidden"},
	})
	// On the page, such a cursor gives the first page and says why.
	d0 := doc(t, e.srv.Get(t, e.auditor, "/audit?from=2000-01-01&cursor=999999999"))
	if !strings.Contains(d0.Text(), "That page link is out of date") || d0.Find(`[data-testid=audit-row]`).Length() == 0 {
		t.Fatalf("a cursor that names no entry on the page: %q", strings.Join(strings.Fields(d0.Find("main").Text()), " "))
	}
	// A bad filter on the page is said next to its field, and nothing is listed.
	res := e.srv.Get(t, e.auditor, "/audit?result=maybe&from=nope")
	if res.StatusCode != http.StatusBadRequest {
		t.Fatalf("bad filters on the page: got %d, want 400", res.StatusCode)
	}
	d := doc(t, res)
	if d.Find(`[data-testid=error-result]`).Length() != 1 || d.Find(`[data-testid=error-from]`).Length() != 1 || d.Find(`[data-testid=audit-row]`).Length() != 0 {
		t.Fatal("bad filters: want errors at result and from and no rows")
	}
}

func TestAuditExportStreamsAndIsAudited(t *testing.T) {
	t.Parallel()
	e := auditStart(t)
	get := func(path string) (*http.Response, string) {
		res := e.srv.Get(t, e.auditor, path)
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	res, body := get("/api/v1/audit/export?format=jsonl&actor=carol")
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/jsonl") ||
		!strings.Contains(res.Header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("jsonl export: %d %v", res.StatusCode, res.Header)
	}
	sc := bufio.NewScanner(strings.NewReader(body))
	var actions []string
	for sc.Scan() {
		var it struct{ Action, ActorName string }
		if err := json.Unmarshal(sc.Bytes(), &it); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		actions = append(actions, it.Action)
	}
	// Newest first: the export's own entry, then carol's sign-in.
	if len(actions) != 2 || actions[0] != "audit.export" || actions[1] != "user.login" {
		t.Fatalf("jsonl export of carol's entries: got %v", actions)
	}
	res, body = get("/api/v1/audit/export?format=csv&action=audit")
	recs, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	// Header, this export's start, the first export's end and start.
	if err != nil || res.StatusCode != 200 || len(recs) != 4 || recs[0][5] != "action" || recs[1][5] != "audit.export" {
		t.Fatalf("csv export: %d %v %v", res.StatusCode, recs, err)
	}
	if !strings.Contains(recs[1][13], "action=audit") || !strings.Contains(recs[1][13], `"format":"csv"`) {
		t.Fatalf("the export's entry does not say what was exported: %s", recs[1][13])
	}
}

func TestAuditEntryPageAndRequestID(t *testing.T) {
	t.Parallel()
	e := auditStart(t)
	// A role change records from/to; its request id links every entry of the request.
	api := webtest.API{T: t, Srv: e.srv, C: e.admin}
	var u struct {
		ID string `json:"id"`
	}
	api.JSON(http.MethodPost, "/api/v1/users", map[string]any{"username": "dave", "role": "tool_user", "password": auditPassword}, 201, nil)
	var users struct {
		Users []struct{ ID, Username string } `json:"users"`
	}
	api.JSON(http.MethodGet, "/api/v1/users", nil, 200, &users)
	for _, x := range users.Users {
		if x.Username == "dave" {
			u.ID = x.ID
		}
	}
	api.JSON(http.MethodPatch, "/api/v1/users/"+u.ID, map[string]any{"role": "auditor"}, 200, nil)
	var l auditList
	e.api.JSON(http.MethodGet, "/api/v1/audit?action=user.role_change", nil, 200, &l)
	if len(l.Items) != 1 || l.Items[0].RequestID == "" {
		t.Fatalf("role change entry: %+v", l.Items)
	}
	it := l.Items[0]
	d := doc(t, e.srv.Get(t, e.auditor, fmt.Sprintf("/audit/%d", it.ID)))
	if got := d.Find(`[data-testid=entry-hash]`).Text(); got != it.Hash || len(got) != 64 {
		t.Fatalf("hash: got %q, want %q", got, it.Hash)
	}
	if d.Find(`[data-testid=entry-prev-hash]`).Text() == "" || d.Find(`[data-testid=entry-id]`).Text() != fmt.Sprint(it.ID) {
		t.Fatal("chain position missing")
	}
	ch := d.Find(`[data-testid=entry-change]`)
	if ch.Length() != 1 || !strings.Contains(ch.Text(), "tool_user") || !strings.Contains(ch.Text(), "auditor") {
		t.Fatalf("changes: got %q", ch.Text())
	}
	href, ok := d.Find(`[data-testid=entry-request]`).Attr("href")
	if !ok || !strings.Contains(href, "request_id="+url.QueryEscape(it.RequestID)) {
		t.Fatalf("request link: got %q", href)
	}
	d = doc(t, e.srv.Get(t, e.auditor, href))
	if d.Find(`[data-testid=audit-row]`).Length() < 1 {
		t.Fatal("the request's list is empty")
	}
	res := e.srv.Get(t, e.auditor, "/audit/not-a-number")
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Fatalf("bad entry id: got %d, want 404", res.StatusCode)
	}
}

func TestAuditSavedViewsAndVerify(t *testing.T) {
	t.Parallel()
	e := auditStart(t)
	res := e.srv.PostForm(t, e.auditor, "/audit/views", url.Values{"name": {"Refusals"}, "query": {"result=denied&cursor=5"}})
	res.Body.Close()
	d := doc(t, e.srv.Get(t, e.auditor, "/audit?result=denied"))
	v := d.Find(`[data-testid=saved-view] a`)
	if v.Length() != 1 || v.Text() != "Refusals" || v.AttrOr("href", "") != "/audit?result=denied" || v.AttrOr("aria-current", "") != "true" {
		t.Fatalf("saved view: got %d %q %q", v.Length(), v.Text(), v.AttrOr("href", ""))
	}
	// Another person does not see it.
	if doc(t, e.srv.Get(t, e.admin, "/audit")).Find(`[data-testid=saved-view]`).Length() != 0 {
		t.Fatal("admin sees carol's saved view")
	}
	action, _ := d.Find(`[data-testid=saved-view] form`).Attr("action")
	e.srv.PostForm(t, e.auditor, action, nil).Body.Close()
	if doc(t, e.srv.Get(t, e.auditor, "/audit")).Find(`[data-testid=saved-view]`).Length() != 0 {
		t.Fatal("deleted view still listed")
	}
	var l auditList
	e.api.JSON(http.MethodGet, "/api/v1/audit?action=audit", nil, 200, &l)
	if len(l.Items) != 2 || l.Items[0].Action != "audit.saved_view.delete" || l.Items[1].Action != "audit.saved_view.create" {
		t.Fatalf("saved views audited: %+v", l.Items)
	}
	var v1 struct {
		OK              bool  `json:"ok"`
		VerifiedThrough int64 `json:"verified_through"`
		Checked         int64 `json:"checked"`
	}
	e.api.JSON(http.MethodGet, "/api/v1/audit/verify", nil, 200, &v1)
	if !v1.OK || v1.VerifiedThrough < 5 || v1.Checked != v1.VerifiedThrough {
		t.Fatalf("verify: %+v", v1)
	}
	// A link on another site does not start a check in a signed-in browser; this site's
	// own fetch does, and so does POST.
	// The same for an export, which is recorded as the person's.
	for _, path := range []string{"/api/v1/audit/verify", "/api/v1/audit/export?format=jsonl"} {
		for site, want := range map[string]int{"cross-site": 403, "same-site": 403, "same-origin": 200, "HEAD same-site": 405} {
			method := http.MethodGet
			if m, s, ok := strings.Cut(site, " "); ok {
				method, site = m, s
			}
			req, _ := http.NewRequest(method, e.srv.URL+path, nil)
			req.Header.Set("Sec-Fetch-Site", site)
			res, err := e.auditor.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != want {
				t.Fatalf("%s %s from %s: %d, want %d", method, path, site, res.StatusCode, want)
			}
		}
	}
	e.api.JSON(http.MethodPost, "/api/v1/audit/verify", nil, 200, &v1)
	d = doc(t, e.srv.Get(t, e.auditor, "/audit"))
	if st := d.Find(`[data-testid=audit-chain]`); st.AttrOr("data-state", "") != "ok" ||
		d.Find(`[data-testid=chain-through]`).Text() != fmt.Sprint(v1.VerifiedThrough) {
		t.Fatalf("chain status after verify: %q", st.Text())
	}
}

// Auditors never see a secret value: neither a server's secret header nor a tool's
// secret default (configured, then used by a call whose result echoes it) is on the
// audit pages (the lists and every entry's detail), in the API's entries or in an
// export; each of those answers 200, so an error page cannot pass for a clean one.
func TestAuditShowsNoSecrets(t *testing.T) {
	t.Parallel()
	e := auditStart(t)
	const canary = "canary-secret-value-7f3a9"
	const toolCanary = "sk-auditTOOLcanary9q8w7e6r5t"
	api := webtest.API{T: t, Srv: e.srv, C: e.admin}
	api.JSON(http.MethodPost, "/api/v1/servers", map[string]any{"name": "sec", "type": "streamable_http", "url": "http://127.0.0.1:1/mcp",
		"headers": map[string]string{"Authorization": "Bearer " + canary}, "enabled": false}, 201, nil)
	// A tool whose default is the secret, and a call that uses (and echoes) it.
	e.srv.LiveServer(t, "sectool", true, "echo")
	toolID := e.srv.ToolID(t, "sectool__echo")
	var tl struct {
		Version int `json:"configuration_version"`
	}
	api.JSON(http.MethodGet, "/api/v1/tools/"+toolID, nil, 200, &tl)
	api.JSON(http.MethodPatch, "/api/v1/tools/"+toolID, map[string]any{"configuration": map[string]any{"defaults": map[string]any{"message": toolCanary}},
		"configuration_version": tl.Version, "reason": "audit canary"}, 200, nil)
	webtest.API{T: t, Srv: e.srv, Bearer: e.srv.Token(t, "admin")}.JSON(http.MethodPost, "/api/v1/tools/call",
		map[string]any{"tool": "sectool__echo", "arguments": map[string]any{}}, 200, nil)

	paths := []string{"/audit", "/audit?action=servers", "/audit?action=tools", "/audit?action=calls", "/api/v1/audit",
		"/api/v1/audit/export?format=jsonl", "/api/v1/audit/export?format=csv", "/api/v1/audit?q=" + canary, "/api/v1/audit?q=" + toolCanary}
	// Every entry about the server or the tool, on its page and in the API: the
	// server's creation, the tool's configuration (its before and after) and the call.
	seen := map[string]bool{}
	for _, filter := range []string{"action=servers", "target_id=" + toolID} {
		var l auditList
		e.api.JSON(http.MethodGet, "/api/v1/audit?"+filter, nil, 200, &l)
		for _, it := range l.Items {
			seen[it.Action] = true
			paths = append(paths, fmt.Sprintf("/audit/%d", it.ID), fmt.Sprintf("/api/v1/audit/%d", it.ID))
		}
	}
	for _, a := range []string{"server.create", "tool.configure", "tool.call"} {
		if !seen[a] {
			t.Fatalf("no %s entry to look at (saw %v)", a, seen)
		}
	}
	for _, path := range paths {
		res := e.srv.Get(t, e.auditor, path)
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Errorf("GET %s as an auditor: %d, want 200: %.300s", path, res.StatusCode, b)
		}
		for _, c := range []string{canary, toolCanary} {
			if strings.Contains(string(b), c) {
				t.Errorf("%s shows the secret value %q", path, c)
			}
		}
	}
}

// The audit routes are declared with the audit permissions: audit.export for the
// export, audit.view for the rest.
func TestAuditRoutePermissions(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	n := 0
	for _, r := range srv.Web.Routes() {
		if r.Path != "/audit" && !strings.HasPrefix(r.Path, "/audit/") && r.Path != "/api/v1/audit" && !strings.HasPrefix(r.Path, "/api/v1/audit/") {
			continue
		}
		n++
		want := auth.PermAuditView
		if strings.HasSuffix(r.Path, "/export") {
			want = auth.PermAuditExport
		}
		if r.Perm != want {
			t.Errorf("%s %s: declared %s, want %s", r.Method, r.Path, r.Perm, want)
		}
	}
	if n < 10 {
		t.Fatalf("found %d audit routes, want the page's and the API's", n)
	}
}

// The "N new entries" banner counts what is newer than the page's top and matches its
// filters.
func TestAuditNewEntriesBanner(t *testing.T) {
	t.Parallel()
	e := auditStart(t)
	ctx := context.Background()
	d := doc(t, e.srv.Get(t, e.auditor, "/audit?action=token.create"))
	banner := d.Find(`[data-testid=audit-new]`)
	newURL, ok := banner.Attr("hx-get")
	if !ok || banner.AttrOr("data-top", "") != "0" || banner.Find("button").Length() != 0 {
		t.Fatalf("banner on an empty page: %q top=%q", newURL, banner.AttrOr("data-top", ""))
	}
	for i := range 3 {
		e.srv.PostForm(t, e.admin, "/tokens", url.Values{"name": {fmt.Sprintf("n-%d", i)}}).Body.Close()
	}
	// Opened by itself (not by the page's htmx), the fragment's address is the page.
	if res := e.srv.Get(t, e.auditor, newURL); res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/audit?action=token.create" {
		t.Fatalf("GET %s without htmx: %d to %q, want 303 to the page with its filters", newURL, res.StatusCode, res.Header.Get("Location"))
	}
	if res := e.srv.Get(t, e.auditor, "/audit/verify"); res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/audit" {
		t.Fatalf("GET /audit/verify without htmx: %d to %q, want 303 to the page", res.StatusCode, res.Header.Get("Location"))
	}
	d = doc(t, hxGet(t, e.srv, e.auditor, newURL))
	btn := d.Find(`[data-testid=audit-new-button]`)
	if !strings.Contains(strings.Join(strings.Fields(btn.Text()), " "), "3 new entries") {
		t.Fatalf("banner after three tokens: %q", btn.Text())
	}
	if got := btn.AttrOr("hx-get", ""); got != "/audit?action=token.create" {
		t.Fatalf("the banner reloads %q", got)
	}
	// Asked again with the same count, the banner is left as it is (204: htmx swaps
	// nothing, so its button keeps the focus); a fourth entry changes it.
	again := d.Find(`[data-testid=audit-new]`).AttrOr("hx-get", "")
	noChange := func(u string) {
		t.Helper()
		res := hxGet(t, e.srv, e.auditor, u)
		res.Body.Close()
		if res.StatusCode != http.StatusNoContent {
			t.Fatalf("GET %s: %d, want 204 (the count the banner shows)", u, res.StatusCode)
		}
	}
	noChange(again)
	e.srv.PostForm(t, e.admin, "/tokens", url.Values{"name": {"n-3"}}).Body.Close()
	if got := doc(t, hxGet(t, e.srv, e.auditor, again)).Find(`[data-testid=audit-new-button]`).Text(); !strings.Contains(strings.Join(strings.Fields(got), " "), "4 new entries") {
		t.Fatalf("banner after a fourth token: %q", got)
	}
	// The first page's banner counts from its top.
	d = doc(t, e.srv.Get(t, e.auditor, "/audit?action=token.create"))
	newURL = d.Find(`[data-testid=audit-new]`).AttrOr("hx-get", "")
	if d.Find(`[data-testid=audit-new]`).AttrOr("data-top", "") == "0" || !strings.Contains(newURL, "after=") {
		t.Fatalf("banner of a full page: %q", newURL)
	}
	noChange(newURL) // nothing new: no count to show

	// A page in time order counts from the largest id it lists, not from its first row:
	// an entry can take its time before an entry appended ahead of it.
	var newest int64
	if err := e.srv.Pool.QueryRow(ctx, `SELECT max(id) FROM audit_log WHERE action = 'token.create'`).Scan(&newest); err != nil {
		t.Fatal(err)
	}
	if _, err := e.srv.Owner.Exec(ctx, `ALTER TABLE audit_log DISABLE TRIGGER audit_log_no_update;
		UPDATE audit_log SET at = at - interval '1 hour' WHERE id = `+strconv.FormatInt(newest, 10)+`;
		ALTER TABLE audit_log ENABLE TRIGGER audit_log_no_update`); err != nil {
		t.Fatal(err)
	}
	d = doc(t, e.srv.Get(t, e.auditor, "/audit?action=token.create&from=2000-01-01"))
	if top := d.Find(`[data-testid=audit-new]`).AttrOr("data-top", ""); top != strconv.FormatInt(newest, 10) {
		t.Fatalf("banner of a page in time order counts from %s, want %d, the largest id listed", top, newest)
	}
	noChange(d.Find(`[data-testid=audit-new]`).AttrOr("hx-get", ""))
}

// The page's Verify and GET /api/v1/audit/verify reach the newest signed checkpoint, as
// `toolwarden audit verify` does: a database owner who deletes the end of the log is
// caught, though the chain that is left verifies on its own.
func TestAuditVerifyReachesCheckpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dataDir := t.TempDir()
	cps := webtest.Options{Denials: &audit.DenialOptions{PerActor: 1000, Total: 1000},
		Checkpoints: app.CheckpointConfig{Dir: filepath.Join(dataDir, "checkpoints"), KeyFile: filepath.Join(dataDir, "checkpoint.key")}}
	srv := webtest.Start(t, &cps)
	srv.CreateUser(t, "carol", auth.RoleAuditor, auditPassword)
	auditor := srv.Login(t, "carol", auditPassword)
	api := webtest.API{T: t, Srv: srv, C: auditor}
	type verification struct {
		OK           bool   `json:"ok"`
		BadID        int64  `json:"bad_id"`
		Reason       string `json:"reason"`
		Checkpoint   string `json:"checkpoint"`
		CheckpointID int64  `json:"checkpoint_id"`
	}
	var v verification
	api.JSON(http.MethodGet, "/api/v1/audit/verify", nil, 200, &v)
	if !v.OK || v.CheckpointID != 0 || !strings.Contains(v.Checkpoint, "no checkpoint yet") {
		t.Fatalf("verify before any checkpoint: %+v, want OK and saying there is no checkpoint yet", v)
	}
	if c := doc(t, srv.Get(t, auditor, "/audit")).Find(`[data-testid=chain-checkpoint]`).Text(); !strings.Contains(c, "without a checkpoint: no checkpoint yet") {
		t.Fatalf("page's checkpoint before any: got %q, want it to say there is none yet", c)
	}

	admin := webtest.API{T: t, Srv: srv, C: srv.Login(t, "admin", webtest.AdminPassword)}
	for _, name := range []string{"dave", "erin", "fred"} {
		admin.JSON(http.MethodPost, "/api/v1/users", map[string]any{"username": name, "role": "tool_user", "password": auditPassword}, 201, nil)
	}
	signer, err := audit.OpenSigner(cps.Checkpoints.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := audit.MakeCheckpoint(ctx, srv.Pool, signer)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := audit.WriteCheckpoint(cps.Checkpoints.Dir, cp); err != nil {
		t.Fatal(err)
	}
	api.JSON(http.MethodGet, "/api/v1/audit/verify", nil, 200, &v)
	if !v.OK || v.CheckpointID != cp.ID || !strings.Contains(v.Checkpoint, fmt.Sprintf("entry %d at", cp.ID)) ||
		!strings.Contains(v.Checkpoint, "signed by the trusted key "+cp.KeyFingerprint) {
		t.Fatalf("verify with a checkpoint of entry %d: %+v", cp.ID, v)
	}
	// Auditors learn which checkpoint, not where the server keeps its files.
	if strings.Contains(v.Checkpoint, dataDir) {
		t.Fatalf("the checkpoint note names the server's data dir: %q", v.Checkpoint)
	}
	// Recorded with the check: another replica (a Log of its own) says the same.
	other, err := audit.NewLog(srv.Pool).VerifyStatus(ctx)
	if err != nil || other == nil || other.CheckpointID != cp.ID || other.Checkpoint != v.Checkpoint {
		t.Fatalf("the recorded check as another replica reads it: %+v %v, want checkpoint %d %q", other, err, cp.ID, v.Checkpoint)
	}

	// A newer checkpoint whose statement was altered is refused, not passed over.
	forged := cp
	forged.At, forged.ID = cp.At.Add(time.Second), cp.ID+100
	forgedPath, err := audit.WriteCheckpoint(cps.Checkpoints.Dir, forged)
	if err != nil {
		t.Fatal(err)
	}
	var bad struct {
		OK  bool   `json:"ok"`
		Err string `json:"error"`
	}
	api.JSON(http.MethodGet, "/api/v1/audit/verify", nil, 200, &bad)
	if bad.OK || !strings.Contains(bad.Err, "signature does not verify") || strings.Contains(bad.Err, dataDir) {
		t.Fatalf("verify with a forged newest checkpoint: %+v, want not OK naming the signature", bad)
	}
	// Recorded as a failed check, so the page does not go back to the last one that passed.
	var lastOK bool
	var lastReason string
	if err := srv.Pool.QueryRow(ctx, `SELECT ok, reason FROM audit_verifications ORDER BY id DESC LIMIT 1`).Scan(&lastOK, &lastReason); err != nil {
		t.Fatal(err)
	}
	if lastOK || !strings.Contains(lastReason, "signature does not verify") {
		t.Fatalf("the recorded check after a forged checkpoint: ok=%v reason %q", lastOK, lastReason)
	}
	if err := os.Remove(forgedPath); err != nil {
		t.Fatal(err)
	}

	// The application's role cannot delete entries; the tables' owner can.
	if _, err := srv.Pool.Exec(ctx, `DELETE FROM audit_log WHERE id >= $1`, cp.ID-1); err == nil {
		t.Fatal("the app role deleted audit entries")
	}
	owner, err := pgx.Connect(ctx, srv.App.DBURL)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close(ctx)
	if _, err := owner.Exec(ctx, `ALTER TABLE audit_log DISABLE TRIGGER USER`); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Exec(ctx, `DELETE FROM audit_log WHERE id >= $1`, cp.ID-1); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Exec(ctx, `ALTER TABLE audit_log ENABLE TRIGGER USER`); err != nil {
		t.Fatal(err)
	}

	api.JSON(http.MethodGet, "/api/v1/audit/verify", nil, 200, &v)
	if v.OK || v.BadID != cp.ID-1 || !strings.Contains(v.Reason, "the end of the log was deleted") || v.CheckpointID != cp.ID {
		t.Fatalf("verify after the end was deleted: %+v, want broken at entry %d, the end of the log deleted", v, cp.ID-1)
	}
	// The page's Verify runs the same check in the background.
	srv.PostForm(t, auditor, "/audit/verify", nil).Body.Close()
	srv.App.AuditLog.WaitVerify()
	d := doc(t, srv.Get(t, auditor, "/audit"))
	if st := d.Find(`[data-testid=audit-chain]`).AttrOr("data-state", ""); st != "broken" {
		t.Fatalf("page's chain state: got %q, want broken", st)
	}
	if r := d.Find(`[data-testid=chain-reason]`).Text(); !strings.Contains(r, "the end of the log was deleted") {
		t.Fatalf("page's reason: got %q", r)
	}
	if c := d.Find(`[data-testid=chain-checkpoint]`).Text(); !strings.Contains(c, fmt.Sprintf("entry %d at", cp.ID)) {
		t.Fatalf("page's checkpoint: got %q, want the checkpoint of entry %d", c, cp.ID)
	}
}

// uaBearer sends a bearer token and a user agent of its own, as an agent would.
type uaBearer struct{ token, ua string }

func (b uaBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	r.Header.Set("User-Agent", b.ua)
	return http.DefaultTransport.RoundTrip(r)
}

// The entry page says who acted: the API token's name, the user agent and, for a call
// through /mcp, the MCP client; with a link to the target and, for an edit, the diff of
// before and after. Every audited request records its token and user agent, not only a
// sign-in.
func TestAuditEntryShowsWho(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := auditStart(t)
	e.srv.LiveServer(t, "live", true, "echo")
	admin, err := e.srv.Auth.GetUserByName(ctx, "admin")
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := e.srv.Auth.CreateToken(ctx, audit.System, admin.ID, auth.NewToken{Name: "ci-agent"})
	if err != nil {
		t.Fatal(err)
	}
	agent := &http.Client{Transport: uaBearer{token: tok, ua: "audit-agent-http/3.4"}}

	// A tool call through /mcp.
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "audit-agent", Version: "2.1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: e.srv.URL + "/mcp", HTTPClient: agent}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "live__echo", Arguments: map[string]any{"message": "hi"}}); err != nil || res.IsError {
		t.Fatalf("call through /mcp: %v %+v", err, res)
	}
	toolID := e.srv.ToolID(t, "live__echo")
	// An edit of the tool through the API, with the same token.
	req, err := http.NewRequest(http.MethodPatch, e.srv.URL+"/api/v1/tools/"+toolID, strings.NewReader(`{"risk":"high","tags":["audited"]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := agent.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("PATCH tool: %d", res.StatusCode)
	}

	entry := func(action string) *goquery.Document {
		t.Helper()
		var l auditList
		e.api.JSON(http.MethodGet, "/api/v1/audit?action="+action+"&target_type=tool&target_id="+toolID, nil, 200, &l)
		if len(l.Items) != 1 {
			t.Fatalf("%s entries of the tool: %+v", action, l.Items)
		}
		// The admin may open the tool, so the target is a link.
		return doc(t, e.srv.Get(t, e.admin, fmt.Sprintf("/audit/%d", l.Items[0].ID)))
	}
	who := func(d *goquery.Document, what string) {
		t.Helper()
		if got := d.Find(`[data-testid=entry-token]`).Text(); got != "ci-agent" {
			t.Errorf("%s: token: got %q, want ci-agent", what, got)
		}
		if got := d.Find(`[data-testid=entry-user-agent]`).Text(); got != "audit-agent-http/3.4" {
			t.Errorf("%s: user agent: got %q", what, got)
		}
		if href := d.Find(`[data-testid=entry-target-link]`).AttrOr("href", ""); href != "/tools/"+toolID {
			t.Errorf("%s: target link: got %q, want /tools/%s", what, href, toolID)
		}
	}
	d := entry("tool.call")
	who(d, "tool.call")
	if got := d.Find(`[data-testid=entry-client]`).Text(); !strings.Contains(got, "audit-agent") {
		t.Errorf("tool.call: MCP client: got %q, want audit-agent", got)
	}
	d = entry("tool.configure")
	who(d, "tool.configure")
	diff := d.Find(`[data-testid=entry-diff]`).Text()
	if !strings.Contains(diff, "audited") || !strings.Contains(diff, "high") {
		t.Errorf("tool.configure: diff of before and after: got %q", diff)
	}
}

// Who acted is told apart by kind: a failed sign-in is listed under the name typed,
// marked as not signed in; Toolwarden's own entries read "Toolwarden", not "system", so
// a user named "system" is not taken for it; an actor with no name has no filter link.
func TestAuditTellsActorsApart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := auditStart(t)
	e.srv.CreateUser(t, "system", auth.RoleToolUser, auditPassword)
	e.srv.Login(t, "system", auditPassword)
	res, err := http.PostForm(e.srv.URL+"/login", url.Values{"username": {"carol"}, "password": {"not-her-password"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if err := audit.AppendAlone(ctx, e.srv.Pool, audit.Entry{Actor: audit.System, Action: "server.health"}); err != nil {
		t.Fatal(err)
	}
	if err := audit.AppendAlone(ctx, e.srv.Pool, audit.Entry{Actor: audit.Actor{Kind: audit.ActorAnonymous}, Action: "request.denied", Result: audit.ResultDenied}); err != nil {
		t.Fatal(err)
	}
	row := func(action string) *goquery.Selection {
		t.Helper()
		r := doc(t, e.srv.Get(t, e.auditor, "/audit?action="+action)).Find(`[data-testid=audit-row]`).First()
		if r.Length() == 0 {
			t.Fatalf("no %s row", action)
		}
		return r.Find("td").Eq(2)
	}
	who := func(s *goquery.Selection) string { return strings.Join(strings.Fields(s.Text()), " ") }
	if got := who(row("user.login_failed")); got != "carol not signed in" {
		t.Errorf("a failed sign-in typed as carol: %q", got)
	}
	if got := who(row("server.health")); got != "Toolwarden system" {
		t.Errorf("Toolwarden's own entry: %q", got)
	}
	if got := who(row("user.login")); got != "system" {
		t.Errorf("the sign-in of a user named system: %q", got)
	}
	id := row("request.denied").Parent().AttrOr("data-audit-id", "")
	d := doc(t, e.srv.Get(t, e.auditor, "/audit/"+id))
	if a := d.Find(`[data-testid=entry-actor]`); a.Find("a").Length() != 0 || strings.TrimSpace(a.Text()) != "anonymous" {
		t.Errorf("an actor with no name: %q, links %d; want anonymous, no filter link", strings.TrimSpace(a.Text()), a.Find("a").Length())
	}
	// "Every entry under this name" from Toolwarden's entry lists Toolwarden's only, not
	// the user named system's; the filter form keeps the kind chosen.
	id = row("server.health").Parent().AttrOr("data-audit-id", "")
	link, _ := doc(t, e.srv.Get(t, e.auditor, "/audit/"+id)).Find(`[data-testid=entry-actor] a`).Attr("href")
	if !strings.Contains(link, "actor_kind=system") {
		t.Fatalf("the actor link of Toolwarden's entry: %q, want it to carry actor_kind=system", link)
	}
	list := doc(t, e.srv.Get(t, e.auditor, link))
	list.Find(`[data-testid=audit-row]`).Each(func(_ int, r *goquery.Selection) {
		if got := who(r.Find("td").Eq(2)); got != "Toolwarden system" {
			t.Errorf("under Toolwarden's actor link: a row of %q", got)
		}
	})
	if got := list.Find(`[data-testid=filter-actor-kind] option[selected]`).AttrOr("value", ""); got != "system" {
		t.Errorf("the actor kind filter shows %q, want system", got)
	}
}

// Ids are consecutive, so a missing one is a deleted entry even when the chain links
// across the hole (recomputed by someone who knows the hash function): the API's check
// and the page's say the chain is broken there, and which ids are missing.
func TestAuditVerifyFailsOnMissingIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := auditStart(t)
	recs, err := audit.Recent(ctx, e.srv.Pool, 1)
	if err != nil || len(recs) != 1 {
		t.Fatalf("head: %v %v", recs, err)
	}
	head := audit.Head{ID: recs[0].ID, Hash: recs[0].Hash}
	// The next entry takes id head+4 and links to the head: ids head+1..head+3 missing.
	b, err := audit.NewBatch([]audit.Entry{{Actor: audit.System, Action: "forged.entry"}})
	if err != nil {
		t.Fatal(err)
	}
	b.Seal(audit.Head{ID: head.ID + 3, Hash: head.Hash})
	sql, args := b.InsertAfterQuery(head)
	if tag, err := e.srv.Pool.Exec(ctx, sql, args...); err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("forged entry: %v %v", tag, err)
	}
	var v struct {
		OK              bool        `json:"ok"`
		BadID           int64       `json:"bad_id"`
		Reason          string      `json:"reason"`
		VerifiedThrough int64       `json:"verified_through"`
		Missing         int64       `json:"missing"`
		Gaps            []audit.Gap `json:"gaps"`
	}
	e.api.JSON(http.MethodGet, "/api/v1/audit/verify", nil, 200, &v)
	from, to := head.ID+1, head.ID+3
	if v.OK || v.BadID != from || v.VerifiedThrough != head.ID || v.Missing != 3 || fmt.Sprint(v.Gaps) != fmt.Sprint([]audit.Gap{{From: from, To: to}}) ||
		!strings.Contains(v.Reason, fmt.Sprintf("entries %d to %d are missing", from, to)) {
		t.Fatalf("verify: %+v, want broken at %d, through %d, ids %d to %d missing", v, from, head.ID, from, to)
	}
	e.srv.PostForm(t, e.auditor, "/audit/verify", nil).Body.Close()
	e.srv.App.AuditLog.WaitVerify()
	d := doc(t, e.srv.Get(t, e.auditor, "/audit"))
	if st := d.Find(`[data-testid=audit-chain]`).AttrOr("data-state", ""); st != "broken" {
		t.Fatalf("page's chain state: got %q, want broken", st)
	}
	if bad, r := d.Find(`[data-testid=chain-bad]`).Text(), d.Find(`[data-testid=chain-reason]`).Text(); bad != fmt.Sprint(from) ||
		!strings.Contains(r, fmt.Sprintf("entries %d to %d are missing", from, to)) {
		t.Fatalf("page: broken at %q: %q, want %d, ids %d to %d missing", bad, r, from, from, to)
	}
}

// An export that fails after its first bytes were sent (a database error in a later
// batch) breaks the transfer instead of ending a body cut at an arbitrary byte as if
// it were complete.
func TestAuditExportCutOffIsAborted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := auditStart(t)
	entries := make([]audit.Entry, 600) // more than one batch, and more than the buffer
	for i := range entries {
		entries[i] = audit.Entry{Actor: audit.System, Action: "test.filler", TargetType: "thing", TargetID: fmt.Sprint(i),
			Payload: map[string]any{"note": strings.Repeat("x", 200)}}
	}
	if err := pgx.BeginFunc(ctx, e.srv.Pool, func(tx pgx.Tx) error {
		_, err := audit.AppendBatch(ctx, tx, entries)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	full := e.srv.Get(t, e.auditor, "/api/v1/audit/export?format=jsonl")
	if _, err := io.ReadAll(full.Body); err != nil || full.StatusCode != 200 {
		t.Fatalf("export: %d %v, want it whole", full.StatusCode, err)
	}
	full.Body.Close()
	// The oldest entry, in the last batch, can no longer be read.
	owner, err := pgx.Connect(ctx, e.srv.App.DBURL)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close(ctx)
	if _, err := owner.Exec(ctx, `ALTER TABLE audit_log DISABLE TRIGGER USER; UPDATE audit_log SET at = 'infinity' WHERE id = 1;
		ALTER TABLE audit_log ENABLE TRIGGER USER`); err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"jsonl", "csv"} {
		res := e.srv.Get(t, e.auditor, "/api/v1/audit/export?format="+format)
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || err == nil || len(body) == 0 {
			t.Fatalf("%s export failing mid-stream: %d, %d bytes, read error %v; want a broken transfer after the first bytes", format, res.StatusCode, len(body), err)
		}
	}
}
