package gateway

import (
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/yosida95/uritemplate/v3"

	"github.com/toolwarden/toolwarden/services/router"
)

// A wrapped URI unwraps to the server and the upstream's URI byte for byte, whatever
// the upstream's URI holds; anything else is not a URI of the gateway.
func TestResourceURIRoundTrip(t *testing.T) {
	t.Parallel()
	for _, uri := range []string{
		"test://readme", "file:///etc/hosts", "https://h.example/p/q?x=1&y=%2F#frag", "urn:isbn:0451450523",
		"demo://resource/static/document/a%20b.md", "relative/path", "toolwarden://mt/test://readme", "a b/ü",
		"x://h/" + strings.Repeat("/", 5),
	} {
		w := wrapURI("my-server1", uri)
		server, got, ok := unwrapURI(w)
		if !ok || server != "my-server1" || got != uri {
			t.Errorf("unwrap(wrap(%q)) = %q, %q, %v", uri, server, got, ok)
		}
	}
	for _, bad := range []string{"", "test://readme", "toolwarden://", "toolwarden://mt", "toolwarden://mt/",
		"toolwarden:///x", "TOOLWARDEN://mt/x", "toolwarden:/mt/x"} {
		if s, u, ok := unwrapURI(bad); ok {
			t.Errorf("unwrap(%q) = %q, %q: want not a URI of the gateway", bad, s, u)
		}
	}
}

// A wrapped template is a valid RFC 6570 template whose expansion is the prefix and
// the expansion of the upstream's, so it unwraps to exactly what the upstream expects,
// values that expansion percent-encodes included.
func TestResourceTemplateRoundTrip(t *testing.T) {
	t.Parallel()
	vals := uritemplate.Values{}
	vals.Set("name", uritemplate.String("a b/c%d"))
	vals.Set("path", uritemplate.String("dir/file name.txt"))
	vals.Set("id", uritemplate.String("7"))
	vals.Set("q", uritemplate.String("x&y"))
	vals.Set("list", uritemplate.List("a", "b c"))
	for _, tmpl := range []string{"test://notes/{name}", "file:///{+path}", "demo://x/{id}{?q,id}", "https://h/{id}/{name}#{+path}",
		"demo://resource/dynamic/text/{resourceId}", "x://{/list*}"} {
		orig, err := uritemplate.New(tmpl)
		if err != nil {
			t.Fatalf("%q: %v", tmpl, err)
		}
		wrapped, err := uritemplate.New(wrapURI("mt", tmpl))
		if err != nil {
			t.Fatalf("wrapped %q is not a valid template: %v", tmpl, err)
		}
		want, err := orig.Expand(vals)
		if err != nil {
			t.Fatal(err)
		}
		got, err := wrapped.Expand(vals)
		if err != nil {
			t.Fatal(err)
		}
		if got != wrapURI("mt", want) {
			t.Errorf("%q expands to %q, want %q", tmpl, got, wrapURI("mt", want))
		}
		if server, upstream, ok := unwrapURI(got); !ok || server != "mt" || upstream != want {
			t.Errorf("%q: unwrap(%q) = %q, %q, %v; want mt, %q", tmpl, got, server, upstream, ok, want)
		}
		if want != "" && !wrapped.Regexp().MatchString(got) {
			t.Errorf("%q: the wrapped template does not match its own expansion %q", tmpl, got)
		}
	}
}

// A cursor comes back as it was given, and only for the list it came from.
func TestCursor(t *testing.T) {
	t.Parallel()
	p := position{Server: "mt", Key: "toolwarden://mt/test://x?y=ü"}
	c := encodeCursor("resources", p)
	got, err := decodeCursor("resources", c)
	if err != nil || got.Server != p.Server || got.Key != p.Key {
		t.Fatalf("decode(encode(%+v)) = %+v, %v", p, got, err)
	}
	if _, err := decodeCursor("prompts", c); err == nil {
		t.Error("a resources cursor was taken for prompts")
	}
	for _, bad := range []string{"nonsense!", "e30", "bnVsbA"} { // not base64, {}, null
		if _, err := decodeCursor("resources", bad); err == nil {
			t.Errorf("cursor %q was taken", bad)
		}
	}
	if got, err := decodeCursor("resources", ""); got != nil || err != nil {
		t.Errorf("the empty cursor: %+v, %v; want the first page", got, err)
	}
}

func TestClip(t *testing.T) {
	t.Parallel()
	if got := clip("héllo", 2); got != "h…" {
		t.Errorf("clip cut a rune: %q", got)
	}
	if got := clip("ok\xff", 10); got != "ok\uFFFD" {
		t.Errorf("clip kept invalid UTF-8: %q", got)
	}
}

// A tool's resource links and embedded resources name the resource as resources/list
// does, so the client can read it through the gateway; a null structuredContent (as an
// execution's step stores a result without one) is left out.
func TestResultURIsNamespaced(t *testing.T) {
	res := &router.Result{Content: []router.Content{
		{Type: "resource_link", URI: "file:///a.txt", Name: "a"},
		{Type: "resource", Resource: &router.Resource{URI: "test://readme", Text: "hi"}},
		{Type: "text", Text: "plain"},
	}, StructuredContent: []byte("null")}
	out := resultOf(res, "docs")
	if l, ok := out.Content[0].(*mcp.ResourceLink); !ok || l.URI != "toolwarden://docs/file:///a.txt" {
		t.Fatalf("resource link: %+v", out.Content[0])
	}
	if e, ok := out.Content[1].(*mcp.EmbeddedResource); !ok || e.Resource.URI != "toolwarden://docs/test://readme" {
		t.Fatalf("embedded resource: %+v", out.Content[1])
	}
	if res.Content[1].Resource.URI != "test://readme" {
		t.Fatal("resultOf changed the router's result")
	}
	if out.StructuredContent != nil {
		t.Fatalf("structuredContent: %v", out.StructuredContent)
	}
}

// Content of a type contentIn does not know is replaced by a note naming it, never
// passed on unread.
func TestUnknownPromptContentLeftOut(t *testing.T) {
	got, ok := contentIn("mt", nil, nil).(*mcp.TextContent)
	if !ok || !strings.Contains(got.Text, "left out") || !strings.Contains(got.Text, "none") {
		t.Fatalf("unknown content: %#v, want a note that it was left out", got)
	}
}
