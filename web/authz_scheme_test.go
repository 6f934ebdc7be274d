package web_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
)

// basicProxy adds what a reverse proxy with HTTP Basic authentication in front of
// Toolwarden forwards on every request: its own Authorization header.
type basicProxy struct{ next http.RoundTripper }

func (p basicProxy) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Basic dXNlcjpwYXNzd29yZA==")
	return p.next.RoundTrip(r)
}

// An Authorization header of another scheme than Bearer (a Basic-auth proxy's) is
// not Toolwarden's: people still sign in and browse with their session, and a call
// with no token of its own is refused as unauthenticated, not as malformed. The scheme
// is read without regard to case (RFC 9110), so "bearer" is a token too.
func TestAuthorizationOtherSchemes(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	c := srv.Client(t)
	c.Transport = basicProxy{http.DefaultTransport}
	res := srv.PostForm(t, c, "/login", url.Values{"username": {"admin"}, "password": {webtest.AdminPassword}})
	res.Body.Close()
	if loc := res.Header.Get("Location"); res.StatusCode != http.StatusSeeOther || loc == "" || loc[:min(len(loc), 6)] == "/login" {
		t.Fatalf("sign in behind a Basic-auth proxy: HTTP %d to %q, want 303 away from /login", res.StatusCode, loc)
	}
	for _, path := range []string{"/servers", "/api/v1/servers"} {
		res := srv.Get(t, c, path)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Errorf("GET %s signed in behind a Basic-auth proxy: HTTP %d, want 200", path, res.StatusCode)
		}
	}
	anon := srv.Client(t)
	anon.Transport = basicProxy{http.DefaultTransport}
	res = srv.Get(t, anon, "/api/v1/servers")
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /api/v1/servers with a Basic header only: HTTP %d, want 401", res.StatusCode)
	}
	// Nobody brought a credential of ours: no refusal is recorded for it.
	var denied int
	if err := srv.App.Pool.QueryRow(t.Context(), `SELECT count(*) FROM audit_log WHERE action = 'request.denied'`).Scan(&denied); err != nil || denied != 0 {
		t.Errorf("request.denied entries after a proxy's Basic header: %d (%v), want 0", denied, err)
	}

	tok := srv.Token(t, "admin")
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/servers", nil)
	req.Header.Set("Authorization", "bearer "+tok)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("GET /api/v1/servers with 'bearer <token>': HTTP %d, want 200", res.StatusCode)
	}
}
