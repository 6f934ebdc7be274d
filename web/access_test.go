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
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/router"
)

// The Access tab (/tools/:id/access) and its API (/api/v1/tools/:id/permissions): the
// per-user rules that win over a role's tool.use, and the router following them.

const acPassword = "access-password-123"

// acEnv is a server with the enabled tool ac__echo and one user of every role.
type acEnv struct {
	srv   *webtest.Server
	id    string // ac__echo
	admin *http.Client
	users map[auth.Role]string // role → username
}

func acStart(t *testing.T) *acEnv {
	t.Helper()
	// Polls below call the tool many times: no rate limit may get in their way.
	srv := webtest.Start(t, &webtest.Options{Router: &router.Options{UserRate: 60000}})
	liveServer(t, srv, "ac", true, "echo")
	e := &acEnv{srv: srv, id: toolID(t, srv, "ac__echo"), admin: srv.Login(t, "admin", webtest.AdminPassword), users: map[auth.Role]string{}}
	for _, r := range auth.Roles {
		if r == auth.RoleAdmin {
			e.users[r] = "admin"
			continue
		}
		name := "ac-" + strings.ReplaceAll(string(r), "_", "-")
		srv.CreateUser(t, name, r, acPassword)
		e.users[r] = name
	}
	return e
}

func (e *acEnv) url() string { return "/tools/" + e.id + "/access" }

// call calls ac__echo with a token of username and returns the status and error code.
func (e *acEnv) call(t *testing.T, bearer string) (int, string) {
	t.Helper()
	status, raw := svClient{t: t, srv: e.srv, bearer: bearer}.do(http.MethodPost, "/api/v1/tools/call",
		map[string]any{"tool": "ac__echo", "arguments": map[string]any{"message": "hi"}})
	var ce callErr
	_ = json.Unmarshal(raw, &ce)
	return status, ce.Error.Code
}

// waitCall polls a call by bearer until it answers want (200, or 403 forbidden): the
// router forgets cached permissions when the change's event reaches it.
func (e *acEnv) waitCall(t *testing.T, bearer string, want int, what string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		status, code := e.call(t, bearer)
		if status == want && (want != http.StatusForbidden || code == router.CodeForbidden) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: got %d %s, want %d", what, status, code, want)
		}
		time.Sleep(20 * time.Millisecond) // poll interval, not a wait for an outcome
	}
}

