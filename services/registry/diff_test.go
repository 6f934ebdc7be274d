package registry_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/toolwarden/toolwarden/services/registry"
)

func def(description, input string) registry.ToolDef {
	return registry.ToolDef{Name: "t", Description: description, InputSchema: json.RawMessage(input)}
}

func TestDefinitionHash(t *testing.T) {
	t.Parallel()
	base := registry.ToolDef{Name: "read", Title: "Read", Description: "Reads a file",
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"where"},"n":{"type":"integer","minimum":1}},"required":["path"]}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`),
		Annotations:  json.RawMessage(`{"readOnlyHint":true,"idempotentHint":true}`),
		Raw:          json.RawMessage(`{"name":"read"}`)}
	h := registry.DefinitionHash(base)
	if len(h) != 64 {
		t.Fatalf("hash: got %q, want 64 hex characters", h)
	}
	with := func(mod func(*registry.ToolDef)) registry.ToolDef {
		d := base
		mod(&d)
		return d
	}
	cases := []struct {
		name string
		def  registry.ToolDef
		same bool
	}{
		{"identical", with(func(*registry.ToolDef) {}), true},
		{"keys reordered", with(func(d *registry.ToolDef) {
			d.InputSchema = json.RawMessage(`{"required":["path"],"properties":{"n":{"minimum":1,"type":"integer"},"path":{"description":"where","type":"string"}},"type":"object"}`)
			d.Annotations = json.RawMessage(`{"idempotentHint":true,"readOnlyHint":true}`)
		}), true},
		{"whitespace", with(func(d *registry.ToolDef) {
			d.InputSchema = json.RawMessage("{\n  \"type\": \"object\",\n  \"properties\": {\n    \"path\": {\"type\": \"string\", \"description\": \"where\"},\n    \"n\": {\"type\": \"integer\", \"minimum\": 1}\n  },\n  \"required\": [ \"path\" ]\n}\n")
			d.OutputSchema = json.RawMessage(` { "type" : "object" , "properties" : { "text" : { "type" : "string" } } } `)
		}), true},
		{"raw ignored", with(func(d *registry.ToolDef) { d.Raw = json.RawMessage(`{"name":"read","_meta":{"x":1}}`) }), true},
		{"description", with(func(d *registry.ToolDef) { d.Description = "Reads a file." }), false},
		{"title", with(func(d *registry.ToolDef) { d.Title = "Read file" }), false},
		{"name", with(func(d *registry.ToolDef) { d.Name = "read2" }), false},
		{"parameter description", with(func(d *registry.ToolDef) {
			d.InputSchema = json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"where to"},"n":{"type":"integer","minimum":1}},"required":["path"]}`)
		}), false},
		{"number", with(func(d *registry.ToolDef) {
			d.InputSchema = json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"where"},"n":{"type":"integer","minimum":2}},"required":["path"]}`)
		}), false},
		{"required order", with(func(d *registry.ToolDef) {
			d.InputSchema = json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"where"},"n":{"type":"integer","minimum":1}},"required":["path","n"]}`)
		}), false},
		{"output schema removed", with(func(d *registry.ToolDef) { d.OutputSchema = nil }), false},
		{"annotations removed", with(func(d *registry.ToolDef) { d.Annotations = nil }), false},
		{"annotation value", with(func(d *registry.ToolDef) {
			d.Annotations = json.RawMessage(`{"readOnlyHint":false,"idempotentHint":true}`)
		}), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := registry.DefinitionHash(tc.def)
			if (got == h) != tc.same {
				t.Fatalf("got hash %s (base %s); want same=%v", got, h, tc.same)
			}
			if again := registry.DefinitionHash(tc.def); again != got {
				t.Fatalf("got %s then %s, want a stable hash", got, again)
			}
		})
	}
	// A JSON null is the same as no value at all.
	none := registry.ToolDef{Name: "t"}
	nulls := registry.ToolDef{Name: "t", OutputSchema: json.RawMessage(`null`), Annotations: json.RawMessage(` null `)}
	if registry.DefinitionHash(none) != registry.DefinitionHash(nulls) {
		t.Fatalf("null and absent: got different hashes, want the same")
	}
}

