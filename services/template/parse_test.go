package template_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/template"
)

// The seed's example, in this format: a command with stdin and a parser, an HTTP tool
// with a JSON parser, and a table parser.
const example = `tools:
  - name: word_count
    description: Count the words in a text
    input_schema: {type: object, properties: {text: {type: string}}, required: [text]}
    command: {argv: ["wc", "-w"], stdin: "{text}", timeout: 10s}
    parse_response: count
  - name: weather
    input_schema:
      type: object
      properties:
        city: {type: string}
    http: {method: GET, url: "https://api.example.com/weather/{city}?units=metric", headers: {Accept: application/json}}
    parse_response: temp
    annotations: {readOnlyHint: true, openWorldHint: true}
  - name: list_databases
    command: {argv: [printf, "| Database | Table |\n| a | b |\n"]}
    parse_response: dbs
response_parsers:
  count:  {type: regex, pattern: "(\\d+)", group: 1}
  temp:   {type: json, path: "$.current.temp"}
  dbs:    {type: blockchain_table, from_column: 0, unique: true}
`

func TestParseExample(t *testing.T) {
	t.Parallel()
	tpl, err := template.Parse(example)
	if err != nil {
		t.Fatal(err)
	}
	if len(tpl.Tools) != 3 || len(tpl.Parsers) != 3 {
		t.Fatalf("got %d tools, %d parsers", len(tpl.Tools), len(tpl.Parsers))
	}
	wc := tpl.Tools[0]
	if wc.Name != "word_count" || wc.Command == nil || wc.Command.Timeout != 10*time.Second || wc.Parse != "count" || wc.Line != 2 {
		t.Fatalf("word_count: %+v", wc)
	}
	if p, ok := wc.Command.Stdin.Whole(); !ok || p != "text" {
		t.Fatalf("stdin: %+v", wc.Command.Stdin)
	}
	w := tpl.Tools[1]
	if w.HTTP == nil || w.HTTP.URL.Host != "api.example.com" || w.HTTP.URL.Scheme != "https" || w.Annotations["readOnlyHint"] != true {
		t.Fatalf("weather: %+v", w)
	}
	if tpl.Parsers["dbs"].Type != template.ParserTable || !tpl.Parsers["dbs"].Header {
		t.Fatalf("dbs: %+v", tpl.Parsers["dbs"])
	}
	if got := template.ToolNames(example); strings.Join(got, ",") != "word_count,weather,list_databases" {
		t.Fatalf("tool names: %v", got)
	}
	if !template.HasCommands(example) {
		t.Fatal("HasCommands: false")
	}
	if template.HasCommands("tools:\n  - name: x\n    http: {url: \"https://h/\"}\n") {
		t.Fatal("HasCommands: true for an HTTP-only template")
	}
}

// Every problem names its line; placeholders in the wrong place are refused before
// anything runs.
// aliasHeaders is a template whose 500 tools each use one anchor's 1,000 headers.
var aliasHeaders = func() string {
	var b strings.Builder
	b.WriteString("tools:\n  - {name: t0, http: {url: \"https://example.com/\", headers: &h {")
	for i := range 1000 {
		fmt.Fprintf(&b, "h%d: a, ", i)
	}
	b.WriteString("}}}\n")
	for i := 1; i < 500; i++ {
		fmt.Fprintf(&b, "  - {name: t%d, http: {url: \"https://example.com/\", headers: *h}}\n", i)
	}
	return b.String()
}()

// aliasDescription is a template whose 50 tools each use one anchor's 100 KiB
// description: 5 MiB of text once the aliases are followed, from 100 KiB.
var aliasDescription = func() string {
	var b strings.Builder
	b.WriteString("tools:\n  - {name: t0, command: {argv: [\"true\"]}, description: &d " + strings.Repeat("x", 100<<10) + "}\n")
	for i := 1; i < 50; i++ {
		fmt.Fprintf(&b, "  - {name: t%d, command: {argv: [\"true\"]}, description: *d}\n", i)
	}
	return b.String()
}()