// auditRows returns the payloads of the tool.permission audit rows of the tool.
func (e *acEnv) auditRows(t *testing.T) []string {
	t.Helper()
	rows, err := e.srv.Pool.Query(context.Background(),
		`SELECT payload::text FROM audit_log WHERE action = 'tool.permission' AND target_id = $1 ORDER BY id`, e.id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// rules reads the rules the tab shows: username → data-can-use.
func acRules(doc *goquery.Document) map[string]string {
	out := map[string]string{}
	doc.Find("[data-testid=access-rule]").Each(func(_ int, s *goquery.Selection) {
		out[s.AttrOr("data-username", "")] = s.AttrOr("data-can-use", "")
	})
	return out
}

func acGet(t *testing.T, e *acEnv, c *http.Client, path string, want int) *goquery.Document {
	t.Helper()
	res := e.srv.Get(t, c, path)
	doc := page(t, res)
	if res.StatusCode != want {
		t.Fatalf("GET %s: got %d, want %d", path, res.StatusCode, want)
	}
	return doc
}

var htmxHeaders = map[string]string{"HX-Request": "true"}

// The tab: the role table from the permission table, no rules at first, the form with
// the usernames it suggests, and the tab strip pointing at it from every tab.
func TestAccessTab(t *testing.T) {
	t.Parallel()
	e := acStart(t)
	doc := acGet(t, e, e.admin, e.url(), http.StatusOK)

	if doc.Find("[data-testid=panel-access]").Length() != 1 {
		t.Fatal("got no access panel, want one")
	}
	tab := doc.Find("[data-testid=tab-access]")
	if got := tab.AttrOr("href", ""); got != e.url() {
		t.Errorf("Access tab links to %q, want %q", got, e.url())
	}
	if got := tab.AttrOr("aria-selected", ""); got != "true" {
		t.Errorf("Access tab aria-selected=%q, want true", got)
	}
	roles := map[string]string{}
	doc.Find("[data-testid=access-role]").Each(func(_ int, s *goquery.Selection) {
		roles[s.AttrOr("data-role", "")] = s.AttrOr("data-can-use", "")
	})
	for _, r := range auth.Roles {
		if want := map[bool]string{true: "true", false: "false"}[r.Can(auth.PermToolUse)]; roles[string(r)] != want {
			t.Errorf("role %s: shown as may use %q, want %q", r, roles[string(r)], want)
		}
	}
	if doc.Find("[data-testid=no-access-rules]").Length() != 1 || len(acRules(doc)) != 0 {
		t.Errorf("got rules %v, want none", acRules(doc))
	}
	var suggested []string
	doc.Find("#access-users option").Each(func(_ int, s *goquery.Selection) { suggested = append(suggested, s.AttrOr("value", "")) })
	for _, name := range e.users {
		if !slices.Contains(suggested, name) {
			t.Errorf("datalist %v lacks %s", suggested, name)
		}
	}
	if got := doc.Find("#access-username").AttrOr("list", ""); got != "access-users" {
		t.Errorf("username input list=%q, want access-users", got)
	}

	// The other tabs link to it too; ?tab=access typed by hand points there.
	for _, path := range []string{"/tools/" + e.id, "/tools/" + e.id + "?tab=schema", "/tools/" + e.id + "/test"} {
		d := acGet(t, e, e.admin, path, http.StatusOK)
		if got := d.Find("[data-testid=tab-access]").AttrOr("href", ""); got != e.url() {
			t.Errorf("%s: Access tab links to %q, want %q", path, got, e.url())
		}
	}
	d := acGet(t, e, e.admin, "/tools/"+e.id+"?tab=access", http.StatusOK)
	if got := d.Find("[data-testid=access-link]").AttrOr("href", ""); got != e.url() {
		t.Errorf("?tab=access: link %q, want %q", got, e.url())
	}

	// Rules show up with the user's role, whichever way they were set.
	e.srv.PostForm(t, e.admin, e.url(), url.Values{"username": {e.users[auth.RoleToolUser]}, "access": {"deny"}}).Body.Close()
	e.srv.PostForm(t, e.admin, e.url(), url.Values{"username": {e.users[auth.RoleGuest]}, "access": {"allow"}}).Body.Close()
	doc = acGet(t, e, e.admin, e.url(), http.StatusOK)
	want := map[string]string{e.users[auth.RoleToolUser]: "false", e.users[auth.RoleGuest]: "true"}
	if got := acRules(doc); len(got) != 2 || got[e.users[auth.RoleToolUser]] != "false" || got[e.users[auth.RoleGuest]] != "true" {
		t.Errorf("got rules %v, want %v", got, want)
	}
	if n := doc.Find("[data-testid=access-remove]").Length(); n != 2 {
		t.Errorf("got %d Remove buttons, want 2", n)
	}
}

// A deny takes a tool user's access away at once and is audited; removing it gives the
// access back.
func TestAccessDenyAndRestore(t *testing.T) {
	t.Parallel()
	e := acStart(t)
	name := e.users[auth.RoleToolUser]
	bearer := svToken(t, e.srv, name)
	if status, code := e.call(t, bearer); status != http.StatusOK {
		t.Fatalf("tool user before any rule: got %d %s, want 200", status, code)
	}

	// htmx: the panel alone comes back, with the new rule and a notice.
	res := e.srv.PostFormHeaders(t, e.admin, e.url(), url.Values{"username": {name}, "access": {"deny"}}, htmxHeaders)
	doc := page(t, res)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("htmx deny: got %d, want 200", res.StatusCode)
	}
	if doc.Find("[data-testid=tool-tabs]").Length() != 0 || doc.Find("#tool-access").Length() != 1 {
		t.Error("htmx deny: got more or less than the access panel")
	}
	if got := acRules(doc); got[name] != "false" {
		t.Errorf("htmx deny: got rules %v, want %s denied", got, name)
	}
	if n := doc.Find("[data-testid=access-notice]").Length(); n != 1 {
		t.Errorf("htmx deny: got %d notices, want 1", n)
	}
	e.waitCall(t, bearer, http.StatusForbidden, "tool user after deny")

	rows := e.auditRows(t)
	if len(rows) != 1 {
		t.Fatalf("got %d tool.permission audit rows, want 1", len(rows))
	}
	var p struct {
		User   string `json:"user"`
		CanUse *bool  `json:"can_use"`
	}
	if err := json.Unmarshal([]byte(rows[0]), &p); err != nil || p.User != name || p.CanUse == nil || *p.CanUse {
		t.Errorf("audit payload %s, want user %s and can_use false", rows[0], name)
	}

	// The same rule again changes nothing and records nothing.
	e.srv.PostForm(t, e.admin, e.url(), url.Values{"username": {name}, "access": {"deny"}}).Body.Close()
	if n := len(e.auditRows(t)); n != 1 {
		t.Errorf("repeating the rule: got %d audit rows, want 1", n)
	}

	// Without htmx: post, redirect, the page with a flash and no rule left.
	res = e.srv.PostForm(t, e.admin, e.url(), url.Values{"username": {name}, "access": {"role"}})
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != e.url() {
		t.Fatalf("remove: got %d to %q, want 303 to %s", res.StatusCode, res.Header.Get("Location"), e.url())
	}
	doc = acGet(t, e, e.admin, e.url(), http.StatusOK)
	if len(acRules(doc)) != 0 {
		t.Errorf("after remove: got rules %v, want none", acRules(doc))
	}
	if flash := doc.Find(".alert.success").Text(); !strings.Contains(flash, name) {
		t.Errorf("after remove: flash %q does not name %s", flash, name)
	}
	e.waitCall(t, bearer, http.StatusOK, "tool user after the rule was removed")
	if n := len(e.auditRows(t)); n != 2 {
		t.Errorf("after remove: got %d audit rows, want 2", n)
	}
}

// An allow lets a guest, whose role may not use tools, call that one tool.
func TestAccessAllowGuest(t *testing.T) {
	t.Parallel()
	e := acStart(t)
	name := e.users[auth.RoleGuest]
	bearer := svToken(t, e.srv, name)
	if status, code := e.call(t, bearer); status != http.StatusForbidden || code != router.CodeForbidden {
		t.Fatalf("guest before any rule: got %d %s, want 403 forbidden", status, code)
	}
	res := e.srv.PostFormHeaders(t, e.admin, e.url(), url.Values{"username": {name}, "access": {"allow"}}, htmxHeaders)
	if doc := page(t, res); acRules(doc)[name] != "true" {
		t.Fatalf("allow: got rules %v, want %s allowed", acRules(doc), name)
	}
	e.waitCall(t, bearer, http.StatusOK, "guest after allow")
}

// Bad input changes nothing and says what is wrong next to the field, with htmx and
// without.
func TestAccessFormErrors(t *testing.T) {
	t.Parallel()
	e := acStart(t)
	for _, tc := range []struct {
		name   string
		form   url.Values
		fields []string // fields with an error
	}{
		{"unknown user", url.Values{"username": {"nobody-here"}, "access": {"deny"}}, []string{"username"}},
		{"missing user", url.Values{"username": {"  "}, "access": {"deny"}}, []string{"username"}},
		{"missing access", url.Values{"username": {e.users[auth.RoleToolUser]}}, []string{"access"}},
		{"bad access", url.Values{"username": {e.users[auth.RoleToolUser]}, "access": {"maybe"}}, []string{"access"}},
		{"nothing", url.Values{}, []string{"username", "access"}},
	} {
		for _, htmx := range []bool{false, true} {
			name := tc.name
			var hdr map[string]string
			wantStatus := http.StatusUnprocessableEntity
			if htmx {
				name, hdr, wantStatus = name+"/htmx", htmxHeaders, http.StatusOK // htmx swaps 2xx only
			}
			t.Run(name, func(t *testing.T) {
				res := e.srv.PostFormHeaders(t, e.admin, e.url(), tc.form, hdr)
				doc := page(t, res)
				if res.StatusCode != wantStatus {
					t.Fatalf("got %d, want %d", res.StatusCode, wantStatus)
				}
				if doc.Find("[data-testid=access-errors]").Length() != 1 {
					t.Error("got no summary saying nothing was changed")
				}
				var got []string
				doc.Find("#tool-access [data-testid^=error-]").Each(func(_ int, s *goquery.Selection) {
					got = append(got, strings.TrimPrefix(s.AttrOr("data-testid", ""), "error-"))
					if strings.TrimSpace(s.Text()) == "" {
						t.Errorf("error %s has no message", s.AttrOr("data-testid", ""))
					}
				})
				if !slices.Equal(got, tc.fields) {
					t.Errorf("got errors on %v, want %v", got, tc.fields)
				}
				for _, f := range tc.fields {
					sel := map[string]string{"username": "#access-username", "access": "#access-choice"}[f]
					if doc.Find(sel).AttrOr("aria-invalid", "") != "true" {
						t.Errorf("%s is not marked invalid", sel)
					}
				}
				if typed := strings.TrimSpace(tc.form.Get("username")); typed != "" {
					if got := doc.Find("#access-username").AttrOr("value", ""); got != typed {
						t.Errorf("username kept as %q, want %q", got, typed)
					}
				}
				if len(acRules(doc)) != 0 {
					t.Errorf("got rules %v, want none", acRules(doc))
				}
			})
		}
	}
	if rows := e.auditRows(t); len(rows) != 0 {
		t.Errorf("bad input wrote %d audit rows: %v", len(rows), rows)
	}
	if perms, err := e.srv.Tools.Permissions(context.Background(), e.id); err != nil || len(perms) != 0 {
		t.Errorf("bad input stored rules %v (%v), want none", perms, err)
	}
}

// Reading the rules needs tool.inspect; changing them needs users.manage, on the page
// and in the API. Refused changes change nothing.
func TestAccessPermissions(t *testing.T) {
	t.Parallel()
	e := acStart(t)
	target := e.users[auth.RoleToolUser]
	for _, role := range auth.Roles {
		if role == auth.RoleAdmin {
			continue
		}
		t.Run(string(role), func(t *testing.T) {
			c := e.srv.Login(t, e.users[role], acPassword)
			mayRead, mayChange := role.Can(auth.PermToolInspect), role.Can(auth.PermUsers)

			wantRead := map[bool]int{true: http.StatusOK, false: http.StatusForbidden}[mayRead]
			doc := acGet(t, e, c, e.url(), wantRead)
			if mayRead {
				if got := doc.Find("[data-testid=access-form]").Length() > 0; got != mayChange {
					t.Errorf("form shown: got %v, want %v", got, mayChange)
				}
				if got := doc.Find("[data-testid=access-remove], #access-users option").Length(); !mayChange && got != 0 {
					t.Errorf("got %d Remove buttons or username suggestions, want none", got)
				}
			}
			overview := acGet(t, e, c, "/tools/"+e.id, http.StatusOK)
			if got := overview.Find("[data-testid=tab-access]").Length() == 1; got != mayRead {
				t.Errorf("Access tab shown: got %v, want %v", got, mayRead)
			}

			res := e.srv.PostForm(t, c, e.url(), url.Values{"username": {target}, "access": {"deny"}})
			res.Body.Close()
			wantChange := map[bool]int{true: http.StatusSeeOther, false: http.StatusForbidden}[mayChange]
			if res.StatusCode != wantChange {
				t.Errorf("POST %s: got %d, want %d", e.url(), res.StatusCode, wantChange)
			}

			api := svClient{t: t, srv: e.srv, c: c}
			status, raw := api.do(http.MethodGet, "/api/v1/tools/"+e.id+"/permissions", nil)
			if status != wantRead {
				t.Errorf("GET permissions: got %d %s, want %d", status, raw, wantRead)
			}
			status, raw = api.do(http.MethodPut, "/api/v1/tools/"+e.id+"/permissions", map[string]any{"username": target, "can_use": false})
			if wantPut := map[bool]int{true: http.StatusOK, false: http.StatusForbidden}[mayChange]; status != wantPut {
				t.Errorf("PUT permissions: got %d %s, want %d", status, raw, wantPut)
			}
			if !mayChange && !strings.Contains(string(raw), `"code":"forbidden"`) {
				t.Errorf("PUT permissions: got %s, want the forbidden error shape", raw)
			}
		})
	}
	// No role but admin holds users.manage today, so nothing may have changed.
	if perms, err := e.srv.Tools.Permissions(context.Background(), e.id); err != nil || len(perms) != 0 {
		t.Errorf("refused changes stored rules %v (%v), want none", perms, err)
	}
	if rows := e.auditRows(t); len(rows) != 0 {
		t.Errorf("refused changes wrote %d audit rows", len(rows))
	}
}

type acPermissions struct {
	Permissions []struct {
		UserID   string `json:"user_id"`
		Username string `json:"username"`
		CanUse   bool   `json:"can_use"`
		Role     string `json:"role"`
	} `json:"permissions"`
}

// GET and PUT /api/v1/tools/:id/permissions: shapes, and errors in the shape docs/api.md gives.
func TestAccessAPI(t *testing.T) {
	t.Parallel()
	e := acStart(t)
	api := svClient{t: t, srv: e.srv, c: e.srv.Login(t, "admin", webtest.AdminPassword)}
	path := "/api/v1/tools/" + e.id + "/permissions"
	tu, guest := e.users[auth.RoleToolUser], e.users[auth.RoleGuest]

	status, raw := api.do(http.MethodGet, path, nil)
	if status != http.StatusOK || strings.TrimSpace(string(raw)) != `{"permissions":[]}` {
		t.Fatalf("GET with no rules: got %d %s, want 200 {\"permissions\":[]}", status, raw)
	}

	var got acPermissions
	api.json(http.MethodPut, path, map[string]any{"username": tu, "can_use": false}, http.StatusOK, &got)
	api.json(http.MethodPut, path, map[string]any{"username": guest, "can_use": true}, http.StatusOK, &got)
	u, err := e.srv.Auth.GetUserByName(context.Background(), tu)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Permissions) != 2 || got.Permissions[0].Username != guest || !got.Permissions[0].CanUse ||
		got.Permissions[1].Username != tu || got.Permissions[1].CanUse || got.Permissions[1].UserID != u.ID ||
		got.Permissions[1].Role != string(auth.RoleToolUser) {
		t.Fatalf("after two PUTs: got %+v, want %s allowed and %s (id %s, tool_user) denied", got.Permissions, guest, tu, u.ID)
	}
	var listed acPermissions
	api.json(http.MethodGet, path, nil, http.StatusOK, &listed)
	if len(listed.Permissions) != 2 {
		t.Errorf("GET: got %+v, want the 2 rules the PUT returned", listed.Permissions)
	}
	api.json(http.MethodPut, path, map[string]any{"username": tu, "can_use": nil}, http.StatusOK, &got)
	if len(got.Permissions) != 1 || got.Permissions[0].Username != guest {
		t.Errorf("after null for %s: got %+v, want only %s", tu, got.Permissions, guest)
	}
	if n := len(e.auditRows(t)); n != 3 {
		t.Errorf("got %d tool.permission audit rows, want 3", n)
	}

	// An API token takes a tool away, but gives none and lifts no refusal: a leaked
	// admin token must not widen anyone's access.
	tok := svClient{t: t, srv: e.srv, bearer: svToken(t, e.srv, "admin")}
	tok.json(http.MethodPut, path, map[string]any{"username": guest, "can_use": false}, http.StatusOK, &got)
	tok.json(http.MethodPut, path, map[string]any{"username": guest, "can_use": false}, http.StatusOK, &got) // unchanged: no row
	// A grant, or lifting the refusal just made (null over false), widens access.
	for _, body := range []map[string]any{{"username": tu, "can_use": true}, {"username": guest, "can_use": nil}} {
		if status, raw := tok.do(http.MethodPut, path, body); status != http.StatusForbidden || !strings.Contains(string(raw), "API token cannot give") {
			t.Errorf("token PUT %v: got %d %s, want 403", body, status, raw)
		}
	}
	if n := len(e.auditRows(t)); n != 4 {
		t.Errorf("got %d tool.permission audit rows after the token's, want 4", n)
	}
	api.json(http.MethodPut, path, map[string]any{"username": guest, "can_use": true}, http.StatusOK, &got)

	for _, tc := range []struct {
		name   string
		method string
		path   string
		body   any
		status int
		field  string // the detail's path, for 400
	}{
		{"unknown user", http.MethodPut, path, map[string]any{"username": "nobody-here", "can_use": true}, 400, "username"},
		{"missing username", http.MethodPut, path, map[string]any{"can_use": true}, 400, "username"},
		{"missing can_use", http.MethodPut, path, map[string]any{"username": tu}, 400, "can_use"},
		{"can_use not a boolean", http.MethodPut, path, map[string]any{"username": tu, "can_use": "yes"}, 400, "can_use"},
		{"not JSON", http.MethodPut, path, `{"username":`, 400, "body"},
		{"unknown tool GET", http.MethodGet, "/api/v1/tools/" + fakeID + "/permissions", nil, 404, ""},
		{"unknown tool PUT", http.MethodPut, "/api/v1/tools/" + fakeID + "/permissions", map[string]any{"username": tu, "can_use": true}, 404, ""},
		{"not a tool id", http.MethodGet, "/api/v1/tools/ac__echo/permissions", nil, 404, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, raw := api.do(tc.method, tc.path, tc.body)
			var ae apiErr
			if err := json.Unmarshal(raw, &ae); err != nil || status != tc.status || ae.Error.Message == "" {
				t.Fatalf("got %d %s, want %d with an error body", status, raw, tc.status)
			}
			if tc.status == 400 && (ae.Error.Code != "invalid_input" || !slices.Equal(ae.paths(), []string{tc.field})) {
				t.Errorf("got code %s paths %v, want invalid_input naming %s", ae.Error.Code, ae.paths(), tc.field)
			}
			if tc.status == 404 && ae.Error.Code != "not_found" {
				t.Errorf("got code %s, want not_found", ae.Error.Code)
			}
		})
	}
	if n := len(e.auditRows(t)); n != 5 {
		t.Errorf("refused requests wrote audit rows: got %d, want 5", n)
	}
	api.json(http.MethodGet, path, nil, http.StatusOK, &listed)
	if len(listed.Permissions) != 1 || listed.Permissions[0].Username != guest {
		t.Errorf("refused requests changed the rules: got %+v", listed.Permissions)
	}
}

