package template_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A regex parser with all: true over output of many small matches is refused past the
// output cap, as a JSON path is, rather than building an array four times the output.
func TestRegexAllBounded(t *testing.T) {
	t.Parallel()
	digits := strings.Repeat("7", 1<<20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/few" {
			_, _ = w.Write([]byte("a1 b2 c3"))
			return
		}
		if r.URL.Path == "/controls" {
			// Lines of one control character: each cell escaped as \u0001, six bytes.
			_, _ = w.Write([]byte(strings.Repeat("\x01\n", 1<<19)))
			return
		}
		_, _ = w.Write([]byte(digits))
	}))
	defer srv.Close()
	tpl := mustParse(t, fmt.Sprintf(`tools:
  - name: digits
    http: {url: "%[1]s/"}
    parse_response: each
  - name: triples
    http: {url: "%[1]s/"}
    parse_response: triples
  - name: few
    http: {url: "%[1]s/few"}
    parse_response: each
  - name: controls
    http: {url: "%[1]s/controls"}
    parse_response: cells
response_parsers:
  cells: {type: table, from_column: 0}
  each: {type: regex, pattern: "(\\d)", group: 1, all: true}
  triples: {type: regex, pattern: "(\\d{3})", group: 1, all: true}
`, srv.URL))
	res := call(t, tpl, "digits", nil)
	if !res.IsError || !strings.Contains(res.Text, "matches more than 1 MiB") {
		t.Fatalf("1 MiB of digits: got %d bytes %.200q", len(res.Text), res.Text)
	}
	// Fewer matches, but longer: the array passes the cap as it is built.
	res = call(t, tpl, "triples", nil)
	if !res.IsError || !strings.Contains(res.Text, "matches more than 1 MiB") {
		t.Fatalf("1 MiB of digits in threes: got %d bytes %.200q", len(res.Text), res.Text)
	}
	// A table's cells are bounded too: escaped, they made an array several times the output.
	if res := call(t, tpl, "controls", nil); !res.IsError || !strings.Contains(res.Text, "more than 1 MiB of cells") {
		t.Fatalf("a column of control characters: got %d bytes %.200q", len(res.Text), res.Text)
	}
	if res := call(t, tpl, "few", nil); res.IsError || res.Text != `["1","2","3"]` {
		t.Fatalf("few: got %q", res.Text)
	}
}