func TestParseProblems(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, yaml string
		want       []string // each a problem's text, "line N: ..." prefix included
	}{
		{"empty", "", []string{"is empty"}},
		{"aliases that multiply", aliasHeaders, []string{"stands for more than 200000 values once its aliases"}},
		{"aliases of a big string", aliasDescription, []string{"stands for more than 1 MiB of text once its aliases"}},
		{"unquoted placeholder in a body", "tools:\n  - name: t\n    input_schema: {type: object, properties: {city: {type: string}}}\n    http:\n      method: POST\n      url: \"https://example.com/\"\n      body:\n        city: {city}\n",
			[]string{`line 8: write "{city}" in quotes: unquoted, {city} is a YAML mapping`}},
		{"unquoted placeholder in a header", "tools:\n  - name: t\n    input_schema: {type: object, properties: {city: {type: string}}}\n    http:\n      url: \"https://example.com/\"\n      headers:\n        X-City: {city}\n",
			[]string{`line 7: header X-City: write "{city}" in quotes`}},
		{"placeholder in an XML text body", "tools:\n  - name: t\n    input_schema: {type: object, properties: {u: {type: string}}}\n    http:\n      method: POST\n      url: \"https://example.com/\"\n      headers:\n        Content-Type: text/xml\n      body: \"<user>{u}</user>\"\n",
			[]string{"line 9: a body written as text is sent as it is, so placeholders could break its text/xml"}},
		{"placeholder in a JSON-looking text body", "tools:\n  - name: t\n    input_schema: {type: object, properties: {q: {type: string}}}\n    http:\n      method: POST\n      url: \"https://example.com/\"\n      body: '{\"q\": \"{q}\", \"role\": \"user\"}'\n",
			[]string{"line 7: a body written as text with placeholders is sent as it is, and this one looks like JSON or XML"}},
		{"placeholder in the Content-Type", "tools:\n  - name: t\n    input_schema: {type: object, properties: {c: {type: string}}}\n    http:\n      url: \"https://example.com/\"\n      headers:\n        Content-Type: \"{c}\"\n",
			[]string{"line 7: the Content-Type header must be written out"}},
		{"not yaml", "tools:\n  - name: [\n", []string{"line 2: is not valid YAML"}},
		{"no tools", "response_parsers: {}\n", []string{"line 1: has no tools"}},
		{"unknown top key", "tool:\n  - name: x\n", []string{`line 1: the template has no key "tool"`}},
		{"unknown placeholder", `tools:
  - name: weather
    input_schema: {type: object, properties: {city: {type: string}}}
    http:
      url: "https://api.example.com/w"
      headers:
        X-City: "{cty}"
`, []string{"line 7: unknown placeholder {cty}; input_schema has city"}},
		{"placeholder in a block scalar", `tools:
  - name: t
    input_schema: {type: object, properties: {a: {type: string}}}
    command:
      argv: [cat]
      stdin: |
        first {a}
        second {b}
`, []string{"line 8: unknown placeholder {b}; input_schema has a"}},
		{"no properties", "tools:\n  - name: t\n    command: {argv: [echo, \"{x}\"]}\n",
			[]string{"line 3: unknown placeholder {x}; input_schema has no properties"}},
		{"program from a placeholder", "tools:\n  - name: t\n    input_schema: {type: object, properties: {p: {}}}\n    command: {argv: [\"{p}\", x]}\n",
			[]string{"line 4: argv[0] is the program to run and cannot have placeholders"}},
		{"host from a placeholder", "tools:\n  - name: t\n    input_schema: {type: object, properties: {h: {}}}\n    http: {url: \"https://{h}/x\"}\n",
			[]string{"line 4: placeholder {h} is in the host or port"}},
		{"port from a placeholder", "tools:\n  - name: t\n    input_schema: {type: object, properties: {p: {}}}\n    http: {url: \"https://example.com:{p}/x\"}\n",
			[]string{"line 4: placeholder {p} is in the host or port"}},
		{"host suffix from a placeholder", "tools:\n  - name: t\n    input_schema: {type: object, properties: {p: {}}}\n    http: {url: \"https://example.com{p}\"}\n",
			[]string{"line 4: placeholder {p} is in the host or port"}},
		{"scheme from a placeholder", "tools:\n  - name: t\n    input_schema: {type: object, properties: {s: {}}}\n    http: {url: \"{s}://example.com/\"}\n",
			[]string{"line 4: url must start with http:// or https:// and a host, not with placeholder {s}"}},
		{"credentials in the url", "tools:\n  - name: t\n    http: {url: \"https://u:p@example.com/\"}\n",
			[]string{"line 3: url must not contain credentials"}},
		{"fragment", "tools:\n  - name: t\n    http: {url: \"https://example.com/a#b\"}\n", []string{"line 3: url must not have a #fragment"}},
		{"not http", "tools:\n  - name: t\n    http: {url: \"file:///etc/passwd\"}\n", []string{"line 3: url must start with http:// or https://"}},
		{"header with a line break", "tools:\n  - name: t\n    http: {url: \"https://e.com/\", headers: {X-A: \"a\\r\\nB: c\"}}\n",
			[]string{"line 3: header X-A must not contain line breaks"}},
		{"host header", "tools:\n  - name: t\n    http: {url: \"https://e.com/\", headers: {Host: x}}\n",
			[]string{"line 3: header Host is decided by the request itself"}},
		{"text body with json content", "tools:\n  - name: t\n    input_schema: {type: object, properties: {a: {}}}\n    http:\n      method: POST\n      url: \"https://e.com/\"\n      headers: {Content-Type: application/json}\n      body: '{\"a\": \"{a}\"}'\n",
			[]string{"line 8: a body written as text is sent as it is"}},
		{"body on GET", "tools:\n  - name: t\n    http: {url: \"https://e.com/\", body: {a: 1}}\n", []string{"line 3: a GET request has no body"}},
		{"both command and http", "tools:\n  - name: t\n    command: {argv: [x]}\n    http: {url: \"https://e.com/\"}\n",
			[]string{`line 4: tool "t" has both command and http`}},
		{"neither", "tools:\n  - name: t\n    description: d\n", []string{`line 2: tool "t" needs a command`}},
		{"duplicate tool", "tools:\n  - name: t\n    command: {argv: [x]}\n  - name: t\n    command: {argv: [y]}\n",
			[]string{`line 4: tool "t" is defined twice (first at line 2)`}},
		{"bad name", "tools:\n  - name: \"a b\"\n    command: {argv: [x]}\n", []string{`line 2: tool name "a b" must be`}},
		{"schema not object", "tools:\n  - name: t\n    input_schema: {type: string}\n    command: {argv: [x]}\n",
			[]string{"line 3: input_schema must have type: object"}},
		{"timeout too long", "tools:\n  - name: t\n    command: {argv: [x], timeout: 2h}\n", []string{"line 3: timeout must be at most 10m0s"}},
		{"timeout garbage", "tools:\n  - name: t\n    command: {argv: [x], timeout: soon}\n", []string{`line 3: timeout must be a duration such as 10s or 2m, not "soon"`}},
		{"unknown parser", "tools:\n  - name: t\n    command: {argv: [x]}\n    parse_response: nope\n",
			[]string{`line 4: parse_response names "nope", which response_parsers does not define`}},
		{"bad regex", "tools:\n  - name: t\n    command: {argv: [x]}\n    parse_response: r\nresponse_parsers:\n  r: {type: regex, pattern: \"(\"}\n",
			[]string{"line 6: pattern does not compile"}},
		{"group out of range", "tools:\n  - name: t\n    command: {argv: [x]}\nresponse_parsers:\n  r: {type: regex, pattern: \"a\", group: 2}\n",
			[]string{"line 5: group must be a whole number from 0 to 0"}},
		{"bad jsonpath", "tools:\n  - name: t\n    command: {argv: [x]}\nresponse_parsers:\n  j: {type: json, path: \"current.temp\"}\n",
			[]string{"line 5: path is not a JSONPath query"}},
		{"parser key of another type", "tools:\n  - name: t\n    command: {argv: [x]}\nresponse_parsers:\n  j: {type: json, path: \"$.a\", unique: true}\n",
			[]string{"line 5: unique does not apply to a json parser"}},
		{"unknown tool key", "tools:\n  - name: t\n    comand: {argv: [x]}\n", []string{`line 3: a tool has no key "comand"`}},
		{"unknown extract", "tools:\n  - name: t\n    command: {argv: [x]}\nresponse_parsers:\n  d: {type: blockchain_table, extract: unique_rows}\n",
			[]string{`line 5: extract: "unique_rows" is not known; use unique_databases`}},
		{"extract and a column", "tools:\n  - name: t\n    command: {argv: [x]}\nresponse_parsers:\n  d: {type: table, extract: unique_databases, from_column: 1}\n",
			[]string{"line 5: extract says the column and uniqueness already"}},
		{"placeholder in a body key", "tools:\n  - name: t\n    input_schema: {type: object, properties: {k: {}}}\n    http: {method: POST, url: \"https://e.com/\", body: {\"{k}\": 1}}\n",
			[]string{"line 4: body keys cannot have placeholders"}},
		{"several at once", "tools:\n  - name: t\n    input_schema: {type: object, properties: {a: {}}}\n    command: {argv: [echo, \"{b}\", \"{c}\"]}\n  - name: u\n    http: {url: \"http://{a}/\"}\n",
			[]string{"line 4: unknown placeholder {b}", "line 4: unknown placeholder {c}", "line 6: unknown placeholder {a}"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := template.Parse(tc.yaml)
			var te *template.Error
			if !errors.As(err, &te) {
				t.Fatalf("got %v, want a *template.Error", err)
			}
			var got []string
			for _, p := range te.Problems {
				got = append(got, p.String())
			}
			for _, w := range tc.want {
				found := false
				for _, g := range got {
					found = found || strings.HasPrefix(g, w)
				}
				if !found {
					t.Errorf("no problem starting %q in:\n%s", w, strings.Join(got, "\n"))
				}
			}
		})
	}
}

