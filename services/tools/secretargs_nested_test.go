package tools_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/usage"
	"github.com/toolwarden/toolwarden/services/verr"
)

// nestedSecretSchema declares secrets below the top level, as generators write them: an
// optional secret (Pydantic's anyOf with null), a nested object's property, an array's
// items, a $ref to $defs, and a recursive definition (and a $ref loop, which must end).
const nestedSecretSchema = `{"type":"object","$defs":{
	"Profile":{"type":"object","properties":{"motto":{"type":"string","writeOnly":true},"label":{"type":"string"}}},
	"Node":{"type":"object","properties":{"hidden":{"type":"string","format":"password"},"kids":{"type":"array","items":{"$ref":"#/$defs/Node"}}}},
	"Loop":{"$ref":"#/$defs/Loop"}},
	"properties":{
	"extra":{"anyOf":[{"type":"string","format":"password","writeOnly":true},{"type":"null"}],"default":null},
	"dial":{"type":"object","properties":{"digits":{"type":"string","writeOnly":true},"host":{"type":"string"}}},
	"rows":{"type":"array","items":{"type":"object","properties":{"cell":{"type":"string","writeOnly":true},"name":{"type":"string"}}}},
	"pair":{"type":"array","prefixItems":[{"type":"string"},{"type":"string","format":"password"}]},
	"profile":{"$ref":"#/$defs/Profile"},
	"tree":{"$ref":"#/$defs/Node"},
	"loop":{"$ref":"#/$defs/Loop"},
	"note":{"type":"string"}}}`

const nestedSecretArgs = `{"extra":"blue-42","dial":{"digits":"7788","host":"db.local"},
	"rows":[{"cell":"c-1","name":"r1"},{"cell":"c-2","name":"r2"}],"pair":["first","p-2"],
	"profile":{"motto":"m-9","label":"lab"},"tree":{"hidden":"h-0","kids":[{"hidden":"h-1","kids":[]}]},
	"loop":"l-1","note":"plain"}`

// The masked nestedSecretArgs: exactly the values the schema marks secret.
var nestedSecretMasked = `{"extra":"` + usage.Mask + `","dial":{"digits":"` + usage.Mask + `","host":"db.local"},
	"rows":[{"cell":"` + usage.Mask + `","name":"r1"},{"cell":"` + usage.Mask + `","name":"r2"}],"pair":["first","` + usage.Mask + `"],
	"profile":{"motto":"` + usage.Mask + `","label":"lab"},"tree":{"hidden":"` + usage.Mask + `","kids":[{"hidden":"` + usage.Mask + `","kids":[]}]},
	"loop":"l-1","note":"plain"}`

func sameJSON(t *testing.T, what string, got json.RawMessage, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: %v in %s", what, err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s:\n got %s\nwant %s", what, got, want)
	}
}

