package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
)

// A person changes their own password: the current one must match, the new one obeys
// the rules of user creation, an API token may not do it, other sessions end and the
// one that asked stays, and the change is audited.
func TestChangeOwnPassword(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	const pw = "first-password-123"
	u := srv.CreateUser(t, "carol", auth.RoleToolUser, pw)
	here := srv.Login(t, "carol", pw)
	elsewhere := srv.Login(t, "carol", pw)
	other := srv.Login(t, "admin", webtest.AdminPassword)
	me := webtest.API{T: t, Srv: srv, C: here}
	tok := srv.Token(t, "carol")

	// Bad input names its field and changes nothing.
	e := me.Error(http.MethodPost, "/api/v1/me/password", map[string]string{"current_password": "wrong-password-000", "new_password": "second-password-456"},
		http.StatusBadRequest, "invalid_input")
	if !strings.Contains(string(e.Error.Details), "current_password") {
		t.Fatalf("wrong current password: details %s do not name current_password", e.Error.Details)
	}
	e = me.Error(http.MethodPost, "/api/v1/me/password", map[string]string{"current_password": pw, "new_password": "short"},
		http.StatusBadRequest, "invalid_input")
	if !strings.Contains(string(e.Error.Details), "new_password") || !strings.Contains(e.Error.Message+string(e.Error.Details), "12") {
		t.Fatalf("weak new password: %s %s does not name new_password and the rule", e.Error.Message, e.Error.Details)
	}
	me.Error(http.MethodPost, "/api/v1/me/password", map[string]string{"current_password": pw, "new_password": "carol"},
		http.StatusBadRequest, "invalid_input")
	// An API token is not a person.
	webtest.API{T: t, Srv: srv, Bearer: tok}.Error(http.MethodPost, "/api/v1/me/password",
		map[string]string{"current_password": pw, "new_password": "second-password-456"}, http.StatusForbidden, "forbidden")
	webtest.API{T: t, Srv: srv}.Error(http.MethodPost, "/api/v1/me/password",
		map[string]string{"current_password": pw, "new_password": "second-password-456"}, http.StatusUnauthorized, "unauthenticated")
	if n := srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'user.password_change' AND result = 'success'`); n != 0 {
		t.Fatalf("refused changes were audited as changes: %d", n)
	}
	if n := srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'user.password_change' AND result = 'failure'`); n != 1 {
		t.Fatalf("the wrong current password was audited %d times, want once as a failure", n)
	}
	if ok, _ := srv.Auth.GetUser(t.Context(), u.ID); ok.PasswordHash == "" {
		t.Fatal("user lost its password")
	}

	var out map[string]any
	me.JSON(http.MethodPost, "/api/v1/me/password", map[string]string{"current_password": pw, "new_password": "second-password-456"}, http.StatusOK, &out)
	if out["changed"] != true {
		t.Fatalf("answer %v", out)
	}
	// This session stays; the other session of carol ended; admin's is untouched.
	for _, c := range []struct {
		name string
		c    *http.Client
		want int
	}{{"this session", here, http.StatusOK}, {"carol's other session", elsewhere, http.StatusSeeOther}, {"another user", other, http.StatusOK}} {
		res := srv.Get(t, c.c, "/tools")
		res.Body.Close()
		if res.StatusCode != c.want {
			t.Errorf("%s: GET /tools = %d, want %d", c.name, res.StatusCode, c.want)
		}
	}
	// The token still works (tokens are not sessions).
	if st, _ := (webtest.API{T: t, Srv: srv, Bearer: tok}).Do(http.MethodGet, "/api/v1/tools", nil); st != http.StatusOK {
		t.Errorf("token after a password change: %d", st)
	}
	// Only the new password signs in.
	res := srv.PostForm(t, srv.Client(t), "/login", url.Values{"username": {"carol"}, "password": {pw}})
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("old password: %d", res.StatusCode)
	}
	srv.Login(t, "carol", "second-password-456")
	if n := srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'user.password_change' AND result = 'success' AND target_id = $1 AND actor_name = 'carol'`, u.ID); n != 1 {
		t.Fatalf("password changes audited: %d, want 1", n)
	}
	if n := srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'user.password_change' AND payload::text LIKE '%password-456%'`); n != 0 {
		t.Fatal("the audit entry holds the password")
	}
	// Guessing the current password through a session is throttled like signing in:
	// after 5 wrong ones from this address, even the right one waits.
	const now = "second-password-456"
	for i := 0; i < 5; i++ {
		me.Error(http.MethodPost, "/api/v1/me/password", map[string]string{"current_password": "guess-" + string(rune('a'+i)) + "-password", "new_password": "third-password-789"},
			http.StatusBadRequest, "invalid_input")
	}
	me.Error(http.MethodPost, "/api/v1/me/password", map[string]string{"current_password": now, "new_password": "third-password-789"},
		http.StatusTooManyRequests, "rate_limited")
}

