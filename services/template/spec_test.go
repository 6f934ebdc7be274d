package template_test

import (
	"context"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/template"
)

// specOf lists the tools of the template text through its MCP server and returns the
// spec hash each one carries in its _meta.
func specOf(t *testing.T, text string) map[string]string {
	t.Helper()
	list, err := connectTemplate(t, mustParse(t, text), template.Options{Name: "tpl"}).ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, tool := range list.Tools {
		s, _ := tool.Meta["io.toolwarden/spec"].(string)
		if len(s) != 64 {
			t.Fatalf("tool %s: _meta %v has no io.toolwarden/spec SHA-256", tool.Name, tool.Meta)
		}
		out[tool.Name] = s
	}
	return out
}

// TestSpecHash: each tool's listing carries the SHA-256 of what it does (its command or
// request and its parser), so that a change of behaviour is a change of its definition
// (registry.DefinitionHash). What does not change behaviour (the YAML's layout, the
// parser's name, another tool) keeps it.
func TestSpecHash(t *testing.T) {
	t.Parallel()
	const base = `tools:
  - name: get
    description: Get items
    input_schema: {type: object, properties: {q: {type: string}, n: {type: integer}}}
    http:
      method: POST
      url: https://inv.internal/items?q={q}
      headers: {Accept: application/json, X-Key: "{q}"}
      body: {query: "{q}", limit: 10, tags: [a, "{n}"]}
      timeout: 10s
    parse_response: first
  - name: count
    input_schema: {type: object, properties: {text: {type: string}}}
    command: {argv: [wc, -w], stdin: "{text}", timeout: 5s}
    parse_response: words
response_parsers:
  first: {type: json, path: "$.items[0]"}
  words: {type: regex, pattern: '(\d+)'}
`
	want := specOf(t, base)
	if want["get"] == want["count"] {
		t.Fatal("two different tools have the same spec hash")
	}
	same := map[string]string{
		"layout":         strings.ReplaceAll(base, "{type: json, path: \"$.items[0]\"}", "\n    type: json\n    path: $.items[0]"),
		"description":    strings.Replace(base, "Get items", "Fetch items", 1),
		"parser renamed": strings.ReplaceAll(base, "first", "pick"),
	}
	for what, text := range same {
		if got := specOf(t, text); got["get"] != want["get"] || got["count"] != want["count"] {
			t.Errorf("%s: spec hashes changed, want them kept", what)
		}
	}
	changed := map[string]struct{ tool, from, to string }{
		"method":          {"get", "method: POST", "method: PUT"},
		"url path":        {"get", "/items?q={q}", "/items/{q}"},
		"url host":        {"get", "inv.internal", "inv2.internal"},
		"header value":    {"get", `X-Key: "{q}"`, `X-Key: "k{q}"`},
		"header added":    {"get", "Accept: application/json,", "Accept: application/json, X-Admin: yes,"},
		"header order":    {"get", `Accept: application/json, X-Key: "{q}"`, `X-Key: "{q}", Accept: application/json`},
		"body literal":    {"get", "limit: 10", "limit: 11"},
		"body key":        {"get", "query:", "search:"},
		"body string":     {"get", `[a, "{n}"]`, `["{n}", a]`},
		"body as form":    {"get", `body: {query: "{q}", limit: 10, tags: [a, "{n}"]}`, `form: {query: "{q}"}`},
		"body as text":    {"get", `body: {query: "{q}", limit: 10, tags: [a, "{n}"]}`, `body: "q={q}"`},
		"timeout":         {"get", "timeout: 10s", "timeout: 20s"},
		"parser path":     {"get", "$.items[0]", "$.items[1]"},
		"parser dropped":  {"get", "    parse_response: first\n", ""},
		"argv":            {"count", "[wc, -w]", "[wc, -l]"},
		"stdin":           {"count", `stdin: "{text}"`, `stdin: "x{text}"`},
		"regex pattern":   {"count", `'(\d+)'`, `'(\d+) '`},
		"command timeout": {"count", "timeout: 5s", "timeout: 6s"},
	}
	for what, c := range changed {
		text := strings.Replace(base, c.from, c.to, 1)
		if text == base {
			t.Fatalf("%s: %q is not in the template", what, c.from)
		}
		got := specOf(t, text)
		if got[c.tool] == want[c.tool] {
			t.Errorf("%s: the spec hash of %s stayed %s", what, c.tool, got[c.tool])
		}
		for name, h := range got {
			if name != c.tool && h != want[name] {
				t.Errorf("%s: the spec hash of %s, which did not change, changed too", what, name)
			}
		}
	}
}
