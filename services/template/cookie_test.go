package template_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A value in a Cookie header stays one cookie's value: ';' (and ',', white space, '"'
// and '\', which some parsers read as separators or quotes) would add cookies the
// template does not write, as '&' would add a form field.
func TestCookieValueCannotAddCookies(t *testing.T) {
	t.Parallel()
	rc := &recorder{}
	srv := httptest.NewServer(http.HandlerFunc(rc.handler))
	defer srv.Close()
	tpl := mustParse(t, fmt.Sprintf(`tools:
  - name: get
    input_schema: {type: object, properties: {sid: {type: string}}}
    http: {url: "%[1]s/me", headers: {Cookie: "session={sid}; theme=dark"}}
  - name: lower
    input_schema: {type: object, properties: {sid: {type: string}}}
    http: {url: "%[1]s/me", headers: {cookie: "session={sid}"}}
  - name: other
    input_schema: {type: object, properties: {sid: {type: string}}}
    http: {url: "%[1]s/me", headers: {X-Note: "{sid}"}}
`, srv.URL))
	for _, v := range []string{"abc; role=admin", "abc;role=admin", "abc, role=admin", "abc role=admin", "abc\trole=admin", `"abc`, `abc\`} {
		for _, tool := range []string{"get", "lower"} {
			res := call(t, tpl, tool, map[string]any{"sid": v})
			if !res.IsError || !strings.Contains(res.Text, `argument "sid" cannot go into header`) {
				t.Errorf("%s %q: got %+v, want a refusal naming sid", tool, v, res)
			}
			rc.none(t)
		}
	}
	// A session token goes through as one cookie.
	res := call(t, tpl, "get", map[string]any{"sid": "c2VjcmV0+/=.-_"})
	if res.IsError {
		t.Fatalf("got %+v", res)
	}
	if got := rc.take(t).Header.Get("Cookie"); got != "session=c2VjcmV0+/=.-_; theme=dark" {
		t.Errorf("the server saw Cookie %q", got)
	}
	// Other headers are not cookies.
	if res := call(t, tpl, "other", map[string]any{"sid": "a; b=c"}); res.IsError {
		t.Errorf("X-Note: got %+v", res)
	}
	if got := rc.take(t).Header.Get("X-Note"); got != "a; b=c" {
		t.Errorf("the server saw X-Note %q", got)
	}
}
