package web_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
)

func page(t *testing.T, res *http.Response) *goquery.Document {
	t.Helper()
	defer res.Body.Close()
	doc, err := goquery.NewDocumentFromReader(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func sessionCookie(c *http.Client, base string) string {
	u, _ := url.Parse(base)
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == "tw_session" {
			return ck.Value
		}
	}
	return ""
}

func TestLoginLogoutAndRotation(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)

	// Wrong password: the form comes back with an error and the username kept.
	c := srv.Client(t)
	res := srv.PostForm(t, c, "/login", url.Values{"username": {"admin"}, "password": {"nope"}})
	doc := page(t, res)
	if res.StatusCode != http.StatusUnauthorized || doc.Find("[data-testid=login-error]").Length() != 1 ||
		doc.Find("#username").AttrOr("value", "") != "admin" {
		t.Fatalf("wrong password: got %d, want 401 with an error and the username kept", res.StatusCode)
	}

	// Sign in; the cookie is HttpOnly and SameSite.
	res = srv.PostForm(t, c, "/login", url.Values{"username": {"admin"}, "password": {webtest.AdminPassword}, "next": {"/tokens"}})
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/tokens" {
		t.Fatalf("login: got %d to %q, want 303 to /tokens", res.StatusCode, res.Header.Get("Location"))
	}
	setCookie := res.Header.Get("Set-Cookie")
	if !strings.Contains(setCookie, "HttpOnly") || !strings.Contains(setCookie, "SameSite=Lax") {
		t.Errorf("session cookie %q: want HttpOnly and SameSite=Lax", setCookie)
	}
	first := sessionCookie(c, srv.URL)

	// An open redirect is refused.
	c2 := srv.Client(t)
	res = srv.PostForm(t, c2, "/login", url.Values{"username": {"admin"}, "password": {webtest.AdminPassword}, "next": {"//evil.example/"}})
	res.Body.Close()
	if res.Header.Get("Location") != "/" {
		t.Errorf("next=//evil.example: redirected to %q, want /", res.Header.Get("Location"))
	}

	// Signing in again with the old cookie rotates the session: the old id is dead.
	res = srv.PostForm(t, c, "/login", url.Values{"username": {"admin"}, "password": {webtest.AdminPassword}})
	res.Body.Close()
	second := sessionCookie(c, srv.URL)
	if second == "" || second == first {
		t.Fatalf("re-login: session cookie did not change")
	}
	if _, err := srv.Auth.Authenticate(context.Background(), first); err == nil {
		t.Errorf("the pre-login session still authenticates after re-login")
	}

	// Sign out: the cookie is cleared and the session dead.
	res = srv.PostForm(t, c, "/logout", nil)
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), "/login") {
		t.Fatalf("logout: got %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
	if _, err := srv.Auth.Authenticate(context.Background(), second); err == nil {
		t.Errorf("session still valid after logout")
	}
	res = srv.Get(t, c, "/")
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Errorf("dashboard after logout: got %d, want 303 to /login", res.StatusCode)
	}
}

func TestLoginThrottled(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Auth: &auth.Options{MaxAccountFailures: 2}})
	c := srv.Client(t)
	for range 2 {
		res := srv.PostForm(t, c, "/login", url.Values{"username": {"admin"}, "password": {"wrong"}})
		res.Body.Close()
	}
	res := srv.PostForm(t, c, "/login", url.Values{"username": {"admin"}, "password": {webtest.AdminPassword}})
	doc := page(t, res)
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" ||
		!strings.Contains(doc.Find("[data-testid=login-error]").Text(), "Too many") {
		t.Fatalf("after 2 failures: got %d (Retry-After %q), want 429 with a message", res.StatusCode, res.Header.Get("Retry-After"))
	}
}

