package template_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/template"
)

func TestParsers(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/weather":
			_, _ = w.Write([]byte(`{"current": {"temp": 21.5, "sky": "clear"}, "hours": [{"t": 1}, {"t": 2}]}`))
		case "/missing":
			http.Error(w, "no such city", http.StatusNotFound)
		default:
			_, _ = w.Write([]byte("not json"))
		}
	}))
	defer srv.Close()
	tpl := mustParse(t, fmt.Sprintf(`tools:
  - name: count
    input_schema: {type: object, properties: {text: {type: string}}}
    command: {argv: [wc, -w], stdin: "{text}"}
    parse_response: count
  - name: words
    input_schema: {type: object, properties: {text: {type: string}}}
    command: {argv: [cat], stdin: "{text}"}
    parse_response: all_words
  - name: temp
    http: {url: "%[1]s/weather"}
    parse_response: temp
  - name: sky
    http: {url: "%[1]s/weather"}
    parse_response: sky
  - name: hours
    http: {url: "%[1]s/weather"}
    parse_response: hours
  - name: not_json
    http: {url: "%[1]s/other"}
    parse_response: temp
  - name: missing
    http: {url: "%[1]s/missing"}
    parse_response: temp
  - name: dbs
    command:
      argv:
        - printf
        - |
          | Database | Table    |
          |----------|----------|
          | lsl_demo | ping     |
          | lsl_demo | sensor   |
          | test_db  | data     |
    parse_response: dbs
  - name: tables
    command:
      argv:
        - printf
        - |
          | Database | Table    |
          |----------|----------|
          | lsl_demo | ping     |
          | test_db  | ping     |
          | test_db  | data     |
    parse_response: edgelake_tables
  - name: spaced
    command: {argv: [printf, "NAME SIZE\nalpha 1\nbeta 2\n"]}
    parse_response: second
response_parsers:
  count:     {type: regex, pattern: "(\\d+)", group: 1}
  all_words: {type: regex, pattern: "[a-z]+", all: true}
  temp:      {type: json, path: "$.current.temp"}
  sky:       {type: json, path: "$.current.sky"}
  hours:     {type: json, path: "$.hours[*].t"}
  dbs:       {type: blockchain_table, from_column: 0, unique: true}
  second:    {type: table, from_column: 1}
  edgelake_tables: {type: blockchain_table, extract: unique_tables}
`, srv.URL))
	cases := []struct {
		tool    string
		args    map[string]any
		want    string
		isError bool
	}{
		{"count", map[string]any{"text": "one two three"}, "3", false},
		{"count", map[string]any{"text": ""}, "0", false},
		{"words", map[string]any{"text": "Hi there, you 2"}, `["i","there","you"]`, false},
		{"words", map[string]any{"text": "123"}, "response parser all_words: pattern [a-z]+ did not match", true},
		{"temp", nil, "21.5", false},
		{"sky", nil, "clear", false},
		{"hours", nil, "[1,2]", false},
		{"not_json", nil, "response parser temp: the output is not JSON", true},
		{"missing", nil, "GET " + srv.URL + "/missing answered 404 Not Found\nno such city", true},
		{"dbs", nil, `["lsl_demo","test_db"]`, false},
		{"spaced", nil, `["1","2"]`, false},
		{"tables", nil, `["ping","data"]`, false},
	}
	for _, tc := range cases {
		res := call(t, tpl, tc.tool, tc.args)
		if res.IsError != tc.isError || !strings.HasPrefix(res.Text, tc.want) {
			t.Errorf("%s %v: got %+v, want %q (error %v)", tc.tool, tc.args, res, tc.want, tc.isError)
		}
	}
}

// A command that times out is killed with everything it started: its process group.
func TestCommandTimeoutKillsGroup(t *testing.T) {
	t.Parallel()
	tpl := mustParse(t, `tools:
  - name: spawn
    command: {argv: [sh, -c, "sleep 60 & echo $!; wait"], timeout: 300ms}
`)
	start := time.Now()
	res := call(t, tpl, "spawn", nil)
	if !res.IsError || !strings.Contains(res.Text, "sh timed out after 300ms; it and everything it started were stopped") {
		t.Fatalf("got %+v", res)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the call took %s", d)
	}
	_, rest, _ := strings.Cut(res.Text, "standard output:\n")
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(rest, "\n", 2)[0]))
	if err != nil {
		t.Fatalf("no child pid in %q", res.Text)
	}
	testkit.WaitFor(t, 5*time.Second, func() bool { return gone(pid) }, fmt.Sprintf("the child sleep (pid %d) outlived the timeout", pid))
}

