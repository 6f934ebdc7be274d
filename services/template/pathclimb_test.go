package template_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"sync"
	"testing"
)

// decodeLeniently decodes each valid %XX, as a lenient proxy or server does.
func decodeLeniently(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			var c byte
			if _, err := fmt.Sscanf(s[i+1:i+3], "%02x", &c); err == nil {
				b.WriteByte(c)
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// dropParams drops what follows ';' in each segment of p, as Tomcat, Jetty and Spring do.
func dropParams(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i], _, _ = strings.Cut(s, ";")
	}
	return strings.Join(segs, "/")
}

// A path placeholder's value cannot leave the path the template names even behind a
// proxy or framework that decodes %2F (once or twice), reads '\' as '/', drops a
// segment's ";params" and resolves dot segments, as nginx's `proxy_pass http://backend/api/;` does; values with dots,
// slashes between real names or stray '%' still go through.
func TestPathValueCannotClimbOut(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.URL.EscapedPath())
		mu.Unlock()
		_, _ = w.Write([]byte("ok"))
	}))
	defer srv.Close()
	tpl := mustParse(t, fmt.Sprintf(`tools:
  - name: del
    input_schema: {type: object, properties: {v: {type: string}}}
    http: {method: DELETE, url: "%[1]s/api/items/{v}"}
  - name: two
    input_schema: {type: object, properties: {a: {type: string}, b: {type: string}}}
    http: {url: "%[1]s/api/items/{a}{b}/x"}
`, srv.URL))
	take := func() []string {
		mu.Lock()
		defer mu.Unlock()
		g := got
		got = nil
		return g
	}

	for _, v := range []string{
		".", "..", "../../admin/keys", "a/../../admin", "..\\admin", "a/..", "./a", "a/./b",
		"%2e%2e%2fadmin", "%2E%2E%2Fadmin", "..%2fadmin", "..%5cadmin", "%252e%252e%252fadmin",
		"/admin", "a//b", "a/", "%2F", "\\", "a%2f%2fb", "%25252525252e",
		// Tomcat, Jetty and Spring drop what follows ';' in a segment: "..;x" is "..",
		// and ";x" an empty segment.
		"..;", "..;/x", "..;/..;/admin", "%2e%2e;", "%2e%2e;/admin", ".;", "..;jsessionid=1", "..%3b", "..%253b/admin",
		"a/..;x/b", ";x", ";", "a/;x/b", "%3bx",
	} {
		res := call(t, tpl, "del", map[string]any{"v": v})
		if !res.IsError || !strings.Contains(res.Text, `argument "v"`) {
			t.Errorf("%q: got %+v, want a refusal naming v", v, res)
		}
		if g := take(); len(g) != 0 {
			t.Errorf("%q: the server saw %q, want no request", v, g)
		}
	}
	// A piece split across two placeholders is refused too, also when each value
	// passes alone and only the segment they make decodes to a dot segment.
	for _, ab := range [][2]string{{"x/", "/.."}, {".", "."}, {"x/.", "./y"}, {"%2e", "%2e"},
		{"%2", "e."}, {"%2", "f.."}, {"%", "2e%2e"}, {".", "%2e"}, {"%25", "2e."}, {"..%", "2fadmin"},
		{"..", ";x"}, {";x", "a"}, {".", ".;"}, {"..%", "3b"}} {
		res := call(t, tpl, "two", map[string]any{"a": ab[0], "b": ab[1]})
		if !res.IsError {
			t.Errorf("%q: got %+v, want a refusal", ab, res)
		}
		if g := take(); len(g) != 0 {
			t.Errorf("%q: the server saw %q, want no request", ab, g)
		}
	}
	// Values that make an ordinary segment together still go through, and stay
	// under /api/items/ however often the path is decoded.
	for _, ab := range [][2]string{{"v1", ".2"}, {"a", "b"}, {"50", "%"}, {"%2", "x"}, {"a.", ".b"}, {"a", "b%2Fc"}, {"a", ";x"}} {
		res := call(t, tpl, "two", map[string]any{"a": ab[0], "b": ab[1]})
		g := take()
		if res.IsError || len(g) != 1 {
			t.Errorf("%q: got %+v, the server saw %q, want it sent", ab, res, g)
			continue
		}
		p := g[0]
		for range 3 {
			p = decodeLeniently(p)
			if c := path.Clean(dropParams(strings.ReplaceAll(p, "\\", "/"))); !strings.HasPrefix(c, "/api/items/") || !strings.HasSuffix(c, "/x") {
				t.Errorf("%q: sent as %q, which a decoding proxy reads as %q", ab, g[0], c)
			}
		}
	}

	for _, v := range []string{
		"42", "v1.2", "file.tar.gz", ".hidden", "x..", "...", "a.b..c", "group/project",
		"a/.b/c", "50%", "100%25", "%s%n", "a b", "\u00e9", "a;b", "v1;x=2", "...;x", "x/a;b", "a;",
	} {
		res := call(t, tpl, "del", map[string]any{"v": v})
		if res.IsError {
			t.Errorf("%q: got %+v, want it sent", v, res)
			continue
		}
		g := take()
		if len(g) != 1 {
			t.Fatalf("%q: the server saw %q, want one request", v, g)
		}
		// However many times a proxy decodes it, the path stays under /api/items/.
		p := g[0]
		for range 3 {
			p = decodeLeniently(p)
			if c := path.Clean(dropParams(strings.ReplaceAll(p, "\\", "/"))); !strings.HasPrefix(c, "/api/items/") || c == "/api/items" {
				t.Errorf("%q: sent as %q, which a decoding proxy reads as %q", v, g[0], c)
			}
		}
	}
}
