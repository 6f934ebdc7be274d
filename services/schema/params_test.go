package schema

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// nestedSchema exercises what Parameters and ExampleArguments must follow:
// $ref into $defs, nested objects, arrays of objects, type lists, optional
// (anyOf with null) references, enums, formats, patterns and bounds.
const nestedSchema = `{
	"type": "object",
	"properties": {
		"path": {"type": "string", "description": "File to read.", "minLength": 1, "maxLength": 4096},
		"mode": {"type": "string", "enum": ["text", "binary"], "default": "text", "description": "How to read it."},
		"limit": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "Lines to return."},
		"ratio": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1, "description": "Sampling ratio."},
		"since": {"type": ["string", "null"], "format": "date-time", "description": "Only changes after this time."},
		"owner": {"type": "string", "format": "email", "description": "Owner's address."},
		"code": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$", "description": "Ticket code."},
		"options": {"$ref": "#/$defs/Options", "description": "Reading options."},
		"filters": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/Filter"}, "description": "Filters to apply."},
		"retry": {"anyOf": [{"$ref": "#/$defs/Retry"}, {"type": "null"}], "description": "Retry policy."},
		"tags": {"type": "array", "items": {"type": "string"}, "maxItems": 5, "description": "Tags."},
		"kind": {"const": "file", "description": "Always file."}
	},
	"required": ["path", "limit", "ratio", "owner", "code", "options", "filters", "kind"],
	"additionalProperties": false,
	"$defs": {
		"Options": {
			"type": "object",
			"properties": {
				"encoding": {"type": "string", "default": "utf-8", "description": "Text encoding."},
				"follow": {"type": "boolean", "description": "Follow symlinks."},
				"depth": {"type": "integer", "multipleOf": 5, "minimum": 3, "description": "Depth."}
			},
			"required": ["follow", "depth"]
		},
		"Filter": {
			"type": "object",
			"properties": {
				"field": {"type": "string", "examples": ["size"], "description": "Field to filter on."},
				"op": {"enum": ["eq", "lt", "gt"], "description": "Operator."}
			},
			"required": ["field", "op"]
		},
		"Retry": {
			"type": "object",
			"properties": {"times": {"type": "integer", "description": "Attempts."}}
		}
	}
}`

func ptr[T any](v T) *T { return &v }

func TestParameters(t *testing.T) {
	t.Parallel()
	ps := Parameters(json.RawMessage(nestedSchema))
	byArg := map[string]Param{}
	var walk func([]Param)
	walk = func(ps []Param) {
		for _, p := range ps {
			byArg[p.Arg] = p
			walk(p.Children)
		}
	}
	walk(ps)

	var order []string
	for _, p := range ps {
		order = append(order, p.Name)
	}
	if got, want := strings.Join(order, ","), "path,mode,limit,ratio,since,owner,code,options,filters,retry,tags,kind"; got != want {
		t.Errorf("got order %s, want the schema's order %s", got, want)
	}

	tests := []struct {
		arg  string
		want Param
	}{
		{"path", Param{Path: "/inputSchema/properties/path", Name: "path", Type: "string", Required: true, Description: "File to read.", MinLength: ptr(1), MaxLength: ptr(4096)}},
		{"mode", Param{Path: "/inputSchema/properties/mode", Name: "mode", Type: "string", Description: "How to read it.", Default: "text", Enum: []any{"text", "binary"}}},
		{"limit", Param{Path: "/inputSchema/properties/limit", Name: "limit", Type: "integer", Required: true, Description: "Lines to return.", Min: ptr(1.0), Max: ptr(1000.0)}},
		{"ratio", Param{Path: "/inputSchema/properties/ratio", Name: "ratio", Type: "number", Required: true, Description: "Sampling ratio.", Min: ptr(0.0), Max: ptr(1.0), ExclusiveMin: true, ExclusiveMax: true}},
		{"since", Param{Path: "/inputSchema/properties/since", Name: "since", Type: "string | null", Description: "Only changes after this time.", Format: "date-time"}},
		{"code", Param{Path: "/inputSchema/properties/code", Name: "code", Type: "string", Required: true, Description: "Ticket code.", Pattern: "^[A-Z]{3}-[0-9]{4}$"}},
		{"kind", Param{Path: "/inputSchema/properties/kind", Name: "kind", Type: "string", Required: true, Description: "Always file.", Enum: []any{"file"}}},
		{"tags", Param{Path: "/inputSchema/properties/tags", Name: "tags", Type: "array of string", Description: "Tags.", MaxItems: ptr(5)}},
		{"options.encoding", Param{Path: "/inputSchema/$defs/Options/properties/encoding", Name: "encoding", Type: "string", Description: "Text encoding.", Default: "utf-8"}},
		{"options.follow", Param{Path: "/inputSchema/$defs/Options/properties/follow", Name: "follow", Type: "boolean", Required: true, Description: "Follow symlinks."}},
		{"filters[].field", Param{Path: "/inputSchema/$defs/Filter/properties/field", Name: "field", Type: "string", Required: true, Description: "Field to filter on."}},
		{"filters[].op", Param{Path: "/inputSchema/$defs/Filter/properties/op", Name: "op", Type: "string", Required: true, Description: "Operator.", Enum: []any{"eq", "lt", "gt"}}},
		{"retry.times", Param{Path: "/inputSchema/$defs/Retry/properties/times", Name: "times", Type: "integer", Description: "Attempts."}},
	}
	for _, tc := range tests {
		t.Run(tc.arg, func(t *testing.T) {
			t.Parallel()
			got, ok := byArg[tc.arg]
			if !ok {
				t.Fatalf("no parameter %q; got %v", tc.arg, keys(byArg))
			}
			got.Children = nil
			tc.want.Arg = tc.arg
			if !reflect.DeepEqual(got, tc.want) {
				g, _ := json.Marshal(got)
				w, _ := json.Marshal(tc.want)
				t.Errorf("got  %s\nwant %s", g, w)
			}
		})
	}

	for arg, want := range map[string]string{
		"options": "object",
		"filters": "array of object",
		"retry":   "object | null",
	} {
		if got := byArg[arg].Type; got != want {
			t.Errorf("%s: got type %q, want %q", arg, got, want)
		}
	}
	if got := byArg["options"].Description; got != "Reading options." {
		t.Errorf("options: got description %q, want the property's own", got)
	}
	if n := len(byArg["options"].Children); n != 3 {
		t.Errorf("options: got %d children, want 3", n)
	}
}

