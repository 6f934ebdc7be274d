package registry_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/toolwarden/toolwarden/internal/canonjson"
	"github.com/toolwarden/toolwarden/services/registry"
)

// TestDefinitionHashSpec: a tool listed with the spec hash of a template tool in its
// _meta (services/template) has it in its definition hash, so a change of what the tool
// does is a new version. A tool without it hashes as before, whatever else its _meta
// says, and so does one whose _meta is not an object.
func TestDefinitionHashSpec(t *testing.T) {
	t.Parallel()
	def := func(raw string) registry.ToolDef {
		return registry.ToolDef{Name: "items", Description: "Find items", InputSchema: json.RawMessage(`{"type":"object"}`),
			Annotations: json.RawMessage(`{"readOnlyHint":true}`), Raw: json.RawMessage(raw)}
	}
	plain := registry.DefinitionHash(def(""))
	for _, raw := range []string{
		`{"name":"items"}`,
		`{"name":"items","_meta":{"other/key":"x"}}`,
		`{"name":"items","_meta":"io.toolwarden/spec"}`,
		`{"name":"items","_meta":null}`,
		`not json "io.toolwarden/spec"`,
	} {
		if got := registry.DefinitionHash(def(raw)); got != plain {
			t.Errorf("raw %s: hash %s, want %s as without it", raw, got, plain)
		}
	}
	a := registry.DefinitionHash(def(`{"name":"items","_meta":{"io.toolwarden/spec":"aaaa"}}`))
	b := registry.DefinitionHash(def(`{"_meta":{"other":1,"io.toolwarden/spec":"bbbb"},"name":"items"}`))
	if a == plain || b == plain || a == b {
		t.Fatalf("spec hashes aaaa and bbbb: definition hashes %s and %s, plain %s; want three different", a, b, plain)
	}
	// The bytes hashed are those of the map with "_meta" beside the other fields.
	form, err := canonjson.Marshal(map[string]any{"_meta": map[string]any{"io.toolwarden/spec": "aaaa"},
		"name": "items", "title": "", "description": "Find items", "inputSchema": map[string]any{"type": "object"},
		"outputSchema": nil, "annotations": map[string]any{"readOnlyHint": true}})
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(form); hex.EncodeToString(sum[:]) != a {
		t.Fatalf("definition hash %s is not the SHA-256 of %s", a, form)
	}
	// Where in the listing the key is, and what else _meta holds, do not matter.
	if again := registry.DefinitionHash(def(`{"_meta":{"io.toolwarden/spec":"aaaa","x":[1]},"name":"items"}`)); again != a {
		t.Fatalf("the same spec hash: %s, want %s", again, a)
	}
}
