package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
)

// An htmx request whose session ended gets a 401 with HX-Redirect to the sign-in page,
// which returns to the page the browser shows (HX-Current-URL), not a 303 that htmx
// follows and swaps the sign-in page into the fragment's target. A page of another
// origin is not returned to.
func TestHtmxRequestWithoutSessionRedirectsTheWholePage(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	c := srv.Client(t)
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for _, tc := range []struct {
		name, method, current, want string
	}{
		{"a fragment of the tools page", http.MethodGet, srv.URL + "/tools?q=echo", "/login?next=" + url.QueryEscape("/tools?q=echo")},
		{"a form's post", http.MethodPost, srv.URL + "/users", "/login?next=" + url.QueryEscape("/users")},
		{"another origin", http.MethodGet, "https://evil.example/tools", "/login?next=" + url.QueryEscape("/")},
		{"no current URL", http.MethodGet, "", "/login?next=" + url.QueryEscape("/")},
	} {
		req, err := http.NewRequest(tc.method, srv.URL+"/tools?fragment=list", strings.NewReader(""))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("HX-Request", "true")
		req.Header.Set("Origin", srv.URL)
		if tc.current != "" {
			req.Header.Set("HX-Current-URL", tc.current)
		}
		if tc.method == http.MethodPost {
			req.URL.Path = "/users"
			req.URL.RawQuery = ""
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized || res.Header.Get("HX-Redirect") != tc.want || res.Header.Get("Location") != "" {
			t.Errorf("%s: got %d, HX-Redirect %q, Location %q; want 401, HX-Redirect %q and no Location",
				tc.name, res.StatusCode, res.Header.Get("HX-Redirect"), res.Header.Get("Location"), tc.want)
		}
	}
	// A plain page request is still sent to sign in with a 303.
	res := srv.Get(t, c, "/tools")
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/login?next="+url.QueryEscape("/tools") {
		t.Errorf("a page without a session: got %d to %q, want 303 to sign in", res.StatusCode, res.Header.Get("Location"))
	}
}
