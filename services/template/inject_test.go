package template_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/toolwarden/toolwarden/services/template"
)

// hostile are argument values that would break out of their place if a template
// substituted them as text into a shell line, a URL or a JSON document.
var hostile = []string{
	"plain",
	"a; touch /tmp/tw-pwned",
	"a | cat /etc/passwd",
	"a && id",
	"a & id",
	"$(id)",
	"`id`",
	"${HOME}",
	"line1\nline2",
	"a'b\"c",
	"\\",
	"*",
	"~",
	"a b  c",
	"%s%n",
	"../../etc/passwd",
	"a/b",
	"%2F",
	"%2e%2e",
	"?admin=1",
	"#frag",
	"@evil.example",
	"//evil.example/x",
	"evil.example:8080",
	":80",
	"&x=1",
	"=",
	"+",
	`"},"admin":true,"x":{"`,
	"\u00e9\u4e2d\U0001F600",
	"",
}

// pathRefused are the hostile values a path placeholder refuses: split at '/' or '\',
// as they are or percent-decoded, they have a ".." or an empty piece.
var pathRefused = map[string]bool{"../../etc/passwd": true, "\\": true, "%2F": true, "%2e%2e": true, "//evil.example/x": true}

func mustParse(t *testing.T, yaml string) *template.Template {
	t.Helper()
	tpl, err := template.Parse(yaml)
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, yaml)
	}
	return tpl
}

func call(t *testing.T, tpl *template.Template, tool string, values map[string]any) template.Result {
	t.Helper()
	res, ok := template.Call(context.Background(), tpl, template.Options{Env: []string{"PATH=/usr/bin:/bin"}}, tool, values)
	if !ok {
		t.Fatalf("no tool %q", tool)
	}
	return res
}

// Arguments of commands are data: printf prints each exactly, cat gets stdin exactly,
// and nothing a shell would interpret is interpreted.
func TestCommandArgumentsStayData(t *testing.T) {
	t.Parallel()
	tpl := mustParse(t, `tools:
  - name: echo
    input_schema: {type: object, properties: {v: {type: string}}}
    command: {argv: [printf, "%s\n", "{v}"]}
  - name: echo_inside
    input_schema: {type: object, properties: {v: {type: string}}}
    command: {argv: [printf, "%s\n", "x={v}"]}
  - name: stdin
    input_schema: {type: object, properties: {v: {type: string}}}
    command: {argv: [cat], stdin: "{v}"}
`)
	for _, v := range hostile {
		t.Run(fmt.Sprintf("%q", v), func(t *testing.T) {
			t.Parallel()
			if res := call(t, tpl, "echo", map[string]any{"v": v}); res.IsError || res.Text != v+"\n" {
				t.Errorf("printf: got %+v, want %q", res, v+"\n")
			}
			if res := call(t, tpl, "echo_inside", map[string]any{"v": v}); res.IsError || res.Text != "x="+v+"\n" {
				t.Errorf("printf inside: got %+v, want %q", res, "x="+v+"\n")
			}
			if res := call(t, tpl, "stdin", map[string]any{"v": v}); res.IsError || res.Text != v {
				t.Errorf("cat: got %+v, want %q", res, v)
			}
		})
	}
}