// Literal braces: "{{" escapes one, and braces that do not make a name stay as they are.
func TestParseBraces(t *testing.T) {
	t.Parallel()
	tpl, err := template.Parse("tools:\n  - name: t\n    command: {argv: [jq, \"{{name} | {\\\"a b\\\": 1} | { x }\"]}\n")
	if err != nil {
		t.Fatal(err)
	}
	arg := tpl.Tools[0].Command.Argv[1]
	if !arg.Literal() {
		t.Fatalf("not literal: %+v", arg.Parts)
	}
	if got := arg.Parts[0].Lit; got != `{name} | {"a b": 1} | { x }` {
		t.Fatalf("got %q", got)
	}
}

// A missing key is one problem, not two.
func TestParseMissingKeys(t *testing.T) {
	t.Parallel()
	for yaml, want := range map[string]string{
		"tools:\n  - command: {argv: [x]}\n":                                                     "line 2: a tool needs a name",
		"tools:\n  - name: t\n    command: {argv: [x]}\nresponse_parsers:\n  p: {pattern: x}\n":  "line 5: response parser p needs a type: regex, json or table",
		"tools:\n  - name: t\n    command: {argv: [x]}\nresponse_parsers:\n  p: {type: regex}\n": "line 5: regex parser p needs a pattern",
		"tools:\n  - name: t\n    command: {argv: [x]}\nresponse_parsers:\n  p: {type: json}\n":  "line 5: json parser p needs a path",
	} {
		_, err := template.Parse(yaml)
		var te *template.Error
		if !errors.As(err, &te) || len(te.Problems) != 1 || !strings.HasPrefix(te.Problems[0].String(), want) {
			t.Errorf("%q: got %v, want one problem %q", yaml, err, want)
		}
	}
}