func TestUserManagementPages(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	admin := srv.Login(t, "admin", webtest.AdminPassword)

	// Bad input: 422, each field's message next to it, nothing created.
	res := srv.PostForm(t, admin, "/users", url.Values{"username": {"Not Valid"}, "role": {"tool_user"}, "password": {"short"}})
	doc := page(t, res)
	if res.StatusCode != http.StatusUnprocessableEntity || doc.Find("[data-testid=error-username]").Length() != 1 ||
		doc.Find("[data-testid=error-password]").Length() != 1 {
		t.Fatalf("invalid user form: got %d, want 422 with username and password errors", res.StatusCode)
	}
	if v := doc.Find("#new-username").AttrOr("aria-invalid", ""); v != "true" {
		t.Errorf("invalid username field: aria-invalid=%q, want true", v)
	}

	// A generated password is shown once, and works.
	res = srv.PostForm(t, admin, "/users", url.Values{"username": {"carol"}, "role": {"auditor"}})
	doc = page(t, res)
	pw := strings.TrimSpace(doc.Find("[data-testid=secret-value]").Text())
	if res.StatusCode != http.StatusCreated || len(pw) < 20 {
		t.Fatalf("create carol: got %d, password %q", res.StatusCode, pw)
	}
	if doc.Find("[data-testid=user-row][data-username=carol]").Length() != 1 {
		t.Errorf("carol not listed after creation")
	}
	carol := srv.Login(t, "carol", pw)
	u, _ := srv.Auth.GetUserByName(context.Background(), "carol")

	// Disable: carol's session ends at once.
	res = srv.PostForm(t, admin, "/users/"+u.ID+"/disable", nil)
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("disable: got %d", res.StatusCode)
	}
	res = srv.Get(t, carol, "/")
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Errorf("disabled user's page load: got %d, want 303 to /login", res.StatusCode)
	}
	doc = page(t, srv.Get(t, admin, "/users"))
	if !strings.Contains(doc.Find("[data-testid=flash]").Text(), "disabled") {
		t.Errorf("no flash after disabling: %q", doc.Find("[data-testid=flash]").Text())
	}

	// The last admin cannot be demoted; the reason is shown.
	me, _ := srv.Auth.GetUserByName(context.Background(), "admin")
	res = srv.PostForm(t, admin, "/users/"+me.ID+"/role", url.Values{"role": {"guest"}})
	res.Body.Close()
	doc = page(t, srv.Get(t, admin, "/users"))
	if !strings.Contains(doc.Find("[data-testid=flash]").Text(), "last active administrator") {
		t.Errorf("demoting the last admin: flash %q", doc.Find("[data-testid=flash]").Text())
	}

	// Role change and password reset.
	res = srv.PostForm(t, admin, "/users/"+u.ID+"/role", url.Values{"role": {"tool_manager"}})
	res.Body.Close()
	if got, _ := srv.Auth.GetUser(context.Background(), u.ID); got.Role != auth.RoleToolManager {
		t.Errorf("role after change: got %s", got.Role)
	}
	if msg := page(t, srv.Get(t, admin, "/users")).Find("[data-testid=flash]").Text(); !strings.Contains(msg, "is now Tool manager") {
		t.Errorf("after a role change: flash %q", msg)
	}
	// The same role again changes nothing, and says so.
	srv.PostForm(t, admin, "/users/"+u.ID+"/role", url.Values{"role": {"tool_manager"}}).Body.Close()
	if msg := page(t, srv.Get(t, admin, "/users")).Find("[data-testid=flash]").Text(); !strings.Contains(msg, "already is Tool manager; nothing changed") {
		t.Errorf("the same role again: flash %q", msg)
	}
	res = srv.PostForm(t, admin, "/users/"+u.ID+"/enable", nil)
	res.Body.Close()
	doc = page(t, srv.PostForm(t, admin, "/users/"+u.ID+"/password", nil))
	newPW := strings.TrimSpace(doc.Find("[data-testid=secret-value]").Text())
	if newPW == "" || newPW == pw {
		t.Fatalf("reset password: got %q", newPW)
	}
	srv.Login(t, "carol", newPW)

	// One's own row links to the page that asks for the current password, and a reset
	// of one's own is refused (a session left open would take the account over).
	doc = page(t, srv.Get(t, admin, "/users"))
	if doc.Find(`[data-testid=change-own-password][href="/account/password"]`).Length() != 1 || doc.Find("[data-testid=reset-password]").Length() != 1 {
		t.Errorf("users page: want a Change password link on one's own row and Reset password on carol's only")
	}
	adminUser, err := srv.Auth.GetUserByName(context.Background(), "admin")
	if err != nil {
		t.Fatal(err)
	}
	res = srv.PostForm(t, admin, "/users/"+adminUser.ID+"/password", nil)
	res.Body.Close()
	if msg := page(t, srv.Get(t, admin, "/users")).Find("[data-testid=flash]").Text(); !strings.Contains(msg, "asks for your current one") {
		t.Errorf("resetting one's own password: flash %q, want it refused", msg)
	}
	srv.Login(t, "admin", webtest.AdminPassword)
}

