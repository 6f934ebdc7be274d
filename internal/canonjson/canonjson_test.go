package canonjson_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/toolwarden/toolwarden/internal/canonjson"
	"github.com/toolwarden/toolwarden/internal/canonjson/canonjsontest"
)

// legacyRegistry is services/registry's canonical (and DefinitionHash's encoding) as it
// was before this package: decode with UseNumber, json.Marshal; empty → null, not JSON
// → the text as a string.
func legacyRegistry(raw json.RawMessage) []byte {
	var v any
	if len(bytes.TrimSpace(raw)) == 0 {
		v = nil
	} else {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			v = string(raw)
		}
	}
	b, _ := json.Marshal(map[string]any{"v": v})
	return b
}

// legacyExecutions is services/executions' canonicalJSON as it was before this package.
func legacyExecutions(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 {
		return json.RawMessage("{}"), nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// TestSameAsBoth runs both former implementations and this package over the corpus:
// every input either canonicalizes to the same bytes in all three or fails in both
// (the registry's own fallbacks for empty and invalid input stay in the registry).
func TestSameAsBoth(t *testing.T) {
	t.Parallel()
	valid := 0
	for _, raw := range canonjsontest.Corpus {
		got, err := canonjson.Canonical([]byte(raw))
		old, oldErr := legacyExecutions(json.RawMessage(raw))
		if raw == "" {
			if err == nil {
				t.Errorf("Canonical(empty) = %s, want an error", got)
			}
			continue // executions' rule: no arguments are {}
		}
		if (err != nil) != (oldErr != nil) {
			t.Errorf("%q: error %v, executions' was %v", raw, err, oldErr)
			continue
		}
		if err != nil {
			continue
		}
		valid++
		if !bytes.Equal(got, old) {
			t.Errorf("%q: got %s, executions' was %s", raw, got, old)
		}
		v, _ := canonjson.Decode([]byte(raw))
		wrapped, err := canonjson.Marshal(map[string]any{"v": v})
		if err != nil || !bytes.Equal(wrapped, legacyRegistry(json.RawMessage(raw))) {
			t.Errorf("%q: got %s (%v), the registry's was %s", raw, wrapped, err, legacyRegistry(json.RawMessage(raw)))
		}
	}
	if valid < 25 {
		t.Fatalf("only %d corpus entries are valid JSON", valid)
	}
}

// TestForm shows the form on the cases a reader would wonder about.
func TestForm(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		` { "b" : 1, "a" : { "d" : [ 2 , 1 ], "c" : null } } `: `{"a":{"c":null,"d":[2,1]},"b":1}`,
		`[1.0, 1e400, -0, 12345678901234567890123]`:            `[1.0,1e400,-0,12345678901234567890123]`,
		`"<a href='x'>&</a>"`:                                  `"\u003ca href='x'\u003e\u0026\u003c/a\u003e"`,
		`"\u2028\t\u0001é"`:                                    `"\u2028\t\u0001é"`,
		`{"é":1,"z":2,"A":3}`:                                  `{"A":3,"z":2,"é":1}`,
		`{"a":1} {"b":2}`:                                      `{"a":1}`,
	} {
		got, err := canonjson.Canonical([]byte(in))
		if err != nil || string(got) != want {
			t.Errorf("Canonical(%s) = %s, %v; want %s", in, got, err, want)
		}
	}
}