// Deleting a server takes its tools' per-user rules with it. A refusal only an
// administrator may set (users.manage) is not lifted by someone who may merely delete
// servers, nor by an API token; an administrator's delete records each rule it removes.
func TestAccessRulesOnServerDelete(t *testing.T) {
	t.Parallel()
	e := acStart(t)
	ctx := context.Background()
	tu, guest := e.users[auth.RoleToolUser], e.users[auth.RoleGuest]
	bearer := svToken(t, e.srv, tu)
	admin := svClient{t: t, srv: e.srv, c: e.admin}
	path := "/api/v1/tools/" + e.id + "/permissions"
	admin.json(http.MethodPut, path, map[string]any{"username": tu, "can_use": false}, http.StatusOK, nil)
	admin.json(http.MethodPut, path, map[string]any{"username": guest, "can_use": true}, http.StatusOK, nil)
	e.waitCall(t, bearer, http.StatusForbidden, "tool user after deny")
	it, err := e.srv.Tools.Get(ctx, e.id)
	if err != nil {
		t.Fatal(err)
	}
	del := "/api/v1/servers/" + it.ServerID

	// A tool manager may delete servers (and add them again, its tools enabled), which
	// would lift the refusal without anyone deciding to.
	mgr := svClient{t: t, srv: e.srv, c: e.srv.Login(t, e.users[auth.RoleToolManager], acPassword)}
	tok := svClient{t: t, srv: e.srv, bearer: svToken(t, e.srv, "admin")}
	for _, tc := range []struct {
		who  string
		c    svClient
		want string
	}{{"tool manager", mgr, "administrator"}, {"admin's API token", tok, "sign in"}} {
		status, raw := tc.c.do(http.MethodDelete, del, nil)
		var ae apiErr
		_ = json.Unmarshal(raw, &ae)
		if status != http.StatusConflict || !strings.Contains(ae.Error.Message, "1 per-user rule") ||
			!strings.Contains(ae.Error.Message, tc.want) {
			t.Errorf("%s's delete: got %d %s, want 409 naming the 1 refusal and saying %q", tc.who, status, raw, tc.want)
		}
	}
	if perms, err := e.srv.Tools.Permissions(ctx, e.id); err != nil || len(perms) != 2 {
		t.Fatalf("after refused deletes: got rules %+v (%v), want both still there", perms, err)
	}
	if status, code := e.call(t, bearer); status != http.StatusForbidden {
		t.Fatalf("tool user after refused deletes: got %d %s, want 403", status, code)
	}
	if n := len(e.auditRows(t)); n != 2 {
		t.Fatalf("refused deletes: got %d tool.permission audit rows, want 2", n)
	}

	// An administrator's delete goes through, one tool.permission row per rule removed.
	admin.json(http.MethodDelete, del, nil, http.StatusNoContent, nil)
	rows := e.auditRows(t)
	if len(rows) != 4 {
		t.Fatalf("admin's delete: got %d tool.permission audit rows, want 4: %v", len(rows), rows)
	}
	removed := map[string]bool{}
	for _, r := range rows[2:] {
		var p struct {
			User    string `json:"user"`
			CanUse  *bool  `json:"can_use"`
			Removed *bool  `json:"removed_rule"`
			Because string `json:"because"`
		}
		if err := json.Unmarshal([]byte(r), &p); err != nil || p.CanUse != nil || p.Removed == nil || p.Because != "server.delete" {
			t.Errorf("audit payload %s, want can_use null, the removed rule and because server.delete", r)
			continue
		}
		removed[p.User] = *p.Removed
	}
	if len(removed) != 2 || removed[tu] || !removed[guest] {
		t.Errorf("removed rules %v, want %s's refusal and %s's grant", removed, tu, guest)
	}
}
