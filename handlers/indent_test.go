package handlers

import (
	"encoding/json"
	"strings"
	"testing"
)

// JSON nested deep enough that indenting it would multiply it (two spaces a level on
// every line) is shown as it came; ordinary JSON is indented with sorted keys.
func TestIndentJSONBounded(t *testing.T) {
	t.Parallel()
	deep := `{"a":` + strings.Repeat("[", 9_998) + strings.Repeat("]", 9_998) + `}`
	if got := indentJSON(json.RawMessage(deep)); len(got) != len(deep) {
		t.Errorf("20 KB nested 9,998 deep: %d bytes, want it as it came (%d)", len(got), len(deep))
	}
	wide := "[" + strings.Repeat(`[[[[[[[[[[1]]]]]]]]]],`, 50_000) + "1]"
	if got := indentJSON(json.RawMessage(wide)); len(got) > maxIndented {
		t.Errorf("50,000 nested arrays: %d bytes indented, over %d", len(got), maxIndented)
	}
	if got := indentJSON(json.RawMessage(`{"b":1,"a":[true]}`)); got != "{\n  \"a\": [\n    true\n  ],\n  \"b\": 1\n}" {
		t.Errorf("an ordinary object: %q", got)
	}
	if got := indentJSON(json.RawMessage(`{"s":"[[[[\"]]"}`)); !strings.Contains(got, "\n  \"s\"") {
		t.Errorf("brackets inside a string count for nothing: %q", got)
	}
}