// Text bodies that are a placeholder, or that bracket plain text, are not JSON: they
// parse (a JSON-looking text body with placeholders is refused, TestParseProblems).
func TestPlainTextBodies(t *testing.T) {
	t.Parallel()
	for _, body := range []string{`"{message}"`, `"[{level}] {message}"`, `"Deploy {service}: {message}"`} {
		text := "tools:\n  - name: t\n    input_schema: {type: object, properties: {message: {type: string}, level: {type: string}, service: {type: string}}}\n" +
			"    http:\n      method: POST\n      url: \"https://example.com/\"\n      body: " + body + "\n"
		if _, err := template.Parse(text); err != nil {
			t.Errorf("body %s: %v", body, err)
		}
	}
}

// A template of thousands of properties and placeholders parses; an unknown placeholder
// names at most 20 of the properties and counts the rest, and past the problems said the
// rest are not formatted.
func TestParseManyPlaceholders(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("tools:\n  - name: t\n    input_schema: {type: object, properties: {z: {type: string}")
	for i := range 3000 {
		fmt.Fprintf(&b, ", p%04d: {type: string}", i)
	}
	b.WriteString("}}\n    command: {argv: [x, \"" + strings.Repeat("{z}", 2000) + strings.Repeat("{q}", 500) + "\"]}\n")
	_, err := template.Parse(b.String())
	if err == nil {
		t.Fatal("unknown placeholders were taken")
	}
	msg := err.Error()
	if !strings.Contains(msg, "unknown placeholder {q}") || !strings.Contains(msg, "and 2981 more") || len(msg) > 100*1024 {
		t.Fatalf("%d bytes: %.300s…, want the unknown placeholder named with 20 properties and the rest counted", len(msg), msg)
	}
}
