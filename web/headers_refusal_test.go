package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
)

// A request refused for its size still gets the security headers: the body limit runs
// inside them, as every other refusal does.
func TestSecurityHeadersOnTooLargeBody(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	c := srv.Client(t)
	res := srv.PostForm(t, c, "/login", url.Values{"username": {"admin"}, "password": {strings.Repeat("x", 5<<20)}})
	res.Body.Close()
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("a 5 MiB sign-in: %d, want 413", res.StatusCode)
	}
	for h, want := range map[string]string{"X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY"} {
		if got := res.Header.Get(h); got != want {
			t.Errorf("413: %s = %q, want %q", h, got, want)
		}
	}
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("413: CSP %q", csp)
	}
}
