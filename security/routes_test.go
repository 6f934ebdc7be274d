package security_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/web"
)

// fakeID stands for every path parameter: a well-formed id nothing has.
const fakeID = "00000000-0000-0000-0000-000000000000"

var paramRe = regexp.MustCompile(`:[a-z_]+`)

// tokenMinting are the routes that would let an API token make another (a leaked
// short-lived token could mint itself a permanent successor): 403 for tokens.
// Changing one's password is a person's too: a leaked token must not take over the account.
// Giving access (a user, a password, a role, an enabled account) is a person's too: a
// leaked token would otherwise make itself a person's session.
var tokenMinting = map[string]bool{"POST /api/v1/tokens": true, "POST /tokens": true,
	"POST /api/v1/me/password": true, "POST /account/password": true,
	"POST /api/v1/users": true, "POST /users": true, "POST /api/v1/users/:id/password": true,
	"POST /users/:id/password": true, "POST /users/:id/role": true, "POST /users/:id/enable": true}

// decisions are the routes only a person's session may use (auth.PersonOnly on the
// route's permission): a token gets 403 there whatever its role (docs/api.md). The walk
// checks the route table marks at least these.
var decisions = []string{"POST /api/v1/executions/:id/confirm", "POST /api/v1/executions/:id/reject",
	"POST /api/v1/executions/:id/rollback", "POST /executions/:id/confirm", "POST /executions/:id/reject",
	"POST /executions/:id/rollback"}

// caller is one way in: nobody, a role's session or a role's token.
type caller struct {
	label string
	role  auth.Role // "" for nobody
	kind  string    // audit actor kind
	id    string
	api   webtest.API
}