func keys(m map[string]Param) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestParametersTypes(t *testing.T) {
	t.Parallel()
	tests := []struct{ schema, want string }{
		{`{"type": "string"}`, "string"},
		{`{"type": ["string", "null"]}`, "string | null"},
		{`{"type": ["integer", "string"]}`, "integer | string"},
		{`{"anyOf": [{"type": "string"}, {"type": "null"}]}`, "string | null"},
		{`{"oneOf": [{"type": "integer"}, {"type": "boolean"}]}`, "integer | boolean"},
		{`{"enum": ["a", 1, "b"]}`, "string | integer"},
		{`{"const": true}`, "boolean"},
		{`{"type": "array", "items": {"type": ["string", "null"]}}`, "array of (string | null)"},
		{`{"type": "array"}`, "array"},
		{`{"properties": {"x": {"type": "string"}}}`, "object"},
		{`{"allOf": [{"$ref": "#/$defs/N"}]}`, "number"},
		{`{"$ref": "#/$defs/N"}`, "number"},
		{`{}`, "any"},
		{`true`, "any"},
	}
	for _, tc := range tests {
		t.Run(tc.schema, func(t *testing.T) {
			t.Parallel()
			ps := Parameters(json.RawMessage(`{"type": "object", "properties": {"p": ` + tc.schema + `}, "$defs": {"N": {"type": "number"}}}`))
			if len(ps) != 1 {
				t.Fatalf("got %d parameters, want 1", len(ps))
			}
			if ps[0].Type != tc.want {
				t.Errorf("got %q, want %q", ps[0].Type, tc.want)
			}
		})
	}
}

func TestParametersEdgeCases(t *testing.T) {
	t.Parallel()
	for _, s := range []string{``, `null`, `{`, `[]`, `{"type": "object"}`} {
		ps := Parameters(json.RawMessage(s))
		if ps == nil || len(ps) != 0 {
			t.Errorf("%q: got %v, want an empty non-nil slice", s, ps)
		}
	}
	// A recursive definition stops where it repeats instead of looping.
	ps := Parameters(json.RawMessage(`{"type": "object", "properties": {"root": {"$ref": "#/$defs/Node"}},
		"$defs": {"Node": {"type": "object", "properties": {"name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}}}}`))
	if len(ps) != 1 || len(ps[0].Children) != 2 {
		t.Fatalf("got %+v, want root with name and children", ps)
	}
	if c := ps[0].Children[1]; c.Type != "array of object" || len(c.Children) != 0 {
		t.Errorf("got %+v, want the recursion cut at children", c)
	}
}

