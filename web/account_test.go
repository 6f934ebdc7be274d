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