// A secret declared below the top level (anyOf, a nested object, array items, a $ref)
// is masked in place, as the test form hides it; the rest of the arguments stay readable.
func TestNestedSecretArgsMasked(t *testing.T) {
	t.Parallel()
	schema := json.RawMessage(nestedSecretSchema)
	sameJSON(t, "MaskSecretArgs", tools.MaskSecretArgs(schema, json.RawMessage(nestedSecretArgs)), nestedSecretMasked)
	// The router keeps SecretArgNames per tool and masks each call's arguments with them.
	sameJSON(t, "MaskArgs", tools.MaskArgs(json.RawMessage(nestedSecretArgs), tools.SecretArgNames(schema)), nestedSecretMasked)
	// A null (the optional secret left out) is not a secret.
	sameJSON(t, "null", tools.MaskSecretArgs(schema, json.RawMessage(`{"extra":null,"dial":{"digits":null}}`)), `{"extra":null,"dial":{"digits":null}}`)

	want := "/dial/digits, /extra, /pair/1, /profile/motto, /rows/0/cell, /rows/1/cell, /tree/hidden, /tree/kids/0/hidden holds a secret"
	if got := tools.SecretsHeld(schema, json.RawMessage(nestedSecretArgs)); !strings.HasPrefix(got, want) {
		t.Errorf("SecretsHeld:\n got %q\nwant %q…", got, want)
	}
	if got := tools.SecretsHeld(schema, json.RawMessage(`{"dial":{"host":"h"},"rows":[{"name":"n"}],"profile":{"label":"l"},"loop":"x","extra":null}`)); got != "" {
		t.Errorf("SecretsHeld of plain values: %q, want none", got)
	}

	f := newFixture(t)
	id := f.tool(toolSpec{server: f.server("s", true), name: "nested", schema: nestedSecretSchema})
	for _, args := range []string{`{"extra":"blue-42"}`, `{"dial":{"digits":"7788"}}`, `{"rows":[{"cell":"c-1"}]}`, `{"profile":{"motto":"m-9"}}`} {
		_, err := f.svc.SaveTestCase(f.ctx, alice, id, tools.TestCase{Name: "c", Arguments: json.RawMessage(args)})
		var ve *verr.Error
		if !errors.As(err, &ve) || len(ve.Fields) != 1 || !strings.Contains(ve.Fields[0].Message, "holds a secret") {
			t.Errorf("save %s: got %v, want an arguments error saying it holds a secret", args, err)
		}
	}
	if n := f.count(`SELECT count(*) FROM tool_test_cases WHERE tool_id = $1`, id); n != 0 {
		t.Errorf("%d cases saved with a secret, want none", n)
	}
	// Execution pages mask step arguments with ArgMasker.
	got, err := f.svc.NewArgMasker().Mask(f.ctx, id, "", json.RawMessage(nestedSecretArgs))
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "ArgMasker", got, nestedSecretMasked)
}

// A recursive schema whose secrets fan out past the bound on places masks the whole
// top-level argument that may hold them, and the walk ends.
func TestRecursiveSecretArgsBounded(t *testing.T) {
	t.Parallel()
	schema := json.RawMessage(`{"type":"object","$defs":{"N":{"type":"object","properties":{
		"h":{"type":"string","writeOnly":true},"a":{"$ref":"#/$defs/N"},"b":{"$ref":"#/$defs/N"},"c":{"$ref":"#/$defs/N"}}}},
		"properties":{"tree":{"$ref":"#/$defs/N"},"note":{"type":"string"}}}`)
	if got := tools.SecretArgNames(schema); !reflect.DeepEqual(got, []string{"tree"}) {
		t.Errorf("SecretArgNames: %q, want the whole tree", got)
	}
	sameJSON(t, "MaskSecretArgs", tools.MaskSecretArgs(schema, json.RawMessage(`{"tree":{"a":{"h":"x"}},"note":"n"}`)),
		`{"tree":"`+usage.Mask+`","note":"n"}`)
}

// A map's values (additionalProperties, patternProperties) marked secret are masked, as
// the test form hides them, and refused in saved cases; the map's keys stay readable.
func TestMapSecretArgsMasked(t *testing.T) {
	t.Parallel()
	schema := json.RawMessage(`{"type":"object","properties":{
		"env":{"type":"object","additionalProperties":{"type":"string","writeOnly":true}},
		"tokens":{"type":"object","patternProperties":{"^t_":{"type":"string","format":"password"}}},
		"note":{"type":"string"}}}`)
	args := json.RawMessage(`{"env":{"prod":"hunter2","dev":"d-1"},"tokens":{"t_a":"x-1"},"note":"plain"}`)
	want := `{"env":{"prod":"` + usage.Mask + `","dev":"` + usage.Mask + `"},"tokens":{"t_a":"` + usage.Mask + `"},"note":"plain"}`
	sameJSON(t, "MaskSecretArgs", tools.MaskSecretArgs(schema, args), want)
	sameJSON(t, "MaskArgs", tools.MaskArgs(args, tools.SecretArgNames(schema)), want)
	if got := tools.SecretsHeld(schema, args); !strings.Contains(got, "/env/prod") || !strings.Contains(got, "/tokens/t_a") {
		t.Errorf("SecretsHeld: %q, want the map's values named", got)
	}
}