func TestExampleArguments(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		schema string
		want   map[string]any // checked keys only
		absent []string
	}{
		{"nested", nestedSchema, map[string]any{
			"path":  "<path>",
			"mode":  "text",
			"limit": int64(1),
			"kind":  "file",
			"owner": "user@example.com",
			"code":  "AAA-0000",
		}, []string{"since", "retry", "tags"}},
		{"echo", `{"type": "object", "properties": {"message": {"type": "string", "description": "Message to echo"}}, "required": ["message"]}`,
			map[string]any{"message": "<message>"}, nil},
		{"typed name examples", `{"type": "object", "properties": {
				"n": {"type": "number"}, "i": {"type": "integer"}, "b": {"type": "boolean"},
				"a": {"type": "array"}, "o": {"type": "object"}, "z": {"type": "null"}, "any": {}
			}, "required": ["n", "i", "b", "a", "o", "z", "any"]}`,
			map[string]any{"n": int64(0), "i": int64(0), "b": false, "a": []any{}, "o": map[string]any{}, "z": nil, "any": "<any>"}, nil},
		{"optional without default left out", `{"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string", "default": "x"}}}`,
			map[string]any{"b": "x"}, []string{"a"}},
		{"examples and enum", `{"type": "object", "properties": {"e": {"type": "string", "examples": ["ex"], "enum": ["ex", "y"]}, "f": {"enum": [3, 4]}}, "required": ["e", "f"]}`,
			map[string]any{"e": "ex", "f": int64(3)}, nil},
		{"bounds", `{"type": "object", "properties": {
				"lo": {"type": "integer", "minimum": 5}, "hi": {"type": "integer", "maximum": -3},
				"xlo": {"type": "integer", "exclusiveMinimum": 0}, "mult": {"type": "integer", "minimum": 7, "multipleOf": 5},
				"short": {"type": "string", "maxLength": 3}, "long": {"type": "string", "minLength": 12},
				"pat": {"type": "string", "pattern": "^[0-9]+$"}
			}, "required": ["lo", "hi", "xlo", "mult", "short", "long", "pat"]}`,
			map[string]any{"lo": int64(5), "hi": int64(-3), "xlo": int64(1), "mult": int64(10), "short": "abc", "long": "<long>xxxxxx", "pat": "0"}, nil},
		{"min items and tuples", `{"type": "object", "properties": {
				"pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "minItems": 2},
				"two": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "minItems": 2, "uniqueItems": true}
			}, "required": ["pair", "two"]}`,
			map[string]any{"pair": []any{"<pair>", int64(0)}, "two": []any{"a", "b"}}, nil},
		{"formats", `{"type": "object", "properties": {
				"u": {"type": "string", "format": "uri"}, "d": {"type": "string", "format": "date"},
				"id": {"type": "string", "format": "uuid"}, "ip": {"type": "string", "format": "ipv4"}
			}, "required": ["u", "d", "id", "ip"]}`, nil, nil},
		{"min properties", `{"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}, "minProperties": 1}`,
			map[string]any{"a": "<a>"}, nil},
		{"draft-07 optional", `{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {"count": {"default": 3, "type": "number", "minimum": 1, "maximum": 10}}}`,
			map[string]any{"count": int64(3)}, nil},
		{"no properties", `{"type": "object"}`, map[string]any{}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			raw := json.RawMessage(tc.schema)
			got := ExampleArguments(raw)
			for k, want := range tc.want {
				if !reflect.DeepEqual(got[k], want) {
					t.Errorf("%s: got %#v, want %#v", k, got[k], want)
				}
			}
			for _, k := range tc.absent {
				if v, ok := got[k]; ok {
					t.Errorf("%s: got %#v, want it left out", k, v)
				}
			}
			s := strictCompile(t, raw)
			if err := s.Validate(roundTrip(t, got)); err != nil {
				b, _ := json.Marshal(got)
				t.Errorf("example %s does not validate against its schema: %v", b, err)
			}
		})
	}
}

func TestExampleArgumentsOfUnusableSchemas(t *testing.T) {
	t.Parallel()
	for _, s := range []string{``, `null`, `{`, `[1]`, `"x"`} {
		got := ExampleArguments(json.RawMessage(s))
		if got == nil || len(got) != 0 {
			t.Errorf("%q: got %#v, want an empty non-nil map", s, got)
		}
	}
}

