package registry_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/toolwarden/toolwarden/internal/canonjson"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/template"
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

// A template tool's new version says what changed: a changed behaviour (breaking), or,
// for one stored before behaviour was hashed, that it now is (not breaking). Specs equal
// as JSON are no change, however written.
func TestDiffBehaviour(t *testing.T) {
	t.Parallel()
	with := func(spec string) registry.ToolDef {
		return registry.ToolDef{Name: "t", InputSchema: json.RawMessage(`{"type":"object"}`),
			Raw: json.RawMessage(`{"name":"t","_meta":{"` + template.SpecMeta + `":` + spec + `}}`)}
	}
	plain := registry.ToolDef{Name: "t", InputSchema: json.RawMessage(`{"type":"object"}`), Raw: json.RawMessage(`{"name":"t"}`)}
	kinds := func(cs []registry.Change) (out []string) {
		for _, c := range cs {
			out = append(out, fmt.Sprintf("%s/%v", c.Kind, c.Breaking))
		}
		return out
	}
	for _, c := range []struct {
		name     string
		old, new registry.ToolDef
		want     []string
	}{
		{"changed", with(`"aaaa"`), with(`"bbbb"`), []string{"behaviour/true"}},
		{"hashed since", plain, with(`"aaaa"`), []string{"behaviour/false"}},
		{"the same, written otherwise", with(`{"a": 1}`), with(`{"a":1}`), nil},
		{"no template", plain, plain, nil},
	} {
		if got := kinds(registry.Diff(c.old, c.new)); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
