package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// A schema refused as too complex is named at a plain JSON pointer, as every other
// finding is, not at the percent-encoded fragment of the compiler's URL
// ("/properties/my%20key/pattern").
func TestTooComplexPlainPointer(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("(?:a|b){1000}", 5)
	for _, tc := range []struct{ name, token string }{
		{"my key", "my key"},
		{"é", "é"},
		{"a/b~c%d", "a~1b~0c%d"},
	} {
		// A pattern too large to compile.
		raw := fmt.Sprintf(`{"type":"object","properties":{%q:{"type":"string","pattern":%q}}}`, tc.name, big)
		ptr := "/properties/" + tc.token + "/pattern"
		checkTooComplexAt(t, raw, ptr)

		// Definitions that each apply the next twice: validation grows past maxEvaluations.
		defs := []string{}
		for i := range 16 {
			defs = append(defs, fmt.Sprintf(`%q:{"allOf":[{"$ref":"#/$defs/%s%d"},{"$ref":"#/$defs/%s%d"}]}`,
				fmt.Sprint(tc.name, i), escapeRef(tc.token), i+1, escapeRef(tc.token), i+1))
		}
		defs = append(defs, fmt.Sprintf(`%q:{"type":"string"}`, fmt.Sprint(tc.name, 16)))
		raw = fmt.Sprintf(`{"type":"object","properties":{"x":{"$ref":"#/$defs/%s0"}},"$defs":{%s}}`,
			escapeRef(tc.token), strings.Join(defs, ","))
		_, err := CompileSchema(json.RawMessage(raw))
		if !errors.Is(err, ErrTooComplex) || !strings.Contains(err.Error(), `"/$defs/`+tc.token) {
			t.Errorf("%s: got %v, want an error wrapping ErrTooComplex naming /$defs/%s…", tc.name, err, tc.token)
		}
		tool := cleanTool()
		tool.InputSchema = json.RawMessage(raw)
		found := false
		for _, f := range ValidateTool(tool) {
			if f.Code == "schema_too_complex" {
				found = true
				if !strings.HasPrefix(f.Path, "/inputSchema/$defs/"+tc.token) {
					t.Errorf("%s: schema_too_complex at %q, want /inputSchema/$defs/%s…", tc.name, f.Path, tc.token)
				}
			}
		}
		if !found {
			t.Errorf("%s: no schema_too_complex finding in %v", tc.name, ValidateTool(tool))
		}
	}
}

// escapeRef writes a JSON pointer token into a "$ref" URI fragment.
func escapeRef(token string) string {
	return strings.NewReplacer("%", "%25", " ", "%20").Replace(token)
}

func checkTooComplexAt(t *testing.T, raw, ptr string) {
	t.Helper()
	_, err := CompileSchema(json.RawMessage(raw))
	if !errors.Is(err, ErrTooComplex) || !strings.Contains(err.Error(), fmt.Sprintf("%q", ptr)) {
		t.Errorf("got %v, want an error wrapping ErrTooComplex naming %q", err, ptr)
	}
	tool := cleanTool()
	tool.InputSchema = json.RawMessage(raw)
	if _, ok := find(ValidateTool(tool), "schema_too_complex", "/inputSchema"+ptr); !ok {
		t.Errorf("no schema_too_complex finding at %q in %v", "/inputSchema"+ptr, ValidateTool(tool))
	}
}