func TestTokenPagesAndBearer(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	res := srv.PostForm(t, admin, "/tokens", url.Values{"name": {""}})
	doc := page(t, res)
	if res.StatusCode != http.StatusUnprocessableEntity || doc.Find("[data-testid=error-name]").Length() != 1 {
		t.Fatalf("empty token name: got %d, want 422 with a name error", res.StatusCode)
	}
	doc = page(t, srv.PostForm(t, admin, "/tokens", url.Values{"name": {"ci"}, "expires_in_days": {"30"}}))
	tok := strings.TrimSpace(doc.Find("[data-testid=secret-value]").Text())
	if !strings.HasPrefix(tok, "tw_") {
		t.Fatalf("new token: got %q", tok)
	}
	bearer := func() int {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/tokens", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	if got := bearer(); got != 200 {
		t.Fatalf("bearer: got %d, want 200", got)
	}
	// The list shows it once more, but only by prefix.
	doc = page(t, srv.Get(t, admin, "/tokens"))
	if strings.Contains(doc.Text(), tok) {
		t.Fatalf("the tokens page shows the full token again")
	}
	id, _ := doc.Find("[data-testid=token-row][data-token-name=ci] form").Attr("action")
	res = srv.PostForm(t, admin, id, nil)
	res.Body.Close()
	if got := bearer(); got != http.StatusUnauthorized {
		t.Fatalf("bearer after revoke: got %d, want 401", got)
	}
}

func TestReviewHardening(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	api := func(c *http.Client, method, path, body, bearer string, hdr map[string]string) (int, string) {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return res.StatusCode, string(b)
	}

	// An API token cannot mint tokens.
	status, body := api(admin, http.MethodPost, "/api/v1/tokens", `{"name":"first","expires_in_days":1}`, "", nil)
	if status != http.StatusCreated {
		t.Fatalf("create token with a session: %d %s", status, body)
	}
	tok := body[strings.Index(body, `"token":"`)+9:]
	tok = tok[:strings.Index(tok, `"`)]
	if status, body := api(http.DefaultClient, http.MethodPost, "/api/v1/tokens", `{"name":"forever"}`, tok, nil); status != http.StatusForbidden {
		t.Fatalf("a token creating a token: got %d %s, want 403", status, body)
	}

	// PATCH is all or nothing: disabling oneself fails, so the role change with it
	// does not happen either.
	srv.CreateUser(t, "second-admin", auth.RoleAdmin, "second-admin-password")
	me, _ := srv.Auth.GetUserByName(context.Background(), "admin")
	if status, body := api(admin, http.MethodPatch, "/api/v1/users/"+me.ID, `{"role":"guest","disabled":true}`, "", nil); status != http.StatusConflict {
		t.Fatalf("self-disable with a role change: got %d %s, want 409", status, body)
	}
	if u, _ := srv.Auth.GetUser(context.Background(), me.ID); u.Role != auth.RoleAdmin {
		t.Fatalf("the refused PATCH still changed the role to %s", u.Role)
	}

	// A client's request id is never the one recorded (TestRequestIDNotTakenFromClient);
	// the audit log never stores client text from that header.
	huge := strings.Repeat("x", 5000)
	for id, kept := range map[string]bool{"req-123.abc_DEF": false, huge: false, "has space": false} {
		api(admin, http.MethodPost, "/api/v1/users", `{"username":"rid-`+strconv.Itoa(len(id))+`","role":"guest"}`, "", map[string]string{"X-Request-ID": id})
		var got string
		if err := srv.Pool.QueryRow(context.Background(), `SELECT request_id FROM audit_log WHERE action = 'user.create' ORDER BY id DESC LIMIT 1`).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if (got == id) != kept || len(got) > 64 || got == "" {
			t.Errorf("X-Request-ID of %d bytes: audit stored %q (kept=%v)", len(id), got, got == id)
		}
	}

	// A very long username on sign-in: an ordinary failure, not a server error.
	res := srv.PostForm(t, srv.Client(t), "/login", url.Values{"username": {strings.Repeat("a", 5000)}, "password": {"x"}})
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a 5000-byte username: got %d, want 401", res.StatusCode)
	}
}