// The page under the user menu changes the password with a form and shows the field's
// error in place.
func TestChangeOwnPasswordPage(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	const pw = "first-password-123"
	srv.CreateUser(t, "dave", auth.RoleAuditor, pw)
	c := srv.Login(t, "dave", pw)
	res := srv.Get(t, c, "/tools")
	doc := page(t, res)
	if doc.Find(`a[href="/account/password"]`).Length() != 1 {
		t.Fatal("the user menu has no link to change the password")
	}
	res = srv.PostForm(t, c, "/account/password", url.Values{"current_password": {"nope-nope-nope"}, "new_password": {"second-password-456"}})
	if res.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("wrong current password: %d", res.StatusCode)
	}
	doc = page(t, res)
	if got := doc.Find(`[data-testid="error-current_password"]`).Text(); !strings.Contains(got, "current password") {
		t.Fatalf("field error %q", got)
	}
	res = srv.PostForm(t, c, "/account/password", url.Values{"current_password": {pw}, "new_password": {"second-password-456"}})
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/account/password?changed=1" {
		t.Fatalf("change: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
	doc = page(t, srv.Get(t, c, "/account/password?changed=1"))
	if doc.Find(`[data-testid="password-changed"]`).Length() != 1 {
		t.Fatal("no confirmation after the change")
	}
	srv.Login(t, "dave", "second-password-456")
}

// A password change ends the session it came from under its old id: a copy of the
// cookie taken before it (a stolen one) gets the signed-out answer, while the browser
// that made the change gets a new cookie, with the flags of sign-in, and stays signed
// in. The page and the API alike; an API token gets no cookie.
func TestChangeOwnPasswordRenewsTheCookie(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	srv.CreateUser(t, "erin", auth.RoleToolUser, "first-password-123")
	base, _ := url.Parse(srv.URL)
	// steal copies c's session cookie into a browser of its own.
	steal := func(c *http.Client) (*http.Client, string) {
		old := sessionCookie(c, srv.URL)
		thief := srv.Client(t)
		thief.Jar.SetCookies(base, []*http.Cookie{{Name: "tw_session", Value: old}})
		return thief, old
	}
	check := func(how string, c, thief *http.Client, old string, res *http.Response) {
		t.Helper()
		var set *http.Cookie
		for _, ck := range res.Cookies() {
			if ck.Name == "tw_session" {
				set = ck
			}
		}
		if set == nil || set.Value == "" || set.Value == old {
			t.Fatalf("%s: Set-Cookie %q; want a new tw_session", how, res.Header.Values("Set-Cookie"))
		}
		if !set.HttpOnly || set.SameSite != http.SameSiteLaxMode || set.Path != "/" || set.Expires.IsZero() {
			t.Errorf("%s: new session cookie %+v; want HttpOnly, SameSite=Lax, Path=/ and an expiry, as at sign-in", how, set)
		}
		if got := sessionCookie(c, srv.URL); got != set.Value {
			t.Fatalf("%s: the browser holds %q, want the new cookie", how, got)
		}
		res = srv.Get(t, thief, "/tokens")
		res.Body.Close()
		if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), "/login") {
			t.Errorf("%s: GET /tokens with the old cookie = %d to %q, want 303 to /login", how, res.StatusCode, res.Header.Get("Location"))
		}
		webtest.API{T: t, Srv: srv, C: thief}.Error(http.MethodPost, "/api/v1/tokens", map[string]any{"name": "kept"},
			http.StatusUnauthorized, "unauthenticated")
		res = srv.Get(t, c, "/tokens")
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Errorf("%s: GET /tokens by the browser that changed it = %d, want 200", how, res.StatusCode)
		}
	}

	// The page.
	here := srv.Login(t, "erin", "first-password-123")
	thief, old := steal(here)
	res := srv.PostForm(t, here, "/account/password", url.Values{"current_password": {"first-password-123"}, "new_password": {"second-password-456"}})
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("change on the page: %d", res.StatusCode)
	}
	check("the page", here, thief, old, res)

	// The API, with a session.
	here = srv.Login(t, "erin", "second-password-456")
	thief, old = steal(here)
	post := func(c *http.Client, bearer string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/api/v1/me/password",
			strings.NewReader(`{"current_password":"second-password-456","new_password":"third-password-789"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	// An API token may not change the password, and is given no session.
	if res := post(srv.Client(t), srv.Token(t, "erin")); res.StatusCode != http.StatusForbidden || len(res.Cookies()) != 0 {
		t.Fatalf("change with an API token: %d, Set-Cookie %q; want 403 and no cookie", res.StatusCode, res.Header.Values("Set-Cookie"))
	}
	res = post(here, "")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("change through the API: %d", res.StatusCode)
	}
	check("the API", here, thief, old, res)
}

// Too many wrong current passwords are refused on the form itself, as sign-in refuses
// them: the field says why and when to try again, with Retry-After, not an error page.
func TestChangeOwnPasswordPageThrottled(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Auth: &auth.Options{MaxAccountFailures: 2}})
	const pw = "first-password-123"
	srv.CreateUser(t, "erin", auth.RoleAuditor, pw)
	c := srv.Login(t, "erin", pw)
	for i := range 2 {
		res := srv.PostForm(t, c, "/account/password", url.Values{"current_password": {"nope-nope-nope"}, "new_password": {"second-password-456"}})
		res.Body.Close()
		if res.StatusCode != http.StatusUnprocessableEntity {
			t.Fatalf("wrong current password %d: %d", i+1, res.StatusCode)
		}
	}
	res := srv.PostForm(t, c, "/account/password", url.Values{"current_password": {pw}, "new_password": {"second-password-456"}})
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" {
		t.Fatalf("after two wrong passwords: HTTP %d, Retry-After %q; want 429 with Retry-After", res.StatusCode, res.Header.Get("Retry-After"))
	}
	doc := page(t, res)
	if got := doc.Find(`[data-testid="error-current_password"]`).Text(); !strings.Contains(got, "Too many wrong passwords. Try again in") {
		t.Fatalf("field error %q, want it to say too many wrong passwords and when to try again", got)
	}
	if doc.Find(`input[name="new_password"]`).Length() != 1 {
		t.Fatal("the throttled answer is not the form")
	}
}