func TestDiff(t *testing.T) {
	t.Parallel()
	const obj = `{"type":"object","properties":{"path":{"type":"string"},"n":{"type":"integer"}},"required":["path"]}`
	type change struct {
		Kind     string
		Path     string
		Breaking bool
	}
	cases := []struct {
		name     string
		old, new registry.ToolDef
		want     []change
	}{
		{"identical", def("d", obj), def("d", obj), nil},
		{"reordered keys and whitespace", def("d", obj),
			def("d", `{ "required": ["path"], "properties": {"n": {"type": "integer"}, "path": {"type": "string"}}, "type": "object" }`), nil},
		{"title", registry.ToolDef{Name: "t", Title: "A", InputSchema: json.RawMessage(obj)},
			registry.ToolDef{Name: "t", Title: "B", InputSchema: json.RawMessage(obj)}, []change{{"title", "", false}}},
		{"description", def("d", obj), def("e", obj), []change{{"description", "", false}}},
		{"parameter removed", def("d", obj), def("d", `{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`),
			[]change{{"parameter_removed", "/n", true}}},
		{"required parameter removed", def("d", obj), def("d", `{"type":"object","properties":{"n":{"type":"integer"}}}`),
			[]change{{"parameter_removed", "/path", true}}},
		{"parameter retyped", def("d", obj), def("d", `{"type":"object","properties":{"path":{"type":"string"},"n":{"type":"string"}},"required":["path"]}`),
			[]change{{"parameter_retyped", "/n", true}}},
		{"parameter type union reordered is a change, not a retype", def("d", `{"properties":{"a":{"type":["string","null"]}}}`),
			def("d", `{"properties":{"a":{"type":["null","string"]}}}`), []change{{"parameter_changed", "/a", false}}},
		{"parameter changed", def("d", obj), def("d", `{"type":"object","properties":{"path":{"type":"string","description":"x"},"n":{"type":"integer"}},"required":["path"]}`),
			[]change{{"parameter_changed", "/path", false}}},
		{"optional parameter added", def("d", obj), def("d", `{"type":"object","properties":{"path":{"type":"string"},"n":{"type":"integer"},"z":{"type":"boolean"}},"required":["path"]}`),
			[]change{{"parameter_added", "/z", false}}},
		{"required parameter added", def("d", obj), def("d", `{"type":"object","properties":{"path":{"type":"string"},"n":{"type":"integer"},"z":{"type":"boolean"}},"required":["path","z"]}`),
			[]change{{"parameter_added", "/z", true}}},
		{"parameter made required", def("d", obj), def("d", `{"type":"object","properties":{"path":{"type":"string"},"n":{"type":"integer"}},"required":["path","n"]}`),
			[]change{{"parameter_required", "/n", true}}},
		{"parameter made optional", def("d", obj), def("d", `{"type":"object","properties":{"path":{"type":"string"},"n":{"type":"integer"}}}`),
			[]change{{"parameter_optional", "/path", false}}},
		{"other schema keyword", def("d", obj), def("d", `{"type":"object","properties":{"path":{"type":"string"},"n":{"type":"integer"}},"required":["path"],"additionalProperties":false}`),
			[]change{{"input_schema", "", true}}}, // it refuses arguments it accepted
		{"output schema", registry.ToolDef{Name: "t", InputSchema: json.RawMessage(obj)},
			registry.ToolDef{Name: "t", InputSchema: json.RawMessage(obj), OutputSchema: json.RawMessage(`{"type":"object"}`)},
			[]change{{"output_schema", "", false}}},
		{"annotations", registry.ToolDef{Name: "t", InputSchema: json.RawMessage(obj), Annotations: json.RawMessage(`{"readOnlyHint":true}`)},
			registry.ToolDef{Name: "t", InputSchema: json.RawMessage(obj), Annotations: json.RawMessage(`{"readOnlyHint":false}`)},
			[]change{{"annotations", "", false}}},
		{"several at once, in order", def("d", obj),
			def("e", `{"type":"object","properties":{"path":{"type":"number"},"z":{"type":"string"}},"required":["path"]}`),
			[]change{{"description", "", false}, {"parameter_removed", "/n", true}, {"parameter_retyped", "/path", true}, {"parameter_added", "/z", false}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got []change
			for _, c := range registry.Diff(tc.old, tc.new) {
				if c.Message == "" {
					t.Errorf("%s: got an empty message, want one", c.Kind)
				}
				got = append(got, change{c.Kind, c.Path, c.Breaking})
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			// Diff and DefinitionHash agree on "no change".
			if same := registry.DefinitionHash(tc.old) == registry.DefinitionHash(tc.new); same != (len(tc.want) == 0) {
				t.Fatalf("hash equal %v, but diff found %d changes", same, len(tc.want))
			}
		})
	}
}
