package form

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// Text reused through $ref is written once per field: a 176 KB schema of 1,500
// properties referring to one definition with a 100 KB description and 5,000
// choices would make a page of hundreds of megabytes. Past the byte budget the
// arguments are edited as JSON.
func TestFormByteBudget(t *testing.T) {
	enum := make([]any, 5000)
	for i := range enum {
		enum[i] = fmt.Sprintf("v%d", i)
	}
	props := map[string]any{}
	for i := range 1500 {
		props[fmt.Sprintf("p%d", i)] = map[string]any{"$ref": "#/$defs/E"}
	}
	s, _ := json.Marshal(map[string]any{"type": "object",
		"$defs":      map[string]any{"E": map[string]any{"type": "string", "description": strings.Repeat("d", 100<<10), "enum": enum}},
		"properties": props})
	m := Build(s, nil)
	if !m.JSONOnly || !strings.Contains(m.Root.Hint, "too large") {
		t.Fatalf("1,500 fields of 100 KB help and 5,000 choices each: got JSON only %v, hint %q; want JSON only, saying the form would be too large", m.JSONOnly, m.Root.Hint)
	}
	// With values too: Decode reads a submission by the schema alone.
	if m := Build(s, json.RawMessage(`{"p0":"v1"}`)); !m.JSONOnly || !strings.Contains(m.Root.Value, `"v1"`) {
		t.Fatalf("with values: got JSON only %v, value %q; want the arguments as JSON", m.JSONOnly, m.Root.Value)
	}

	// An ordinary enum is still a select.
	small, _ := json.Marshal(map[string]any{"type": "object", "properties": map[string]any{
		"e": map[string]any{"type": "string", "description": "pick one", "enum": enum[:100]}}})
	m = Build(small, nil)
	if m.JSONOnly || len(m.Root.Fields) != 1 || m.Root.Fields[0].Kind != "enum" || len(m.Root.Fields[0].Enum) != 100 {
		t.Fatalf("a 100-value enum: got %+v; want a form with one select of 100 choices", m)
	}
}

// An enum of more choices than MaxChoices is not a select of them all: of
// strings it is a text field, of other values a JSON editor.
func TestLongEnumNotSelect(t *testing.T) {
	strs, nums := make([]any, MaxChoices+1), make([]any, MaxChoices+1)
	for i := range strs {
		strs[i], nums[i] = fmt.Sprintf("v%d", i), i
	}
	s, _ := json.Marshal(map[string]any{"type": "object", "properties": map[string]any{
		"s": map[string]any{"enum": strs}, "n": map[string]any{"enum": nums}}})
	m := Build(s, json.RawMessage(`{"s":"v7","n":7}`))
	if m.JSONOnly {
		t.Fatalf("long enums: JSON only (%s)", m.Root.Hint)
	}
	got := map[string]Field{}
	for _, f := range m.Root.Fields {
		got[f.Name] = f
	}
	if f := got["s"]; f.Kind != "string" || f.Value != "v7" || len(f.Enum) != 0 || !strings.Contains(f.Hint, "choices") {
		t.Fatalf("a string enum of %d choices: got kind %q value %q, %d choices, hint %q; want a text field holding v7", MaxChoices+1, f.Kind, f.Value, len(f.Enum), f.Hint)
	}
	if f := got["n"]; f.Kind != "json" || len(f.Enum) != 0 {
		t.Fatalf("a number enum of %d choices: got kind %q, %d choices; want a JSON editor", MaxChoices+1, f.Kind, len(f.Enum))
	}
	// The text field decodes as the string typed.
	out, errs := Decode(s, map[string][]string{"arg/s": {"v9"}})
	if errs != nil || !strings.Contains(string(out), `"s":"v9"`) {
		t.Fatalf("decoding the text field: got %s, %v", out, errs)
	}
}
