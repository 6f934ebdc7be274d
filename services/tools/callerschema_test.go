package tools_test

import (
	"encoding/json"
	"testing"

	"github.com/toolwarden/toolwarden/services/tools"
)

// CallerSchema takes the fixed parameters out of the top-level properties and required
// list, those of inline allOf parts too, and leaves anything else as it was: a schema
// that is not an object, one without properties or required, and what a $ref says.
func TestCallerSchema(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"fixed and required", `{"type":"object","properties":{"a":{"type":"string"},"b":{}},"required":["a","b"]}`,
			`{"properties":{"b":{}},"required":["b"],"type":"object"}`},
		{"no required", `{"type":"object","properties":{"a":{},"b":{}}}`, `{"properties":{"b":{}},"type":"object"}`},
		{"no properties, nothing left required", `{"type":"object","required":["a"]}`, `{"type":"object"}`},
		{"inline allOf parts too, $ref left alone", `{"allOf":[{"required":["a","c"],"properties":{"a":{},"c":{}}},{"$ref":"#/y"}],"$ref":"#/x","properties":{"b":{}}}`,
			`{"$ref":"#/x","allOf":[{"properties":{"c":{}},"required":["c"]},{"$ref":"#/y"}],"properties":{"b":{}}}`},
		{"not an object schema", `true`, `true`},
		{"not JSON", `{`, `{`},
	} {
		got := tools.CallerSchema(json.RawMessage(tc.in), []string{"a"})
		if string(got) != tc.want {
			t.Errorf("%s: got %s, want %s", tc.name, got, tc.want)
		}
	}
	if got := tools.CallerSchema(json.RawMessage(`{"properties":{"a":{}}}`), nil); string(got) != `{"properties":{"a":{}}}` {
		t.Errorf("nothing fixed: got %s, want the schema as it was", got)
	}
}