// TestRouteWalk tries every route of the route table as nobody, as every role's
// session and as every role's API token, and checks: no answer is a server error;
// nobody gets 401 (API) or the sign-in page; a role without the route's permission
// gets 403, and each such refusal is in the audit log as denied; a role with it is
// let through, except a token on a decision route and a session on a route for API
// tokens only (web.BearerOnly: 401); and a NUL in the query or bytes
// that are not UTF-8 in a JSON body are 400 on every route.
func TestRouteWalk(t *testing.T) {
	t.Parallel()
	e := start(t, &webtest.Options{Denials: &audit.DenialOptions{PerActor: 1 << 20, Total: 1 << 20}})
	callers := []caller{{label: "nobody", kind: audit.ActorAnonymous, api: webtest.API{T: t, Srv: e.srv}}}
	for _, r := range auth.Roles {
		p := e.people[r]
		callers = append(callers, caller{label: string(r) + " session", role: r, kind: audit.ActorUser, id: p.id, api: p.session},
			caller{label: string(r) + " token", role: r, kind: audit.ActorToken, id: p.id, api: p.token})
	}
	routes := e.srv.Web.Routes()
	if len(routes) < 100 {
		t.Fatalf("the route table has %d routes; expected the whole table", len(routes))
	}
	denied := map[string]int{} // actor kind, id, method and route → 403s answered
	for _, d := range decisions {
		if !slices.ContainsFunc(routes, func(r web.Route) bool { return r.Method+" "+r.Path == d && auth.PersonOnly(r.Perm) }) {
			t.Errorf("%s is not a decision for people only in the route table", d)
		}
	}
	for _, r := range routes {
		key := r.Method + " " + r.Path
		path := paramRe.ReplaceAllString(r.Path, fakeID)
		for _, c := range callers {
			a := c.api
			if r.Path == "/logout" && c.kind == audit.ActorUser {
				a = e.login(e.people[c.role].name, passwordOf(c.role), c.role).session // a session of its own to end
			}
			status := send(t, e, a, r.Method, path, "", "")
			switch {
			case status >= 500:
				t.Errorf("%s as %s: got %d", key, c.label, status)
			case c.role == "":
				checkAnonymous(t, key, r.Perm, status, r.Path)
			case web.BearerOnly(r.Path) && c.kind == audit.ActorUser:
				// A session cookie is no credential on the MCP endpoints (/mcp, /sse,
				// /messages/): a signed-in browser cannot be made to call tools through them.
				if status != http.StatusUnauthorized {
					t.Errorf("%s as %s: got %d, want 401 (API tokens only)", key, c.label, status)
				}
			case !c.role.Can(r.Perm) || c.kind == audit.ActorToken && (auth.PersonOnly(r.Perm) || tokenMinting[key]):
				if status != http.StatusForbidden {
					t.Errorf("%s as %s: got %d, want 403", key, c.label, status)
				} else {
					denied[fmt.Sprintf("%s %s %s", c.kind, c.id, key)]++
				}
			case status == http.StatusForbidden || status == http.StatusUnauthorized && key != "POST /login":
				t.Errorf("%s as %s: got %d, want access (permission %s granted)", key, c.label, status, r.Perm)
			}
		}
		// Text that is not text, on every route, for a caller allowed everywhere.
		admin := e.people[auth.RoleAdmin].session
		if web.BearerOnly(r.Path) {
			admin = e.people[auth.RoleAdmin].token
		}
		// A replicas' route takes nobody's request (auth.PermReplica: a signed hop only):
		// the refusal comes before any reading of its text.
		if r.Path == "/logout" || r.Perm == auth.PermReplica {
			continue
		}
		if got := send(t, e, admin, r.Method, path+"?x=a%00b", "", ""); got != http.StatusBadRequest {
			t.Errorf("%s with a NUL in the query: got %d, want 400", key, got)
		}
		if r.Method != http.MethodGet && strings.HasPrefix(r.Path, "/api/") {
			if got := send(t, e, admin, r.Method, path, "{\"name\":\"\xff\xfe\"}", "application/json"); got != http.StatusBadRequest {
				t.Errorf("%s with a JSON body that is not UTF-8: got %d, want 400", key, got)
			}
		}
	}
	// Every refusal is in the audit log, once.
	rows, err := e.srv.Pool.Query(context.Background(), `SELECT actor_kind, coalesce(actor_id::text, ''), target_id, count(*)
		FROM audit_log WHERE action = 'request.denied' AND result = 'denied' GROUP BY 1, 2, 3`)
	if err != nil {
		t.Fatal(err)
	}
	recorded := map[string]int{}
	for rows.Next() {
		var kind, id, target string
		var n int
		if err := rows.Scan(&kind, &id, &target, &n); err != nil {
			t.Fatal(err)
		}
		recorded[fmt.Sprintf("%s %s %s", kind, id, target)] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for k, n := range denied {
		if recorded[k] != n {
			t.Errorf("refusals of %s: %d audited, want %d", k, recorded[k], n)
		}
	}
	if len(denied) < 100 {
		t.Errorf("only %d refusals in the walk; expected the guests', auditors' and tokens' many", len(denied))
	}
}

func passwordOf(r auth.Role) string {
	if r == auth.RoleAdmin {
		return webtest.AdminPassword
	}
	return password
}

// checkAnonymous: a public route is open; the API and the websocket answer 401; a page
// sends the browser to sign in.
func checkAnonymous(t *testing.T, key string, perm auth.Permission, status int, path string) {
	t.Helper()
	if perm == auth.PermPublic {
		// Signing in with no credentials is a wrong password (401), not a refusal.
		if status == http.StatusForbidden || status == http.StatusUnauthorized && key != "POST /login" {
			t.Errorf("%s anonymously: got %d on a public route", key, status)
		}
		return
	}
	api := strings.HasPrefix(path, "/api/") || path == "/ws" || path == "/metrics" || web.BearerOnly(path)
	switch {
	case api && status != http.StatusUnauthorized:
		t.Errorf("%s anonymously: got %d, want 401", key, status)
	case !api && status != http.StatusSeeOther:
		t.Errorf("%s anonymously: got %d, want 303 to sign in", key, status)
	}
}

// send makes one same-origin request as a (body with its content type, or an empty
// form) and returns the status.
func send(t *testing.T, e *env, a webtest.API, method, path, body, ctype string) int {
	t.Helper()
	if body == "" && method != http.MethodGet {
		body, ctype = "{}", "application/json"
		if !strings.HasPrefix(path, "/api/") {
			body, ctype = "", "application/x-www-form-urlencoded"
		}
	}
	req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	req.Header.Set("Origin", e.srv.URL)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	c := a.C
	if c == nil {
		c = e.srv.Client(t)
	}
	if a.Bearer != "" {
		req.Header.Set("Authorization", "Bearer "+a.Bearer)
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		_, _ = io.Copy(io.Discard, res.Body) // a stream (GET /sse) stays open: not read
	}
	res.Body.Close()
	return res.StatusCode
}