// A value starting with '-' is refused where it would be read as an option, and goes
// through after a literal "--" or inside an option the template wrote itself.
func TestCommandLeadingDash(t *testing.T) {
	t.Parallel()
	tpl := mustParse(t, `tools:
  - name: bare
    input_schema: {type: object, properties: {v: {type: string}, w: {type: string}}}
    command: {argv: [printf, "%s\n", "{v}"]}
  - name: glued
    input_schema: {type: object, properties: {v: {type: string}, w: {type: string}}}
    command: {argv: [printf, "%s\n", "{w}{v}"]}
  - name: after_dashes
    input_schema: {type: object, properties: {v: {type: string}}}
    command: {argv: [printf, "%s\n", "--", "{v}"]}
  - name: in_option
    input_schema: {type: object, properties: {v: {type: string}}}
    command: {argv: [printf, "%s\n", "--name={v}"]}
  - name: number
    input_schema: {type: object, properties: {n: {type: integer}}}
    command: {argv: [printf, "%s\n", "{n}"]}
`)
	for _, v := range []string{"-rf", "--help", "-", "--"} {
		if res := call(t, tpl, "bare", map[string]any{"v": v}); !res.IsError || !strings.Contains(res.Text, `argument "v" starts with '-'`) {
			t.Errorf("bare %q: got %+v, want a refusal", v, res)
		}
		if res := call(t, tpl, "glued", map[string]any{"v": v, "w": ""}); !res.IsError || !strings.Contains(res.Text, "starts with '-'") {
			t.Errorf("glued %q: got %+v, want a refusal", v, res)
		}
		if res := call(t, tpl, "after_dashes", map[string]any{"v": v}); res.IsError || res.Text != "--\n"+v+"\n" {
			t.Errorf("after --, %q: got %+v", v, res)
		}
		if res := call(t, tpl, "in_option", map[string]any{"v": v}); res.IsError || res.Text != "--name="+v+"\n" {
			t.Errorf("inside an option, %q: got %+v", v, res)
		}
	}
	if res := call(t, tpl, "number", map[string]any{"n": json.Number("-5")}); !res.IsError {
		t.Errorf("a negative number in option position: got %+v, want a refusal", res)
	}
	if res := call(t, tpl, "bare", map[string]any{"v": "a\x00b"}); !res.IsError || !strings.Contains(res.Text, "NUL") {
		t.Errorf("NUL: got %+v", res)
	}
}

// seen is one request as the test server saw it.
type seen struct {
	Method, Host, Path, EscapedPath, RawQuery string
	Query                                     map[string][]string
	Header                                    http.Header
	Body                                      string
}

type recorder struct {
	mu   sync.Mutex
	reqs []seen
}

func (rc *recorder) handler(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.reqs = append(rc.reqs, seen{Method: r.Method, Host: r.Host, Path: r.URL.Path, EscapedPath: r.URL.EscapedPath(),
		RawQuery: r.URL.RawQuery, Query: r.URL.Query(), Header: r.Header.Clone(), Body: string(b)})
	rc.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"ok":true}`))
}

func (rc *recorder) take(t *testing.T) seen {
	t.Helper()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.reqs) != 1 {
		t.Fatalf("the server saw %d requests, want 1", len(rc.reqs))
	}
	s := rc.reqs[0]
	rc.reqs = nil
	return s
}

func (rc *recorder) none(t *testing.T) {
	t.Helper()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.reqs) != 0 {
		t.Fatalf("the server saw %d requests, want none", len(rc.reqs))
	}
}

// URL placeholders stay inside their path segment or query value; they never change
// the scheme, host or port, add a query parameter, a fragment or a path segment.
// Headers cannot get line breaks; JSON bodies get JSON values; forms get form values.
func TestHTTPArgumentsStayData(t *testing.T) {
	t.Parallel()
	rc := &recorder{}
	srv := httptest.NewServer(http.HandlerFunc(rc.handler))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	tpl := mustParse(t, fmt.Sprintf(`tools:
  - name: path
    input_schema: {type: object, properties: {v: {type: string}}}
    http: {url: "%[1]s/items/{v}/info"}
  - name: query
    input_schema: {type: object, properties: {v: {type: string}}}
    http: {url: "%[1]s/search?q={v}&limit=5"}
  - name: header
    input_schema: {type: object, properties: {v: {type: string}}}
    http: {url: "%[1]s/h", headers: {X-Value: "pre {v}"}}
  - name: json
    input_schema: {type: object, properties: {v: {type: string}, n: {type: integer}, o: {type: object}}}
    http:
      method: POST
      url: "%[1]s/j"
      body: {name: "{v}", greeting: "hello {v}", n: "{n}", o: "{o}", fixed: [1, true, null]}
  - name: form
    input_schema: {type: object, properties: {v: {type: string}}}
    http: {method: POST, url: "%[1]s/f", form: {a: "{v}", b: fixed}}
  - name: text
    input_schema: {type: object, properties: {v: {type: string}}}
    http: {method: PUT, url: "%[1]s/t", body: "value: {v}"}
