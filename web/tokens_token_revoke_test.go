package web_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
)

// An API token never manages tokens, even an administrator's: it cannot revoke another
// person's token through the API or the page's form (403, the token still works), while
// it may still revoke its own user's, as its user may.
func TestAdminTokenRevokesNoOthersTokens(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	srv.CreateUser(t, "carol", auth.RoleToolUser, "carol-password-123")
	carol, err := srv.Auth.GetUserByName(t.Context(), "carol")
	if err != nil {
		t.Fatal(err)
	}
	carolPlain, carolTok, err := srv.Auth.CreateToken(t.Context(), audit.System, carol.ID, auth.NewToken{Name: "ci"})
	if err != nil {
		t.Fatal(err)
	}
	adminToken := srv.Token(t, "admin")
	byToken := webtest.API{T: t, Srv: srv, Bearer: adminToken}
	got := byToken.Error(http.MethodDelete, "/api/v1/tokens/"+carolTok.ID, nil, http.StatusForbidden, "forbidden")
	if got.Error.Message != "an API token cannot revoke other people's API tokens: sign in to do it" {
		t.Errorf("the refusal says %q", got.Error.Message)
	}
	res := srv.PostFormHeaders(t, srv.Client(t), "/tokens/"+carolTok.ID+"/revoke", url.Values{},
		map[string]string{"Authorization": "Bearer " + adminToken})
	res.Body.Close()
	carolAPI := webtest.API{T: t, Srv: srv, Bearer: carolPlain}
	if st, body := carolAPI.Do(http.MethodGet, "/api/v1/tools", nil); st != http.StatusOK {
		t.Fatalf("carol's token after an administrator's token tried to revoke it (the page answered %d): %d %s", res.StatusCode, st, body)
	}
	if n := srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'token.revoke'`); n != 0 {
		t.Errorf("%d token.revoke audit rows, want none", n)
	}
	// The administrator signed in still may.
	admin := webtest.API{T: t, Srv: srv, C: srv.Login(t, "admin", webtest.AdminPassword)}
	admin.JSON(http.MethodDelete, "/api/v1/tokens/"+carolTok.ID, nil, http.StatusOK, nil)
	if st, _ := carolAPI.Do(http.MethodGet, "/api/v1/tools", nil); st != http.StatusUnauthorized {
		t.Fatalf("carol's token revoked by the signed-in administrator: %d, want 401", st)
	}
	// A token revoking one of its own user's tokens, itself included, as before.
	adminID := adminID(t, srv)
	_, other, err := srv.Auth.CreateToken(t.Context(), audit.System, adminID, auth.NewToken{Name: "other"})
	if err != nil {
		t.Fatal(err)
	}
	byToken.JSON(http.MethodDelete, "/api/v1/tokens/"+other.ID, nil, http.StatusOK, nil)
	toks, err := srv.Auth.ListTokens(t.Context(), adminID)
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range toks {
		if tk.Name != "other" {
			byToken.JSON(http.MethodDelete, "/api/v1/tokens/"+tk.ID, nil, http.StatusOK, nil)
		}
	}
	if st, _ := byToken.Do(http.MethodGet, "/api/v1/tools", nil); st != http.StatusUnauthorized {
		t.Fatalf("the administrator's token after revoking itself: %d, want 401", st)
	}
}

// A response carrying a secret shown once (a new token, a generated password) is not to
// be kept by any cache.
func TestSecretResponsesNoStore(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	c := srv.Login(t, "admin", webtest.AdminPassword)
	for _, r := range []struct {
		method, path string
		body         any
		want         int
	}{
		{http.MethodPost, "/api/v1/tokens", map[string]any{"name": "ci"}, http.StatusCreated},
		{http.MethodPost, "/api/v1/users", map[string]any{"username": "dave", "role": "tool_user"}, http.StatusCreated},
	} {
		res := secretRequest(t, srv, c, r.method, r.path, r.body)
		res.Body.Close()
		if res.StatusCode != r.want || res.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("%s %s: %d with Cache-Control %q, want %d and no-store", r.method, r.path, res.StatusCode,
				res.Header.Get("Cache-Control"), r.want)
		}
	}
	dave, err := srv.Auth.GetUserByName(t.Context(), "dave")
	if err != nil {
		t.Fatal(err)
	}
	res := secretRequest(t, srv, c, http.MethodPost, "/api/v1/users/"+dave.ID+"/password", nil)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("a generated password: %d with Cache-Control %q, want 200 and no-store", res.StatusCode, res.Header.Get("Cache-Control"))
	}
}

// secretRequest sends body as JSON with c and returns the response, headers and all.
func secretRequest(t *testing.T, srv *webtest.Server, c *http.Client, method, path string, body any) *http.Response {
	t.Helper()
	raw := []byte{}
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			t.Fatal(err)
		}
	}
	req, err := http.NewRequest(method, srv.URL+path, bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}
