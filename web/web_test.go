package web_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/static"
	"github.com/toolwarden/toolwarden/web"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

const fakeID = "00000000-0000-0000-0000-000000000000"

// TestRouteTablePermissions walks every route for every role (and for nobody) and checks
// that the answer agrees with the permission table.
func TestRouteTablePermissions(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	const pw = "role-password-123"
	clients := map[auth.Role]*http.Client{}
	for _, r := range auth.Roles {
		name := "u-" + strings.ReplaceAll(string(r), "_", "-")
		srv.CreateUser(t, name, r, pw)
		clients[r] = srv.Login(t, name, pw)
	}
	do := func(c *http.Client, rt struct{ method, path string }) *http.Response {
		req, _ := http.NewRequest(rt.method, srv.URL+rt.path, strings.NewReader(""))
		req.Header.Set("Origin", srv.URL)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		if rt.method != http.MethodGet {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res
	}
	routes := srv.Web.Routes()
	if len(routes) < 20 {
		t.Fatalf("route table has %d routes; expected the full table", len(routes))
	}
	for _, r := range routes {
		rt := struct{ method, path string }{r.Method, strings.ReplaceAll(r.Path, ":id", fakeID)}
		for _, role := range auth.Roles {
			c := clients[role]
			if r.Path == "/logout" {
				c = srv.Login(t, "u-"+strings.ReplaceAll(string(role), "_", "-"), pw) // a session of its own to end
			}
			res := do(c, rt)
			allowed := role.Can(r.Perm)
			switch {
			case web.BearerOnly(r.Path):
				// API tokens only: a session cookie is no credential there.
				if res.StatusCode != http.StatusUnauthorized {
					t.Errorf("%s %s as %s's session: got %d, want 401 (API tokens only)", r.Method, r.Path, role, res.StatusCode)
				}
			case allowed && (res.StatusCode == http.StatusForbidden || (res.StatusCode == http.StatusUnauthorized && r.Perm != auth.PermPublic)):
				t.Errorf("%s %s as %s: got %d, want access (permission %s granted)", r.Method, r.Path, role, res.StatusCode, r.Perm)
			case !allowed && res.StatusCode != http.StatusForbidden:
				t.Errorf("%s %s as %s: got %d, want 403 (permission %s not granted)", r.Method, r.Path, role, res.StatusCode, r.Perm)
			}
		}
		// Nobody signed in.
		res := do(srv.Client(t), rt)
		if r.Perm == auth.PermPublic {
			if res.StatusCode == http.StatusForbidden {
				t.Errorf("%s %s anonymously: got 403 on a public route", r.Method, r.Path)
			}
			continue
		}
		api := strings.HasPrefix(r.Path, "/api/") || r.Path == "/ws" || r.Path == "/metrics" || web.BearerOnly(r.Path)
		switch {
		case api && res.StatusCode != http.StatusUnauthorized:
			t.Errorf("%s %s anonymously: got %d, want 401", r.Method, r.Path, res.StatusCode)
		case !api && (res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), "/login")):
			t.Errorf("%s %s anonymously: got %d to %q, want 303 to /login", r.Method, r.Path, res.StatusCode, res.Header.Get("Location"))
		}
	}
}

func TestCrossOriginPostRefused(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	c := srv.Login(t, "admin", webtest.AdminPassword)
	post := func(headers map[string]string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/tokens", strings.NewReader(url.Values{"name": {"t-" + headers["Sec-Fetch-Site"] + headers["Origin"]}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if got := post(map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "http://evil.example"}); got != http.StatusForbidden {
		t.Errorf("cross-site POST: got %d, want 403", got)
	}
	if got := post(map[string]string{"Origin": "http://evil.example"}); got != http.StatusForbidden {
		t.Errorf("POST from a foreign Origin (no Sec-Fetch-Site): got %d, want 403", got)
	}
	toks, _ := srv.Auth.ListTokens(context.Background(), adminID(t, srv))
	if len(toks) != 0 {
		t.Fatalf("a refused cross-origin request created %d tokens", len(toks))
	}
	if got := post(map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": srv.URL}); got != http.StatusCreated {
		t.Errorf("same-origin POST: got %d, want 201", got)
	}
}