// ArgumentNames: every top-level name a call may carry, from the properties and every
// part the schema combines, through references, each part once however they refer
// to each other.
func TestArgumentNames(t *testing.T) {
	for _, c := range []struct {
		schema string
		want   []string
	}{
		{`{"type":"object","properties":{"b":{},"a":{}}}`, []string{"a", "b"}},
		{`{"type":"object","properties":{"a":{}},"allOf":[{"properties":{"b":{}}}]}`, []string{"a", "b"}},
		{`{"type":"object","properties":{"op":{}},"oneOf":[{"properties":{"path":{}}},{"properties":{"from":{},"to":{}}}]}`, []string{"from", "op", "path", "to"}},
		{`{"type":"object","anyOf":[{"$ref":"#/$defs/x"}],"$defs":{"x":{"properties":{"z":{}}}}}`, []string{"z"}},
		{`{"type":"object","if":{"properties":{"k":{"const":1}}},"then":{"properties":{"t":{}}},"else":{"properties":{"e":{}}}}`, []string{"e", "t"}},
		{`{"type":"object","properties":{"a":{}},"allOf":[{"$ref":"#"},{"oneOf":[{"$ref":"#"}]}]}`, []string{"a"}},
		{`{"type":"object","properties":{"x":{}},"$ref":"#/$defs/b","$defs":{"b":{"properties":{"y":{}},"oneOf":[{"properties":{"z":{}}}]}}}`, []string{"x", "y", "z"}},
		{`{"type":"object"}`, nil},
		{`not json`, nil},
		{`[1]`, nil},
	} {
		if got := ArgumentNames(json.RawMessage(c.schema)); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %v, want %v", c.schema, got, c.want)
		}
	}
}

// Properties that refer to one definition each list it in full: the list stops
// expanding children past MaxParams, however many a few kilobytes of schema stand for.
func TestParametersBounded(t *testing.T) {
	defs := map[string]any{}
	for level := 1; level <= 8; level++ {
		props := map[string]any{}
		for i := range 10 {
			props[fmt.Sprintf("p%d", i)] = map[string]any{"$ref": fmt.Sprintf("#/$defs/d%d", level+1)}
			if level == 8 {
				props[fmt.Sprintf("p%d", i)] = map[string]any{"type": "string"}
			}
		}
		defs[fmt.Sprintf("d%d", level)] = map[string]any{"type": "object", "properties": props}
	}
	raw, _ := json.Marshal(map[string]any{"type": "object", "$defs": defs,
		"properties": map[string]any{"top": map[string]any{"$ref": "#/$defs/d1"}}})
	var count func([]Param) int
	count = func(ps []Param) int {
		n := len(ps)
		for _, p := range ps {
			n += count(p.Children)
		}
		return n
	}
	if n := count(Parameters(raw)); n > MaxParams+100 {
		t.Fatalf("a schema of 10^8 parameters: %d listed, want about %d at most", n, MaxParams)
	}
	// Every property required: the example call is bounded too.
	for level := 1; level <= 8; level++ {
		d := defs[fmt.Sprintf("d%d", level)].(map[string]any)
		d["required"] = []string{"p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8", "p9"}
	}
	required, _ := json.Marshal(map[string]any{"type": "object", "$defs": defs, "required": []string{"top"},
		"properties": map[string]any{"top": map[string]any{"$ref": "#/$defs/d1"}}})
	b, _ := json.Marshal(ExampleArguments(required))
	if len(b) > 200_000 {
		t.Fatalf("the example call of a schema of 10^8 required values: %d bytes", len(b))
	}
}

// PropertySchemas reads each top-level parameter through $ref and allOf, the nearest
// layer's keyword first, as Parameters lists them.
func TestPropertySchemas(t *testing.T) {
	got := PropertySchemas(json.RawMessage(`{"$defs":{"N":{"type":"integer","description":"far","minimum":1}},
		"properties":{"n":{"$ref":"#/$defs/N","description":"near"},"s":{"type":"string"}},
		"allOf":[{"properties":{"m":{"enum":["a"]},"s":{"type":"integer"}}}]}`))
	want := map[string]map[string]any{
		"n": {"type": "integer", "description": "near", "minimum": int64(1)},
		"s": {"type": "string"},
		"m": {"enum": []any{"a"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v, want %#v", got, want)
	}
	if got := PropertySchemas(json.RawMessage(`[`)); len(got) != 0 {
		t.Errorf("not JSON: %v", got)
	}
}