`, srv.URL))
	for _, v := range hostile {
		t.Run(fmt.Sprintf("%q", v), func(t *testing.T) {
			// Not parallel: the subtests share the recorder.
			res := call(t, tpl, "path", map[string]any{"v": v})
			if v == "" || pathRefused[v] {
				// An empty segment is refused (below), and so is a value that could
				// climb out of the path once decoded (TestPathValueCannotClimbOut).
				if !res.IsError {
					t.Errorf("path %q: got %+v, want a refusal", v, res)
				}
				rc.none(t)
			} else {
				s := rc.take(t)
				if res.IsError || s.Host != host || s.Path != "/items/"+v+"/info" || s.RawQuery != "" ||
					strings.Count(s.EscapedPath, "/") != 3 {
					t.Errorf("path %q: got %+v; server saw host %q path %q (escaped %q) query %q", v, res, s.Host, s.Path, s.EscapedPath, s.RawQuery)
				}
			}

			res = call(t, tpl, "query", map[string]any{"v": v})
			s := rc.take(t)
			if res.IsError || s.Host != host || s.Path != "/search" || !slices.Equal(slices.Sorted(maps.Keys(s.Query)), []string{"limit", "q"}) ||
				len(s.Query["q"]) != 1 || s.Query["q"][0] != v || s.Query["limit"][0] != "5" {
				t.Errorf("query %q: got %+v; server saw path %q query %q", v, res, s.Path, s.RawQuery)
			}

			res = call(t, tpl, "header", map[string]any{"v": v})
			if strings.ContainsAny(v, "\r\n") {
				if !res.IsError || !strings.Contains(res.Text, "cannot go into header X-Value") {
					t.Errorf("header %q: got %+v, want a refusal", v, res)
				}
				rc.none(t)
			} else if s := rc.take(t); res.IsError || s.Header.Get("X-Value") != strings.TrimRight("pre "+v, " ") || len(s.Header.Values("X-Value")) != 1 {
				t.Errorf("header %q: got %+v, server saw %q", v, res, s.Header.Values("X-Value"))
			}

			res = call(t, tpl, "json", map[string]any{"v": v, "n": json.Number("42"), "o": map[string]any{"k": v}})
			s = rc.take(t)
			var body map[string]any
			if err := json.Unmarshal([]byte(s.Body), &body); err != nil || res.IsError {
				t.Fatalf("json %q: %v; body %s", v, err, s.Body)
			}
			if !slices.Equal(slices.Sorted(maps.Keys(body)), []string{"fixed", "greeting", "n", "name", "o"}) ||
				body["name"] != v || body["greeting"] != "hello "+v || body["n"] != float64(42) ||
				body["o"].(map[string]any)["k"] != v || s.Header.Get("Content-Type") != "application/json" {
				t.Errorf("json %q: server saw %s", v, s.Body)
			}

			res = call(t, tpl, "form", map[string]any{"v": v})
			s = rc.take(t)
			if res.IsError || s.Header.Get("Content-Type") != "application/x-www-form-urlencoded" {
				t.Errorf("form %q: got %+v", v, res)
			}
			r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(s.Body))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if err := r.ParseForm(); err != nil || len(r.PostForm) != 2 || r.PostForm.Get("a") != v || r.PostForm.Get("b") != "fixed" {
				t.Errorf("form %q: server saw %q", v, s.Body)
			}

			res = call(t, tpl, "text", map[string]any{"v": v})
			if s := rc.take(t); res.IsError || s.Method != http.MethodPut || s.Body != "value: "+v {
				t.Errorf("text %q: got %+v, server saw %q", v, res, s.Body)
			}
		})
	}
	// A value may not make a whole path segment "." or "..": servers would climb out
	// of the path the template names.
	for _, v := range []string{".", ".."} {
		if res := call(t, tpl, "path", map[string]any{"v": v}); !res.IsError || !strings.Contains(res.Text, "climbs out of the path") {
			t.Errorf("path %q: got %+v, want a refusal", v, res)
		}
		rc.none(t)
	}
	// Nor empty: /users//profile is /users/profile to many servers.
	if res := call(t, tpl, "path", map[string]any{"v": ""}); !res.IsError || !strings.Contains(res.Text, "is empty") {
		t.Errorf("path \"\": got %+v, want a refusal", res)
	}
	rc.none(t)
}

// A server of the template's origin cannot send its requests elsewhere by redirecting.
func TestHTTPRedirectStaysAtOrigin(t *testing.T) {
	t.Parallel()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("elsewhere")) }))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, other.URL+"/x", http.StatusFound)
		case "/here":
			http.Redirect(w, r, "/final", http.StatusFound)
		default:
			_, _ = w.Write([]byte("final"))
		}
	}))
	defer srv.Close()
	tpl := mustParse(t, fmt.Sprintf("tools:\n  - name: away\n    http: {url: \"%[1]s/away\"}\n  - name: here\n    http: {url: \"%[1]s/here\"}\n", srv.URL))
	if res := call(t, tpl, "away", nil); !res.IsError || !strings.Contains(res.Text, "refused a redirect") {
		t.Errorf("away: got %+v", res)
	}
	if res := call(t, tpl, "here", nil); res.IsError || res.Text != "final" {
		t.Errorf("here: got %+v", res)
	}
}

// Perl with -n, -p, -a or -F (or code reading <>) opens its file operands with
// two-argument open, where "cmd|" runs cmd: a placeholder there is refused when the
// template is saved, wherever perl is named, and should one get past (a template read
// without the code checks), its value is refused at call time before perl runs.
func TestPerlTwoArgOpenRefused(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("perl"); err != nil {
		t.Skip("no perl")
	}
	marker := filepath.Join(t.TempDir(), "pwned")
	for command, want := range map[string]string{
		`{argv: [perl, -ne, 'print if /x/', "{p}"]}`:                         "argv[3] is a file that perl opens with two-argument open",
		`{argv: [perl, -pe, 's/x/y/', --, "{p}"]}`:                           "argv[4] is a file that perl opens",
		`{argv: [perl, -lane, 'print $F[0]', "{p}"]}`:                        "argv[3] is a file that perl opens",
		`{argv: [perl, "-F:", -e, 'print $F[0]', "{p}"]}`:                    "argv[4] is a file that perl opens",
		`{argv: [perl, -e, 'while (<>) { print }', "{p}"]}`:                  "its code reads them with <> or the ARGV handle",
		`{argv: [perl, -n, script.pl, "{p}"]}`:                               "argv[3] is a file that perl opens",
		`{argv: [env, LC_ALL=C, perl, -ne, 'print', "{p}"]}`:                 "argv[5] is a file that perl opens",
		`{argv: [kubectl, exec, pod, --, perl, -ne, 'print if /x/', "{p}"]}`: "argv[7] is a file that perl opens",
		`{argv: [xargs, perl, -ne, 'print', --], stdin: "{p}"}`:              "stdin goes to xargs, which adds its words after the items of perl, which opens them as files",
		// -l takes octal digits only: the n and e after it are still options.
		`{argv: [kubectl, exec, pod, --, perl, -lne, "print if /{p}/"]}`: "argv[6] is Perl code",
		`{argv: [kubectl, exec, pod, --, ruby, -lne, "print if /{p}/"]}`: "argv[6] is Ruby code",
	} {
		_, err := template.Parse(commandTool(command))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", command, err, want)
		} else if strings.Contains(want, "file that perl opens") && !strings.Contains(err.Error(), `open my $f, "<", $ARGV[0]`) {
			t.Errorf("%s: %v does not show the three-argument open", command, err)
		}
	}

	// The backstop: the reviewer's template, read without the code checks, is refused
	// each value that two-argument open reads as a command or a mode.
	tpl, err := template.ParseWith(commandTool(`{argv: [perl, -ne, 'print', --, "{p}"]}`), template.ParseOptions{SkipCodeChecks: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"touch " + marker + "|", "touch " + marker + " | ", "|touch " + marker, " |touch " + marker,
		">" + marker, "+<" + marker, "<" + marker, "-", " /etc/hostname"} {
		res := call(t, tpl, "t", map[string]any{"p": v})
		if !res.IsError || !strings.Contains(res.Text, `argument "p"`) {
			t.Errorf("%q: got %+v, want a refusal", v, res)
		}
		noMarker(t, marker)
	}
	if res := call(t, tpl, "t", map[string]any{"p": "/etc/hostname"}); res.IsError {
		t.Errorf("a plain file name: got %+v", res)
	}

	// The safe forms keep the value a file name (perl fails to open it, or warns and
	// goes on): three-argument open, <<>>, and -i (perl opens the files it edits as named).
	for _, command := range []string{
		`{argv: [perl, -e, 'open my $f, "<", $ARGV[0] or die "$ARGV[0]: $!\n"; print while <$f>', "{p}"]}`,
		`{argv: [perl, -e, 'print while <<>>', "{p}"]}`,
		`{argv: [perl, -i, -pe, 's/x/y/', --, "{p}"]}`,
	} {
		tpl := mustParse(t, commandTool(command))
		res := call(t, tpl, "t", map[string]any{"p": "touch " + marker + "|"})
		noMarker(t, marker)
		if res.Text != "" && !res.IsError {
			t.Errorf("%s: got %+v, want nothing read", command, res)
		}
	}
	// Data on stdin is fine.
	tplStdin := mustParse(t, commandTool(`{argv: [perl, -ne, 'print if /a/'], stdin: "{p}"}`))
	if res := call(t, tplStdin, "t", map[string]any{"p": "a|\nb\n"}); res.IsError || res.Text != "a|\n" {
		t.Errorf("stdin: got %+v", res)
	}

	// A script's code cannot be seen when the template is saved, so a placeholder after
	// it is accepted; perl's <> in the script would open "touch x|" as a command, so each
	// operand after the script (or after -e code, which may call two-argument open
	// itself) is refused a mode or a command at the call, wherever perl is named.
	dir := t.TempDir()
	script := filepath.Join(dir, "count.pl")
	if err := os.WriteFile(script, []byte("while (<>) { print }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data.txt")
	if err := os.WriteFile(data, []byte("one\ntwo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, command := range []string{
		fmt.Sprintf(`{argv: [perl, %q, "{p}"]}`, script),
		fmt.Sprintf(`{argv: [perl, -w, --, %q, "{p}"]}`, script),
		fmt.Sprintf(`{argv: [env, LC_ALL=C, perl, %q, "{p}"]}`, script),
		fmt.Sprintf(`{argv: [timeout, "5", perl, %q, %q, "{p}"]}`, script, data),
		// perl named after the program: the walk checks it wherever it is named.
		fmt.Sprintf(`{argv: [sh, -c, 'exec "$@"', sh, perl, %q, "{p}"]}`, script),
		`{argv: [perl, -e, 'open F, $ARGV[0] or die; print <F>', "{p}"]}`,
	} {
		tpl := mustParse(t, commandTool(command))
		for _, v := range []string{"touch " + marker + "|", "|touch " + marker, " " + data, "-"} {
			res := call(t, tpl, "t", map[string]any{"p": v})
			if !res.IsError || !strings.Contains(res.Text, `argument "p"`) {
				t.Errorf("%s with %q: got %+v, want a refusal", command, v, res)
			}
			noMarker(t, marker)
		}
		want := "one\ntwo\n"
		if strings.Contains(command, "data.txt") {
			want += want
		}
		if res := call(t, tpl, "t", map[string]any{"p": data}); res.IsError || res.Text != want {
			t.Errorf("%s with a plain file name: got %+v, want %q", command, res, want)
		}
	}
}