func adminID(t *testing.T, srv *webtest.Server) string {
	t.Helper()
	u, err := srv.Auth.GetUserByName(context.Background(), "admin")
	if err != nil {
		t.Fatal(err)
	}
	return u.ID
}

var nonceRe = regexp.MustCompile(`'nonce-([A-Za-z0-9+/=]+)'`)

func TestCSPNonceAndNoInlineHandlers(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	c := srv.Login(t, "admin", webtest.AdminPassword)
	seen := map[string]bool{}
	for _, path := range []string{"/login", "/", "/users", "/tokens", "/no-such-page"} {
		cl := c
		if path == "/login" {
			cl = srv.Client(t)
		}
		res := srv.Get(t, cl, path)
		csp := res.Header.Get("Content-Security-Policy")
		m := nonceRe.FindStringSubmatch(csp)
		if m == nil {
			t.Fatalf("%s: no nonce in CSP %q", path, csp)
		}
		if seen[m[1]] {
			t.Errorf("%s: nonce %s reused across responses", path, m[1])
		}
		seen[m[1]] = true
		for _, want := range []string{"frame-ancestors 'none'", "object-src 'none'", "default-src 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s: CSP %q lacks %s", path, csp, want)
			}
		}
		for h, want := range map[string]string{"X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin", "X-Frame-Options": "DENY"} {
			if got := res.Header.Get(h); got != want {
				t.Errorf("%s: %s = %q, want %q", path, h, got, want)
			}
		}
		doc, err := goquery.NewDocumentFromReader(res.Body)
		res.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		scripts := doc.Find("script")
		if scripts.Length() == 0 {
			t.Errorf("%s: no scripts at all", path)
		}
		scripts.Each(func(_ int, s *goquery.Selection) {
			if n, _ := s.Attr("nonce"); n != m[1] {
				t.Errorf("%s: script %v has nonce %q, want %q", path, s.AttrOr("src", "(inline)"), n, m[1])
			}
			if _, ok := s.Attr("src"); !ok {
				t.Errorf("%s: inline script found", path)
			}
		})
		doc.Find("*").Each(func(_ int, s *goquery.Selection) {
			for _, a := range s.Nodes[0].Attr {
				if strings.HasPrefix(strings.ToLower(a.Key), "on") || strings.HasPrefix(strings.ToLower(a.Key), "hx-on") || a.Key == "style" {
					t.Errorf("%s: <%s %s=...>: inline handlers and styles are not allowed", path, s.Nodes[0].Data, a.Key)
				}
			}
		})
	}
}

func TestErrorShapes(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	srv.CreateUser(t, "tu", auth.RoleToolUser, "tool-user-password")
	tu := srv.Login(t, "tu", "tool-user-password")
	cases := []struct {
		name   string
		c      *http.Client
		path   string
		status int
		code   string
	}{
		{"not found", admin, "/api/v1/users/" + fakeID, 404, "not_found"},
		{"forbidden", tu, "/api/v1/users", 403, "forbidden"},
		{"unauthenticated", srv.Client(t), "/api/v1/tokens", 401, "unauthenticated"},
		{"no route", admin, "/api/v1/nothing-here", 404, "not_found"},
	}
	for _, tc := range cases {
		res := srv.Get(t, tc.c, tc.path)
		var body struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		err := json.NewDecoder(res.Body).Decode(&body)
		res.Body.Close()
		if err != nil || res.StatusCode != tc.status || body.Error.Code != tc.code || body.Error.Message == "" {
			t.Errorf("%s: got %d %+v (%v), want %d with code %q and a message", tc.name, res.StatusCode, body, err, tc.status, tc.code)
		}
	}
	// Validation errors name the field.
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/v1/users", strings.NewReader(`{"username":"Bad Name!","role":"wizard","password":"short"}`))
	req.Header.Set("Content-Type", "application/json")
	res, err := admin.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var verr struct {
		Error struct {
			Code    string `json:"code"`
			Details []struct{ Path, Message string }
		} `json:"error"`
	}
	_ = json.NewDecoder(res.Body).Decode(&verr)
	res.Body.Close()
	fields := map[string]bool{}
	for _, d := range verr.Error.Details {
		fields[d.Path] = d.Message != ""
	}
	if res.StatusCode != 400 || verr.Error.Code != "invalid_input" || !fields["username"] || !fields["role"] || !fields["password"] {
		t.Errorf("invalid user: got %d %+v, want 400 invalid_input naming username, role and password", res.StatusCode, verr)
	}
	// Pages get an HTML error page.
	res = srv.Get(t, admin, "/no-such-page")
	doc, _ := goquery.NewDocumentFromReader(res.Body)
	res.Body.Close()
	if res.StatusCode != 404 || doc.Find("[data-testid=error-page]").Length() != 1 {
		t.Errorf("missing page: got %d without an error page", res.StatusCode)
	}
	// A tool user sees a 403 page, inside the shell.
	res = srv.Get(t, tu, "/users")
	doc, _ = goquery.NewDocumentFromReader(res.Body)
	res.Body.Close()
	if res.StatusCode != 403 || doc.Find("[data-testid=current-user]").Length() != 1 {
		t.Errorf("forbidden page: got %d, want 403 inside the shell", res.StatusCode)
	}
}