// A command that exits leaves nothing behind in its group either.
func TestCommandExitKillsLeftovers(t *testing.T) {
	t.Parallel()
	tpl := mustParse(t, `tools:
  - name: leave
    command: {argv: [sh, -c, "sleep 60 >/dev/null 2>&1 & echo $!"]}
`)
	res := call(t, tpl, "leave", nil)
	pid, err := strconv.Atoi(strings.TrimSpace(res.Text))
	if err != nil || res.IsError {
		t.Fatalf("got %+v", res)
	}
	testkit.WaitFor(t, 5*time.Second, func() bool { return gone(pid) }, fmt.Sprintf("the background sleep (pid %d) outlived its command", pid))
}

// gone reports whether pid no longer runs: no such process, or a zombie waiting for a
// parent that is not this test to reap it.
func gone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && len(s) > i+2 && (s[i+2] == 'Z' || s[i+2] == 'X')
}

// Output over the cap is cut, and the result says so.
func TestOutputCap(t *testing.T) {
	t.Parallel()
	tpl := mustParse(t, `tools:
  - name: lots
    command: {argv: [seq, "1", "400000"]}
`)
	res := call(t, tpl, "lots", nil)
	const note = "\n[output truncated: only the first 1 MiB were kept]"
	if res.IsError || !strings.HasPrefix(res.Text, "1\n2\n3\n") || !strings.HasSuffix(res.Text, note) || len(res.Text) != 1<<20+len(note) {
		t.Fatalf("got %d bytes, error %v, ending %q", len(res.Text), res.IsError, res.Text[max(0, len(res.Text)-80):])
	}
	small, _ := template.Call(context.Background(), tpl, template.Options{MaxOutput: 10, Env: []string{"PATH=/usr/bin:/bin"}}, "lots", nil)
	if small.Text != "1\n2\n3\n4\n5\n\n[output truncated: only the first 10 bytes were kept]" {
		t.Fatalf("got %q", small.Text)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(strings.Repeat("x", 5000)))
	}))
	defer srv.Close()
	htpl := mustParse(t, fmt.Sprintf("tools:\n  - name: big\n    http: {url: \"%s/\"}\n", srv.URL))
	res, _ = template.Call(context.Background(), htpl, template.Options{MaxOutput: 100}, "big", nil)
	if res.IsError || res.Text != strings.Repeat("x", 100)+"\n[output truncated: only the first 100 bytes were kept]" {
		t.Fatalf("http: got %q", res.Text)
	}

	// A body without end is read only up to the cap: the server could write little more
	// before the call hung up (the old reading went on until the timeout).
	var sent atomic.Int64
	endless := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := []byte(strings.Repeat("y", 64<<10))
		for {
			n, err := w.Write(chunk)
			sent.Add(int64(n))
			if err != nil || sent.Load() > 1<<30 {
				return
			}
		}
	}))
	defer endless.Close()
	etpl := mustParse(t, fmt.Sprintf("tools:\n  - name: endless\n    http: {url: \"%s/\"}\n", endless.URL))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, _ = template.Call(ctx, etpl, template.Options{MaxOutput: 100}, "endless", nil)
	if res.IsError || !strings.HasSuffix(res.Text, "[output truncated: only the first 100 bytes were kept]") {
		t.Fatalf("endless: got %q", res.Text)
	}
	endless.CloseClientConnections()
	if n := sent.Load(); n > 64<<20 {
		t.Fatalf("the server sent %d bytes for a 100-byte answer", n)
	}

	// A descendant path over deep nesting selects overlapping subtrees: the parsed
	// result is refused past the cap rather than built (it would be gigabytes).
	deep := strings.Repeat(`{"name":"`+strings.Repeat("n", 100)+`","items":`, 3000) + "1" + strings.Repeat("}", 3000)
	nested := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(deep)) }))
	defer nested.Close()
	ntpl := mustParse(t, fmt.Sprintf("tools:\n  - name: deep\n    http: {url: \"%s/\"}\n    parse_response: items\nresponse_parsers:\n  items: {type: json, path: \"$..items\"}\n", nested.URL))
	if res := call(t, ntpl, "deep", nil); !res.IsError || !strings.Contains(res.Text, "selects more than 1 MiB") {
		t.Fatalf("deep: got %d bytes %.200q", len(res.Text), res.Text)
	}
}

