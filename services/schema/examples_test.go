package schema

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// A schema may ask for more than any document can show (anyone who may open the Schema
// tab reads its example): the example stays small, says that it is shortened, and the
// Markdown says so too, since a shortened example no longer passes the schema.
func TestExampleArgumentsBounded(t *testing.T) {
	t.Parallel()
	longName := strings.Repeat("n", 100_000)
	// One definition with a 100,000-character required property, referred to from every
	// one of 3,000 properties: MaxParams values, each carrying the long name.
	props := map[string]any{}
	var required []string
	for i := range 3000 {
		p := fmt.Sprintf("p%d", i)
		props[p] = map[string]any{"$ref": "#/$defs/d"}
		required = append(required, p)
	}
	manyNames, _ := json.Marshal(map[string]any{"type": "object", "properties": props, "required": required,
		"$defs": map[string]any{"d": map[string]any{"type": "object", "required": []string{longName},
			"properties": map[string]any{longName: map[string]any{"type": "array", "minItems": 100}}}}})
	for _, tc := range []struct {
		name   string
		schema string
	}{
		{"huge minItems", `{"type":"object","properties":{"a":{"type":"array","minItems":2147483647}},"required":["a"]}`},
		{"huge minItems of objects", `{"type":"object","properties":{"a":{"type":"array","minItems":2147483647,
			"items":{"type":"object","properties":{"b":{"type":"string"}},"required":["b"]}}},"required":["a"]}`},
		{"huge minLength", `{"type":"object","properties":{"s":{"type":"string","minLength":2147483647}},"required":["s"]}`},
		{"long names, many times", string(manyNames)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			raw := json.RawMessage(tc.schema)
			args, shortened := ExampleArgumentsShortened(raw)
			b, err := json.Marshal(args)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) > 200_000 {
				t.Fatalf("example is %d bytes, want a short one", len(b))
			}
			if !shortened {
				t.Error("got shortened false, want true")
			}
			md := Markdown(Tool{Name: "t", Description: "A tool for the test.", InputSchema: raw}, "")
			if len(md) > 3<<20 {
				t.Fatalf("markdown is %d bytes, want a short one", len(md))
			}
			if !strings.Contains(md, "This example is shortened") {
				t.Error("markdown does not say the example is shortened")
			}
		})
	}
	// Bounds a document can show are met in full, and nothing is said.
	raw := json.RawMessage(`{"type":"object","properties":{
		"a":{"type":"array","minItems":12},"s":{"type":"string","minLength":200}},"required":["a","s"]}`)
	args, shortened := ExampleArgumentsShortened(raw)
	if shortened {
		t.Error("modest bounds: got shortened true, want false")
	}
	s, err := CompileSchema(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := ValidateArguments(s, args); err != nil {
		t.Errorf("modest bounds: example does not validate: %v", err)
	}
	if md := Markdown(Tool{Name: "t", Description: "A tool for the test.", InputSchema: raw}, ""); strings.Contains(md, "shortened") {
		t.Error("modest bounds: markdown says the example is shortened")
	}
}