func TestProbesAndStatic(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	c := srv.Client(t)
	// In this order: /metrics counts the requests before it.
	for _, pw := range [][2]string{{"/healthz", `"ok"`}, {"/readyz", `"migration"`}, {"/metrics", "toolwarden_http_requests_total"}} {
		path, want := pw[0], pw[1]
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if path == "/metrics" {
			req.Header.Set("Authorization", "Bearer "+srv.Token(t, "admin"))
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || !strings.Contains(string(b), want) {
			t.Errorf("%s: got %d %.200s, want 200 containing %s", path, res.StatusCode, b, want)
		}
	}
	res := srv.Get(t, c, static.URL("css/app.css"))
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(res.Header.Get("Cache-Control"), "immutable") || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/css") {
		t.Errorf("versioned css: got %d, Cache-Control %q, type %q", res.StatusCode, res.Header.Get("Cache-Control"), res.Header.Get("Content-Type"))
	}
	res = srv.Get(t, c, "/static/vendor/")
	res.Body.Close()
	if res.StatusCode != 404 {
		t.Errorf("directory listing: got %d, want 404", res.StatusCode)
	}
	// /favicon.ico, asked by browsers whatever a page links, leads to the pages' icon,
	// signed in or not.
	res = srv.Get(t, c, "/favicon.ico")
	res.Body.Close()
	if res.StatusCode != http.StatusMovedPermanently || res.Header.Get("Location") != static.URL("img/favicon.svg") {
		t.Errorf("/favicon.ico: got %d to %q, want 301 to the SVG icon", res.StatusCode, res.Header.Get("Location"))
	}
	// Readiness fails when migrations are behind.
	if _, err := srv.Owner.Exec(context.Background(), "UPDATE schema_migrations SET version = 1"); err != nil {
		t.Fatal(err)
	}
	// A readiness check that started before the change may still be answered.
	testkit.WaitFor(t, 30*time.Second, func() bool {
		res := srv.Get(t, c, "/readyz")
		res.Body.Close()
		return res.StatusCode == http.StatusServiceUnavailable
	}, "readyz with pending migrations never answered 503")
}

// TestRouteTableDeclarations pins the permissions that matter most, so a route cannot
// quietly be declared with a weaker one.
func TestRouteTableDeclarations(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	for _, r := range srv.Web.Routes() {
		switch {
		case strings.HasPrefix(r.Path, "/users") || strings.HasPrefix(r.Path, "/api/v1/users"):
			if r.Perm != auth.PermUsers {
				t.Errorf("%s %s: declared %s, want %s", r.Method, r.Path, r.Perm, auth.PermUsers)
			}
		case strings.HasPrefix(r.Path, "/tokens") || strings.HasPrefix(r.Path, "/api/v1/tokens"):
			if r.Perm != auth.PermOwnTokens {
				t.Errorf("%s %s: declared %s, want %s", r.Method, r.Path, r.Perm, auth.PermOwnTokens)
			}
		}
		if r.Perm == auth.PermPublic && r.Method != http.MethodGet && r.Path != "/login" {
			t.Errorf("%s %s: a public route that changes state", r.Method, r.Path)
		}
	}
	// Guests must not see user management or the audit log.
	for _, p := range []auth.Permission{auth.PermUsers, auth.PermAuditView, auth.PermToolUse} {
		if auth.RoleGuest.Can(p) {
			t.Errorf("guest can %s", p)
		}
	}
}