// A failing command is an error result with what it printed; defaults of the input
// schema fill arguments left out.
func TestCommandFailureAndDefaults(t *testing.T) {
	t.Parallel()
	tpl := mustParse(t, `tools:
  - name: fail
    command: {argv: [sh, -c, "echo out; echo err >&2; exit 3"]}
  - name: defaults
    input_schema: {type: object, properties: {n: {type: integer, default: 100}, s: {type: string}}}
    command: {argv: [printf, "%s|%s\n", "{n}", "x{s}"]}
  - name: missing
    command: {argv: [/nonexistent/program]}
`)
	res := call(t, tpl, "fail", nil)
	if !res.IsError || !strings.Contains(res.Text, "exit status 3") || !strings.Contains(res.Text, "standard output:\nout") ||
		!strings.Contains(res.Text, "standard error:\nerr") {
		t.Fatalf("fail: got %+v", res)
	}
	if res := call(t, tpl, "defaults", nil); res.Text != "100|x\n" {
		t.Fatalf("defaults: got %+v", res)
	}
	if res := call(t, tpl, "defaults", map[string]any{"n": json.Number("7"), "s": "y"}); res.Text != "7|xy\n" {
		t.Fatalf("given: got %+v", res)
	}
	if res := call(t, tpl, "missing", nil); !res.IsError || !strings.Contains(res.Text, "could not start") {
		t.Fatalf("missing: got %+v", res)
	}
}

// The template as an MCP server: its tools are listed with their schemas and
// annotations, and a call runs.
func TestServer(t *testing.T) {
	t.Parallel()
	tpl := mustParse(t, example)
	ctx := context.Background()
	cs := connectTemplate(t, tpl, template.Options{Name: "tpl", Env: []string{"PATH=/usr/bin:/bin"}})
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*mcp.Tool{}
	for _, tool := range list.Tools {
		byName[tool.Name] = tool
	}
	if len(byName) != 3 || byName["weather"].Annotations == nil || !byName["weather"].Annotations.ReadOnlyHint ||
		byName["word_count"].Annotations != nil || byName["word_count"].Description != "Count the words in a text" {
		t.Fatalf("tools: %+v", list.Tools)
	}
	schema, _ := json.Marshal(byName["word_count"].InputSchema)
	if string(schema) != `{"properties":{"text":{"type":"string"}},"required":["text"],"type":"object"}` {
		t.Fatalf("schema: %s", schema)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "word_count", Arguments: map[string]any{"text": "a b c d"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || res.Content[0].(*mcp.TextContent).Text != "4" {
		t.Fatalf("call: %+v", res.Content[0])
	}
}

// An error names the template's path with its placeholders, never an argument's value
// (escaped, a secret would slip past the masker).
func TestErrorURLHidesArguments(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", http.StatusForbidden) }))
	defer srv.Close()
	tpl := mustParse(t, fmt.Sprintf("tools:\n  - name: get\n    input_schema: {type: object, properties: {key: {type: string}}}\n    http: {url: \"%s/k/{key}/data?v={key}\"}\n", srv.URL))
	res := call(t, tpl, "get", map[string]any{"key": "c2VjcmV0/a2V5+dmFsdWU="})
	if !res.IsError || !strings.Contains(res.Text, "/k/{key}/data answered 403") || strings.Contains(res.Text, "c2VjcmV0") {
		t.Fatalf("got %q", res.Text)
	}
}

// connectTemplate is a client session with tpl served as an MCP server, in memory, both
// closed when the test ends.
func connectTemplate(t *testing.T, tpl *template.Template, opts template.Options) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := template.NewServer(tpl, opts).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}
