package form

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/schema"
)

// The form is held to the schemas of services/schema's tests: server-everything's
// tools (testdata/everything_tools.json) and hand-written schemas
// (testdata/form_schemas.json): the in-repo test server's tools
// (internal/mcptest, as the Go SDK infers them) and nested, array, enum,
// format and unsupported cases.
const corpusDir = "../../services/schema/testdata/"

func readTools(t testing.TB, file string) []schema.Tool {
	t.Helper()
	raw, err := os.ReadFile(corpusDir + file)
	if err != nil {
		t.Fatal(err)
	}
	var tools []schema.Tool
	if err := json.Unmarshal(raw, &tools); err != nil {
		t.Fatal(err)
	}
	return tools
}

// formTools are the hand-written schemas for the form.
func formTools(t testing.TB) []schema.Tool {
	return readTools(t, "form_schemas.json")
}

// formCorpus is every schema the form is held to: server-everything's tools
// and formTools.
func formCorpus(t testing.TB) []schema.Tool {
	return append(readTools(t, "everything_tools.json"), formTools(t)...)
}

func formTool(t testing.TB, name string) schema.Tool {
	t.Helper()
	for _, tl := range formTools(t) {
		if tl.Name == name {
			return tl
		}
	}
	t.Fatalf("no tool %q in testdata/form_schemas.json", name)
	return schema.Tool{}
}

// formSubmission is what a browser submits for the rendered model: every leaf
// input, empty ones too (a select submits its selected option, which is the
// empty one when the field is unset), the item count of every array that
// holds a value, and a JSONKey marker per JSON sub-editor. The views
// package checks the same through the rendered HTML.
func formSubmission(m Model) url.Values {
	out := url.Values{}
	if m.JSONOnly {
		out.Add(FieldName(""), m.Root.Value)
		out.Add(JSONKey, "")
		return out
	}
	var walk func(f Field)
	walk = func(f Field) {
		if f.Null {
			out.Add(FieldName(f.Path)+NullSuffix, "1")
		}
		switch f.Kind {
		case "json":
			out.Add(FieldName(f.Path), f.Value)
			out.Add(JSONKey, f.Path)
		case "object":
			for _, c := range f.Fields {
				walk(c)
			}
			if f.Extra != nil {
				walk(*f.Extra)
			}
		case "array", "map":
			if f.Set {
				out.Add(FieldName(f.Path), strconv.Itoa(len(f.Fields)))
			}
			for _, c := range f.Fields {
				if f.Kind == "map" {
					out.Add(FieldName(c.Path)+KeySuffix, c.Key)
				}
				walk(c)
			}
		case "choice":
			out.Add(FieldName(f.Path)+VariantSuffix, strconv.Itoa(f.Chosen))
			for _, v := range f.Variants {
				walk(v)
			}
		default:
			out.Add(FieldName(f.Path), f.Value)
		}
	}
	walk(m.Root)
	return out
}

// sameFormArgs compares two JSON documents as values: key order does not matter
// and numbers compare exactly by value (1.50 equals 1.5, big integers keep
// every digit).
func sameFormArgs(t testing.TB, a, b []byte) bool {
	t.Helper()
	da, db := exactFormJSON(t, a), exactFormJSON(t, b)
	return reflect.DeepEqual(da, db)
}

func exactFormJSON(t testing.TB, raw []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	var norm func(any) any
	norm = func(v any) any {
		switch x := v.(type) {
		case json.Number:
			r, ok := new(big.Rat).SetString(string(x))
			if !ok {
				t.Fatalf("bad number %s", x)
			}
			return r.RatString()
		case map[string]any:
			for k, e := range x {
				x[k] = norm(e)
			}
		case []any:
			for i, e := range x {
				x[i] = norm(e)
			}
		}
		return v
	}
	return norm(v)
}

func formJSON(t testing.TB, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// walkFields visits f and its descendants (not item templates; every variant).
func walkFields(f Field, fn func(Field)) {
	fn(f)
	for _, c := range f.Fields {
		walkFields(c, fn)
	}
	for _, c := range f.Variants {
		walkFields(c, fn)
	}
	if f.Extra != nil {
		walkFields(*f.Extra, fn)
	}
}

func fieldAt(t testing.TB, m Model, ptr string) Field {
	t.Helper()
	var got *Field
	walkFields(m.Root, func(f Field) {
		if f.Pointer == ptr && got == nil { // a choice before its variants, which share its pointer
			got = &f
		}
	})
	if got == nil {
		t.Fatalf("no field at %q", ptr)
	}
	return *got
}

// oneProp is a schema with the single property p.
func oneProp(p string) json.RawMessage {
	return json.RawMessage(`{"type": "object", "properties": {"p": ` + p + `}}`)
}

// namedProp is a schema with the single property name.
func namedProp(name, p string) json.RawMessage {
	return json.RawMessage(`{"type": "object", "properties": {"` + name + `": ` + p + `}}`)
}

func TestFormKinds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, schema   string
		kind, input    string
		secret         bool
		hint           string // substring; "" means no check
		enum, enumJSON []string
	}{
		{"string", `{"type": "string"}`, "string", "text", false, "", nil, nil},
		{"integer", `{"type": "integer"}`, "integer", "", false, "", nil, nil},
		{"number", `{"type": "number"}`, "number", "", false, "", nil, nil},
		{"boolean", `{"type": "boolean"}`, "boolean", "", false, "", nil, nil},
		{"enum", `{"type": "string", "enum": ["a", "b"]}`, "enum", "", false, "", []string{"a", "b"}, []string{`"a"`, `"b"`}},
		{"untyped enum", `{"enum": ["x", 2, false, null]}`, "enum", "", false, "", []string{"x", "2", "false", "null"}, []string{`"x"`, "2", "false", "null"}},
		{"enum texts that collide", `{"enum": ["1", 1, "", "null", null]}`, "enum", "", false, "", []string{`"1"`, "1", `""`, `"null"`, "null"}, []string{`"1"`, "1", `""`, `"null"`, "null"}},
		{"const", `{"const": "fixed"}`, "enum", "", false, "", []string{"fixed"}, []string{`"fixed"`}},
		{"numeric const", `{"const": 3}`, "enum", "", false, "", []string{"3"}, []string{"3"}},
		{"object", `{"type": "object", "properties": {"a": {"type": "string"}}}`, "object", "", false, "", nil, nil},
		{"typeless object", `{"properties": {"a": {"type": "string"}}}`, "object", "", false, "", nil, nil},
		{"empty closed object", `{"type": "object", "additionalProperties": false}`, "object", "", false, "", nil, nil},
		{"array", `{"type": "array", "items": {"type": "string"}}`, "array", "", false, "", nil, nil},
		{"typeless array", `{"items": {"type": "string"}}`, "array", "", false, "", nil, nil},
		{"nullable string", `{"type": ["string", "null"]}`, "string", "text", false, "", nil, nil},
		{"optional via anyOf null", `{"anyOf": [{"type": "integer"}, {"type": "null"}]}`, "integer", "", false, "", nil, nil},
		{"integer or number", `{"type": ["integer", "number"]}`, "number", "", false, "", nil, nil},
		{"allOf of one", `{"allOf": [{"type": "string"}]}`, "string", "text", false, "", nil, nil},
		{"oneOf", `{"oneOf": [{"type": "string"}, {"type": "integer"}]}`, "choice", "", false, "", nil, nil},
		{"anyOf", `{"anyOf": [{"type": "string"}, {"type": "integer"}]}`, "choice", "", false, "", nil, nil},
		{"anyOf with null", `{"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]}`, "choice", "", false, "", nil, nil},
		{"array of oneOf", `{"type": "array", "items": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}`, "array", "", false, "", nil, nil},
		{"map", `{"type": "object", "additionalProperties": {"type": "string"}}`, "map", "", false, "", nil, nil},
		{"map of numbers with bounds", `{"type": "object", "additionalProperties": {"type": "number"}, "maxProperties": 3}`, "map", "", false, "at most 3 entries", nil, nil},
		{"patternProperties", `{"type": "object", "patternProperties": {"^x": {"type": "string"}}}`, "map", "", false, "keys match ^x", nil, nil},
		{"propertyNames", `{"type": "object", "additionalProperties": {"type": "integer"}, "propertyNames": {"pattern": "^[a-z]+$"}}`, "map", "", false, "keys match ^[a-z]+$", nil, nil},
		{"allOf of objects", `{"allOf": [{"type": "object", "properties": {"a": {"type": "string"}}}, {"properties": {"b": {"type": "integer"}}}]}`, "object", "", false, "", nil, nil},
		// What a form cannot express becomes a JSON sub-editor.
		{"oneOf next to properties", `{"type": "object", "properties": {"a": {"type": "string"}}, "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}`, "json", "", false, "oneOf", nil, nil},
		{"oneOf and anyOf", `{"oneOf": [{"type": "string"}, {"type": "integer"}], "anyOf": [{"type": "string"}, {"type": "integer"}]}`, "json", "", false, "oneOf and anyOf", nil, nil},
		{"map with two patterns", `{"type": "object", "patternProperties": {"^x": {"type": "string"}, "^y": {"type": "integer"}}}`, "json", "", false, "free-form", nil, nil},
		{"map of anything", `{"type": "object", "additionalProperties": true}`, "json", "", false, "free-form", nil, nil},
		{"allOf of scalars", `{"allOf": [{"type": "string"}, {"type": "integer"}]}`, "json", "", false, "allOf", nil, nil},
		{"several types", `{"type": ["string", "number"]}`, "json", "", false, "string | number", nil, nil},
		{"only null", `{"type": "null"}`, "json", "", false, "null", nil, nil},
		{"untyped", `{"description": "anything"}`, "json", "", false, "any JSON value", nil, nil},
		{"true schema", `true`, "json", "", false, "any JSON value", nil, nil},
		{"unknown type", `{"type": "file"}`, "json", "", false, "unknown type", nil, nil},
		{"free-form object", `{"type": "object"}`, "json", "", false, "free-form", nil, nil},
		{"tuple", `{"type": "array", "prefixItems": [{"type": "string"}]}`, "json", "", false, "tuple", nil, nil},
		{"draft-07 tuple", `{"type": "array", "items": [{"type": "string"}]}`, "json", "", false, "tuple", nil, nil},
		{"array of anything", `{"type": "array"}`, "json", "", false, "any type", nil, nil},
		{"enum of objects", `{"enum": [{"a": 1}]}`, "json", "", false, "objects or arrays", nil, nil},
		{"const object", `{"const": {"a": 1}}`, "json", "", false, "constant object", nil, nil},
		// String inputs from formats, names and lengths.
		{"email", `{"type": "string", "format": "email"}`, "string", "email", false, "", nil, nil},
		{"uri", `{"type": "string", "format": "uri"}`, "string", "url", false, "", nil, nil},
		{"date", `{"type": "string", "format": "date"}`, "string", "date", false, "", nil, nil},
		{"date-time keeps its offset in a text input", `{"type": "string", "format": "date-time"}`, "string", "text", false, "format: date-time, e.g. 2025-01-01T12:00:00Z", nil, nil},
		{"time", `{"type": "string", "format": "time"}`, "string", "text", false, "format: time", nil, nil},
		{"uuid", `{"type": "string", "format": "uuid"}`, "string", "text", false, "format: uuid", nil, nil},
		{"password format", `{"type": "string", "format": "password"}`, "string", "password", true, "", nil, nil},
		{"writeOnly", `{"type": "string", "writeOnly": true}`, "string", "password", true, "", nil, nil},
		{"long", `{"type": "string", "maxLength": 500}`, "string", "textarea", false, "", nil, nil},
		{"short", `{"type": "string", "maxLength": 200}`, "string", "text", false, "", nil, nil},
		{"contentMediaType", `{"type": "string", "contentMediaType": "text/markdown"}`, "string", "textarea", false, "", nil, nil},
		{"deprecated", `{"type": "string", "deprecated": true}`, "string", "text", false, "deprecated", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := Build(oneProp(tt.schema), nil)
			if m.JSONOnly || len(m.Root.Fields) != 1 {
				t.Fatalf("got JSONOnly %v and %d fields, want one field", m.JSONOnly, len(m.Root.Fields))
			}
			f := m.Root.Fields[0]
			if f.Kind != tt.kind || f.Input != tt.input || f.Secret != tt.secret {
				t.Errorf("got kind %q input %q secret %v, want %q %q %v", f.Kind, f.Input, f.Secret, tt.kind, tt.input, tt.secret)
			}
			if !strings.Contains(f.Hint, tt.hint) {
				t.Errorf("got hint %q, want it to contain %q", f.Hint, tt.hint)
			}
			if !slices.Equal(f.Enum, tt.enum) || !slices.Equal(f.EnumJSON, tt.enumJSON) {
				t.Errorf("got enum %q / %q, want %q / %q", f.Enum, f.EnumJSON, tt.enum, tt.enumJSON)
			}
			if f.Pointer != "/p" || f.Name != "p" || f.Label != "p" {
				t.Errorf("got pointer %q name %q label %q, want /p p p", f.Pointer, f.Name, f.Label)
			}
			wantUnsupported := 0
			if tt.kind == "json" {
				wantUnsupported = 1
			}
			if len(m.Unsupported) != wantUnsupported || wantUnsupported == 1 && m.Unsupported[0] != "/p: "+f.Hint {
				t.Errorf("got Unsupported %q, want %d entry naming /p", m.Unsupported, wantUnsupported)
			}
		})
	}
}

func TestFormInputByName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, schema string
		input        string
		secret       bool
	}{
		{"api_key", `{"type": "string"}`, "password", true},
		{"githubToken", `{"type": "string"}`, "password", true},
		{"max_tokens", `{"type": "integer"}`, "", false},
		{"content", `{"type": "string"}`, "textarea", false},
		{"fileContent", `{"type": "string"}`, "textarea", false},
		{"message_body", `{"type": "string"}`, "textarea", false},
		{"context", `{"type": "string"}`, "text", false},
		{"path", `{"type": "string", "maxLength": 4096}`, "text", false},
		{"query", `{"type": "string", "maxLength": 4096}`, "textarea", false},
		{"content", `{"type": "string", "format": "uri"}`, "url", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := Build(namedProp(tt.name, tt.schema), nil).Root.Fields[0]
			if f.Input != tt.input || f.Secret != tt.secret {
				t.Errorf("got input %q secret %v, want %q %v", f.Input, f.Secret, tt.input, tt.secret)
			}
		})
	}
}

func TestFormNumbers(t *testing.T) {
	t.Parallel()
	f64 := func(f float64) *float64 { return &f }
	tests := []struct {
		name, schema string
		min, max     *float64
		step, hint   string
	}{
		{"integer", `{"type": "integer"}`, nil, nil, "1", ""},
		{"number", `{"type": "number"}`, nil, nil, "any", ""},
		{"inclusive", `{"type": "number", "minimum": 1, "maximum": 10}`, f64(1), f64(10), "any", ""},
		{"exclusive number bounds are hints", `{"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}`, nil, nil, "any", "greater than 0; less than 1"},
		{"exclusive integer bounds fold", `{"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10}`, f64(1), f64(9), "1", ""},
		{"stricter of both", `{"type": "integer", "minimum": 5, "exclusiveMinimum": 2}`, f64(5), nil, "1", ""},
		{"fractional integer bounds", `{"type": "integer", "minimum": 0.5, "maximum": 9.5}`, f64(1), f64(9), "1", ""},
		{"multipleOf", `{"type": "number", "multipleOf": 0.5}`, nil, nil, "0.5", ""},
		{"multipleOf from a multiple", `{"type": "number", "multipleOf": 0.1, "minimum": 0.3}`, f64(0.3), nil, "0.1", ""},
		{"whole multipleOf moves the minimum", `{"type": "integer", "multipleOf": 5, "minimum": 3}`, f64(5), nil, "5", ""},
		{"fractional multipleOf off the minimum", `{"type": "number", "multipleOf": 0.25, "minimum": 0.1}`, f64(0.1), nil, "any", "multiple of 0.25"},
		{"fractional multipleOf of an integer", `{"type": "integer", "multipleOf": 0.5}`, nil, nil, "1", "multiple of 0.5"},
		{"draft-04 exclusive", `{"type": "number", "minimum": 0, "exclusiveMinimum": true}`, nil, nil, "any", "greater than 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := Build(oneProp(tt.schema), nil).Root.Fields[0]
			if !reflect.DeepEqual(f.Minimum, tt.min) || !reflect.DeepEqual(f.Maximum, tt.max) {
				t.Errorf("got bounds %v..%v, want %v..%v", ptrText(f.Minimum), ptrText(f.Maximum), ptrText(tt.min), ptrText(tt.max))
			}
			if f.Step != tt.step || f.Hint != tt.hint {
				t.Errorf("got step %q hint %q, want %q %q", f.Step, f.Hint, tt.step, tt.hint)
			}
		})
	}
}

func ptrText(f *float64) string {
	if f == nil {
		return "nil"
	}
	return strconv.FormatFloat(*f, 'g', -1, 64)
}

func TestFormStringConstraintsAndArrays(t *testing.T) {
	t.Parallel()
	m := Build(json.RawMessage(`{
		"type": "object",
		"properties": {
			"code": {"type": "string", "pattern": "^[A-Z]{3}$", "minLength": 3, "maxLength": 3, "default": "ABC", "title": "Ticket code", "description": "Three letters."},
			"tags": {"type": "array", "items": {"type": "string", "title": "Tag"}, "minItems": 1, "maxItems": 3, "uniqueItems": true},
			"one": {"type": "array", "items": {"type": "integer"}, "minItems": 1},
			"few": {"type": "array", "items": {"type": "integer"}, "maxItems": 1}
		}
	}`), json.RawMessage(`{"tags": ["a", "b"]}`))
	code := fieldAt(t, m, "/code")
	if code.Pattern != "^[A-Z]{3}$" || *code.MinLength != 3 || *code.MaxLength != 3 || code.Default != "ABC" || code.Label != "Ticket code" || code.Help != "Three letters." {
		t.Errorf("got %+v, want the pattern, lengths, default, title and description", code)
	}
	tags := fieldAt(t, m, "/tags")
	if tags.Hint != "1 to 3 items; no duplicates" || *tags.MinItems != 1 || *tags.MaxItems != 3 {
		t.Errorf("got hint %q, want %q", tags.Hint, "1 to 3 items; no duplicates")
	}
	if len(tags.Fields) != 2 || tags.Fields[1].Label != "Tag 2" || tags.Fields[1].Pointer != "/tags/1" || tags.Fields[1].Value != "b" || !tags.Fields[1].Required {
		t.Errorf("got items %+v, want two required items labelled Tag N", tags.Fields)
	}
	if tags.Item == nil || tags.Item.Pointer != "/tags/-" || tags.Item.Label != "Tag 3" || tags.Item.Set {
		t.Errorf("got item template %+v, want an unset Tag 3 at /tags/-", tags.Item)
	}
	if got := fieldAt(t, m, "/one").Hint; got != "at least 1 item" {
		t.Errorf("got hint %q, want %q", got, "at least 1 item")
	}
	if got := fieldAt(t, m, "/few").Hint; got != "at most 1 item" {
		t.Errorf("got hint %q, want %q", got, "at most 1 item")
	}
}

func TestFormOrder(t *testing.T) {
	t.Parallel()
	m := Build(json.RawMessage(`{
		"type": "object",
		"properties": {
			"zeta": {"type": "string"}, "alpha": {"type": "string"}, "mid": {"type": "string"},
			"beta": {"type": "string"}, "omega": {"type": "string"},
			"opts": {"type": "object", "properties": {"y": {"type": "string"}, "x": {"type": "string"}, "w": {"type": "string"}}, "required": ["y"]}
		},
		"required": ["omega", "mid", "unknown"]
	}`), nil)
	var names []string
	var required []bool
	for _, f := range m.Root.Fields {
		names = append(names, f.Name)
		required = append(required, f.Required)
	}
	if got, want := strings.Join(names, ","), "omega,mid,alpha,beta,opts,zeta"; got != want {
		t.Errorf("got order %s, want %s", got, want)
	}
	if want := []bool{true, true, false, false, false, false}; !slices.Equal(required, want) {
		t.Errorf("got required %v, want %v", required, want)
	}
	var nested []string
	for _, f := range fieldAt(t, m, "/opts").Fields {
		nested = append(nested, f.Name)
	}
	if got, want := strings.Join(nested, ","), "y,w,x"; got != want {
		t.Errorf("got nested order %s, want %s", got, want)
	}
}

func TestFormRefs(t *testing.T) {
	t.Parallel()
	m := Build(json.RawMessage(`{
		"type": "object",
		"properties": {
			"a": {"$ref": "#/$defs/Point", "description": "Where."},
			"b": {"$ref": "#/definitions/Point"},
			"node": {"$ref": "#/$defs/Node"},
			"self": {"$ref": "#"},
			"chain": {"$ref": "#/$defs/A"}
		},
		"$defs": {
			"Point": {"type": "object", "title": "Point", "properties": {"x": {"type": "number"}, "y": {"type": "number"}}, "required": ["x", "y"]},
			"Node": {"type": "object", "properties": {"name": {"type": "string"}, "next": {"$ref": "#/$defs/Node"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}},
			"A": {"$ref": "#/$defs/B"},
			"B": {"$ref": "#/$defs/A"}
		},
		"definitions": {"Point": {"type": "object", "properties": {"z": {"type": "integer"}}}}
	}`), nil)
	tests := []struct {
		ptr, kind, label, help, hint string
	}{
		{"/a", "object", "Point", "Where.", ""},
		{"/a/x", "number", "x", "", ""},
		{"/b", "object", "b", "", ""},
		{"/b/z", "integer", "z", "", ""},
		{"/node", "object", "node", "", ""},
		{"/node/name", "string", "name", "", ""},
		{"/node/next", "json", "next", "", "a recursive definition"},
		{"/node/kids", "json", "kids", "", "items: a recursive definition"},
		{"/self", "json", "self", "", "a recursive definition"},
		{"/chain", "json", "chain", "", "no type: any JSON value is allowed"},
	}
	for _, tt := range tests {
		f := fieldAt(t, m, tt.ptr)
		if f.Kind != tt.kind || f.Label != tt.label || f.Help != tt.help || f.Hint != tt.hint {
			t.Errorf("%s: got kind %q label %q help %q hint %q, want %q %q %q %q", tt.ptr, f.Kind, f.Label, f.Help, f.Hint, tt.kind, tt.label, tt.help, tt.hint)
		}
	}
}

func TestFormDepthLimit(t *testing.T) {
	t.Parallel()
	m := Build(formTool(t, "deep").InputSchema, nil)
	var depth int
	var last Field
	walkFields(m.Root, func(f Field) {
		if d := strings.Count(f.Pointer, "/"); d > depth {
			depth, last = d, f
		}
	})
	if depth != schema.MaxParamDepth+1 || last.Kind != "json" || !strings.Contains(last.Hint, "nested more than 8") {
		t.Errorf("got deepest field %q (depth %d) of kind %q hint %q, want a JSON sub-editor at depth %d", last.Pointer, depth, last.Kind, last.Hint, schema.MaxParamDepth+1)
	}
}

func TestFormValues(t *testing.T) {
	t.Parallel()
	schema := json.RawMessage(`{
		"type": "object",
		"properties": {
			"s": {"type": "string", "default": "dflt"},
			"n": {"type": "number", "default": 1.5},
			"i": {"type": "integer"},
			"b": {"type": "boolean", "default": false},
			"e": {"enum": ["x", 1], "default": 1},
			"day": {"type": "string", "format": "date"},
			"mail": {"type": "string", "format": "email"},
			"o": {"type": "object", "properties": {"a": {"type": "string"}}, "default": {"a": "z"}},
			"list": {"type": "array", "items": {"type": "integer"}},
			"any": {}
		},
		"required": ["s"]
	}`)
	tests := []struct {
		name, values string
		ptr          string
		kind, value  string
		set          bool
		input        string
	}{
		{"unset string shows no default", `{}`, "/s", "string", "", false, "text"},
		{"string", `{"s": "hello"}`, "/s", "string", "hello", true, "text"},
		{"empty string is set", `{"s": ""}`, "/s", "string", "", true, "text"},
		{"line breaks need a textarea", `{"s": "a\nb"}`, "/s", "string", "a\nb", true, "textarea"},
		{"number keeps its text", `{"n": 1.50}`, "/n", "number", "1.50", true, ""},
		{"integer", `{"i": 12345678901234567890}`, "/i", "integer", "12345678901234567890", true, ""},
		{"fraction in an integer stays visible", `{"i": 2.5}`, "/i", "integer", "2.5", true, ""},
		{"boolean", `{"b": true}`, "/b", "boolean", "true", true, ""},
		{"unset boolean", `{}`, "/b", "boolean", "", false, ""},
		{"enum by value", `{"e": 1.0}`, "/e", "enum", "1", true, ""},
		{"date", `{"day": "2025-02-03"}`, "/day", "string", "2025-02-03", true, "date"},
		{"a date the browser would empty", `{"day": "tomorrow"}`, "/day", "string", "tomorrow", true, "text"},
		{"email with spaces the browser would trim", `{"mail": " a@b.c"}`, "/mail", "string", " a@b.c", true, "text"},
		{"object", `{"o": {"a": "q"}}`, "/o/a", "string", "q", true, "text"},
		{"array items", `{"list": [1, 2]}`, "/list/1", "integer", "2", true, ""},
		{"any value", `{"any": {"k": [1, "two"]}}`, "/any", "json", "{\n  \"k\": [\n    1,\n    \"two\"\n  ]\n}", true, ""},
		// Values the form cannot show exactly become JSON sub-editors.
		{"number for a string", `{"s": 5}`, "/s", "json", "5", true, ""},
		{"string for a number", `{"n": "5"}`, "/n", "json", `"5"`, true, ""},
		{"null", `{"s": null}`, "/s", "json", "null", true, ""},
		{"string for a boolean", `{"b": "yes"}`, "/b", "json", `"yes"`, true, ""},
		{"not a choice", `{"e": "y"}`, "/e", "json", `"y"`, true, ""},
		{"array for an object", `{"o": []}`, "/o", "json", "[]", true, ""},
		{"undeclared property", `{"o": {"a": "q", "extra": 1}}`, "/o", "json", "{\n  \"a\": \"q\",\n  \"extra\": 1\n}", true, ""},
		{"item of the wrong type", `{"list": [1, "x"]}`, "/list", "json", "[\n  1,\n  \"x\"\n]", true, ""},
		{"object for an array", `{"list": {}}`, "/list", "json", "{}", true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := Build(schema, json.RawMessage(tt.values))
			if m.JSONOnly {
				t.Fatalf("got JSONOnly (%q), want a form", m.Root.Hint)
			}
			f := fieldAt(t, m, tt.ptr)
			if f.Kind != tt.kind || f.Value != tt.value || f.Set != tt.set || f.Input != tt.input {
				t.Errorf("got kind %q value %q set %v input %q, want %q %q %v %q", f.Kind, f.Value, f.Set, f.Input, tt.kind, tt.value, tt.set, tt.input)
			}
			if tt.kind == "json" && !slices.Contains(m.Unsupported, tt.ptr+": "+f.Hint) {
				t.Errorf("got Unsupported %q, want it to name %s", m.Unsupported, tt.ptr)
			}
		})
	}

	m := Build(schema, nil)
	for ptr, want := range map[string]string{"/s": "dflt", "/n": "1.5", "/b": "false", "/e": "1", "/o": `{"a":"z"}`, "/i": ""} {
		if got := fieldAt(t, m, ptr).Default; got != want {
			t.Errorf("%s: got default %q, want %q", ptr, got, want)
		}
	}
	walkFields(m.Root, func(f Field) {
		if f.Set || f.Value != "" {
			t.Errorf("%s: got set %v value %q without arguments, want unset and empty (defaults are not values)", f.Pointer, f.Set, f.Value)
		}
	})
}

func TestFormJSONOnly(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, schema, values string
		hint, value          string
	}{
		{"root oneOf", `{"oneOf": [{"type": "object"}, {"type": "object"}]}`, `{"a": 1}`, "oneOf: one of several schemas", "{\n  \"a\": 1\n}"},
		{"root patternProperties", `{"type": "object", "patternProperties": {"^x": {}}}`, ``, "an object with free-form properties", ""},
		{"root string", `{"type": "string"}`, ``, "the arguments are of type string, not an object", ""},
		{"schema not JSON", `{`, ``, "the input schema is not a JSON object", ""},
		{"schema not an object", `[]`, ``, "the input schema is not a JSON object", ""},
		{"arguments not JSON", `{"type": "object"}`, `{"a":`, "the arguments are not valid JSON", `{"a":`},
		{"arguments not an object", `{"type": "object"}`, `[1]`, "the arguments are not a JSON object", "[\n  1\n]"},
		{"undeclared arguments", `{"type": "object", "properties": {"a": {"type": "string"}}}`, `{"a": "x", "b": 1}`, `holds properties the schema does not declare: "b"`, "{\n  \"a\": \"x\",\n  \"b\": 1\n}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := Build(json.RawMessage(tt.schema), json.RawMessage(tt.values))
			if !m.JSONOnly || m.Root.Kind != "json" || m.Root.Hint != tt.hint || m.Root.Value != tt.value {
				t.Errorf("got JSONOnly %v kind %q hint %q value %q, want true json %q %q", m.JSONOnly, m.Root.Kind, m.Root.Hint, m.Root.Value, tt.hint, tt.value)
			}
			if want := []string{"arguments: " + tt.hint}; !slices.Equal(m.Unsupported, want) {
				t.Errorf("got Unsupported %q, want %q", m.Unsupported, want)
			}
		})
	}
	// A schema without properties is a tool without arguments, not a JSON editor.
	for _, s := range []string{`{"type": "object"}`, `{}`, `{"type": "object", "properties": {}}`, `{"type": "object", "additionalProperties": false}`} {
		if m := Build(json.RawMessage(s), nil); m.JSONOnly || len(m.Root.Fields) != 0 || m.Root.Label != "Arguments" {
			t.Errorf("%s: got JSONOnly %v with %d fields, label %q, want an empty form labelled Arguments", s, m.JSONOnly, len(m.Root.Fields), m.Root.Label)
		}
	}
}

func TestFieldName(t *testing.T) {
	t.Parallel()
	for ptr, want := range map[string]string{"": "arg", "/a": "arg/a", "/a/0/b": "arg/a/0/b", "/a~1b": "arg/a~1b"} {
		if got := FieldName(ptr); got != want {
			t.Errorf("FieldName(%q) = %q, want %q", ptr, got, want)
		}
	}
}

// decodeSchema has one field of each kind, nested objects and arrays.
const decodeSchema = `{
	"type": "object",
	"properties": {
		"s": {"type": "string"},
		"rs": {"type": "string"},
		"n": {"type": "number"},
		"i": {"type": "integer"},
		"b": {"type": "boolean"},
		"e": {"enum": ["a", 1, true, "1"]},
		"j": {"type": ["string", "object"]},
		"o": {"type": "object", "properties": {"x": {"type": "string"}, "need": {"type": "object", "properties": {"y": {"type": "string"}}}}, "required": ["need"]},
		"ro": {"type": "object", "properties": {"x": {"type": "string"}}},
		"strs": {"type": "array", "items": {"type": "string"}},
		"nums": {"type": "array", "items": {"type": "integer"}},
		"objs": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}}},
		"grid": {"type": "array", "items": {"type": "array", "items": {"type": "boolean"}}}
	},
	"required": ["rs", "ro"]
}`

func TestDecodeForm(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		form url.Values
		want string
		errs map[string]string
	}{
		{"nothing", url.Values{}, `{"ro": {}}`, nil},
		{"empty inputs are left out, required or not", url.Values{"arg/s": {""}, "arg/rs": {""}, "arg/n": {" "}, "arg/b": {""}, "arg/e": {""}, "arg/j": {""}, "arg/o/x": {""}, "arg/o/need/y": {""}}, `{"ro": {}}`, nil},
		{"string as typed", url.Values{"arg/s": {"  a b  "}, "arg/rs": {"x"}}, `{"s": "  a b  ", "rs": "x", "ro": {}}`, nil},
		{"textarea line breaks", url.Values{"arg/s": {"a\r\nb"}}, `{"s": "a\nb", "ro": {}}`, nil},
		{"numbers", url.Values{"arg/n": {" 1.50 "}, "arg/i": {"42"}}, `{"n": 1.5, "i": 42, "ro": {}}`, nil},
		{"numbers as a browser may send them", url.Values{"arg/n": {".5"}, "arg/i": {"1e3"}}, `{"n": 0.5, "i": 1000, "ro": {}}`, nil},
		{"signs and trailing dots", url.Values{"arg/n": {"+2."}, "arg/i": {"-7"}}, `{"n": 2, "i": -7, "ro": {}}`, nil},
		{"big integers keep their digits", url.Values{"arg/i": {"12345678901234567890"}}, `{"i": 12345678901234567890, "ro": {}}`, nil},
		{"whole number written as a fraction", url.Values{"arg/i": {"3.0"}}, `{"i": 3, "ro": {}}`, nil},
		{"booleans", url.Values{"arg/b": {"false"}}, `{"b": false, "ro": {}}`, nil},
		{"enum by text", url.Values{"arg/e": {"1"}}, `{"e": 1, "ro": {}}`, nil},
		{"enum string that reads like a number", url.Values{"arg/e": {`"1"`}}, `{"e": "1", "ro": {}}`, nil},
		{"enum by exact JSON", url.Values{"arg/e": {`"a"`}}, `{"e": "a", "ro": {}}`, nil},
		{"JSON sub-editor", url.Values{"arg/j": {`{"k": [1, 2.50]}`}}, `{"j": {"k": [1, 2.50]}, "ro": {}}`, nil},
		{"JSON marker on a plain field", url.Values{"arg/s": {"5"}, JSONKey: {"/s"}}, `{"s": 5, "ro": {}}`, nil},
		{"JSON marker on a required object", url.Values{"arg/o/need": {`[]`}, "arg/o/x": {"q"}, JSONKey: {"/o/need"}}, `{"o": {"x": "q", "need": []}, "ro": {}}`, nil},
		{"optional object with something set", url.Values{"arg/o/x": {"q"}}, `{"o": {"x": "q", "need": {}}, "ro": {}}`, nil},
		{"nested required object set", url.Values{"arg/o/need/y": {"v"}}, `{"o": {"need": {"y": "v"}}, "ro": {}}`, nil},
		{"array count marks an empty array", url.Values{"arg/strs": {"0"}}, `{"strs": [], "ro": {}}`, nil},
		{"array items in order, empty strings kept", url.Values{"arg/strs": {"3"}, "arg/strs/0": {"a"}, "arg/strs/1": {""}, "arg/strs/2": {"c"}}, `{"strs": ["a", "", "c"], "ro": {}}`, nil},
		{"items without a count", url.Values{"arg/nums/1": {"2"}, "arg/nums/0": {"1"}}, `{"nums": [1, 2], "ro": {}}`, nil},
		{"objects with nothing set stay items", url.Values{"arg/objs": {"2"}, "arg/objs/1/k": {"v"}}, `{"objs": [{}, {"k": "v"}], "ro": {}}`, nil},
		{"arrays of arrays", url.Values{"arg/grid": {"2"}, "arg/grid/0": {"1"}, "arg/grid/0/0": {"true"}, "arg/grid/1": {"0"}}, `{"grid": [[true], []], "ro": {}}`, nil},
		{"an inner array that sends nothing is still an item", url.Values{"arg/grid": {"2"}, "arg/grid/0/0": {"true"}}, `{"grid": [[true], []], "ro": {}}`, nil},
		{"a bad count is only a marker", url.Values{"arg/strs": {"x"}}, `{"strs": [], "ro": {}}`, nil},
		{"every problem at once", url.Values{
			"arg/n": {"abc"}, "arg/i": {"1.5"}, "arg/b": {"yes"}, "arg/e": {"b"}, "arg/j": {"{"},
			"arg/nums": {"2"}, "arg/nums/0": {""}, "arg/nums/1": {"x"}, "arg/o/x": {"ok"},
		}, `{"i": 1.5, "o": {"x": "ok", "need": {}}, "nums": [], "ro": {}}`, map[string]string{
			"/n": "is not a number", "/i": "is not a whole number", "/b": "must be true or false",
			"/e": "is not one of the choices", "/j": "is not valid JSON: it ends too early",
			"/nums/0": "is required", "/nums/1": "is not a number",
		}},
		{"infinite", url.Values{"arg/n": {"1e999"}}, `{"ro": {}}`, map[string]string{"/n": "is out of range"}},
		{"too many items", url.Values{"arg/strs": {"10001"}}, `{"ro": {}}`, map[string]string{"/strs": "has too many items (the form takes 10000 in all)"}},
		{"too many items in all", url.Values{"arg/grid": {"2"}, "arg/grid/0": {"9999"}}, `{"grid": [[]], "ro": {}}`, map[string]string{"/grid/0": "has too many items (the form takes 10000 in all)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, errs := Decode(json.RawMessage(decodeSchema), tt.form)
			if !sameFormArgs(t, got, []byte(tt.want)) {
				t.Errorf("got %s, want %s", got, tt.want)
			}
			gotErrs := map[string]string{}
			if errs != nil {
				for _, f := range errs.Fields {
					gotErrs[f.Field] = f.Message
				}
				if len(errs.Fields) != len(gotErrs) {
					t.Errorf("got %d errors for %d pointers, want one each: %v", len(errs.Fields), len(gotErrs), errs)
				}
			}
			if tt.errs == nil {
				tt.errs = map[string]string{}
			}
			if !reflect.DeepEqual(gotErrs, tt.errs) {
				t.Errorf("got errors %v, want %v", gotErrs, tt.errs)
			}
		})
	}
}

func TestDecodeFormKeepsPropertyOrder(t *testing.T) {
	t.Parallel()
	got, errs := Decode(json.RawMessage(`{"type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "string"}, "c": {"type": "string"}}, "required": ["c"]}`),
		url.Values{"arg/a": {"1"}, "arg/b": {"2"}, "arg/c": {"3"}})
	if errs != nil {
		t.Fatal(errs)
	}
	if want := `{"c":"3","a":"1","b":"2"}`; string(got) != want {
		t.Errorf("got %s, want %s (the form's order)", got, want)
	}
}

func TestDecodeFormJSONOnly(t *testing.T) {
	t.Parallel()
	rootOneOf := json.RawMessage(`{"oneOf": [{"type": "object"}, {"type": "object"}]}`)
	tests := []struct {
		name   string
		schema json.RawMessage
		form   url.Values
		want   string
		err    string
	}{
		{"JSON editor", rootOneOf, url.Values{"arg": {`{"b": [1]}`}}, `{"b": [1]}`, ""},
		{"empty editor", rootOneOf, url.Values{}, `{}`, ""},
		{"not an object", rootOneOf, url.Values{"arg": {`[1]`}}, `{}`, "must be a JSON object"},
		{"not JSON", rootOneOf, url.Values{"arg": {`{`}}, `{}`, "is not valid JSON: it ends too early"},
		{"root marker on a form schema", json.RawMessage(`{"type": "object", "properties": {"a": {"type": "string"}}}`), url.Values{"arg": {`{"a": "x", "z": 1}`}, JSONKey: {""}, "arg/a": {"ignored"}}, `{"a": "x", "z": 1}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, errs := Decode(tt.schema, tt.form)
			if !sameFormArgs(t, got, []byte(tt.want)) {
				t.Errorf("got %s, want %s", got, tt.want)
			}
			if gotErr := errs.For(""); gotErr != tt.err || (tt.err == "") != (errs == nil) {
				t.Errorf("got error %v, want %q", errs, tt.err)
			}
		})
	}
}

func TestEditArray(t *testing.T) {
	t.Parallel()
	schema := json.RawMessage(`{
		"type": "object",
		"properties": {
			"tags": {"type": "array", "items": {"type": "string"}},
			"nums": {"type": "array", "items": {"type": "integer", "minimum": 3}},
			"ratios": {"type": "array", "items": {"type": "number", "maximum": -1}},
			"picks": {"type": "array", "items": {"enum": ["x", "y"], "default": "y"}},
			"first": {"type": "array", "items": {"enum": [2, "x"]}},
			"flags": {"type": "array", "items": {"type": "boolean"}},
			"dflt": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}, "default": {"a": "new"}}},
			"opts": {"type": "object", "properties": {"list": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}}}}},
			"grid": {"type": "array", "items": {"type": "array", "items": {"type": "string"}}},
			"free": {"type": "array"},
			"s": {"type": "string"}
		}
	}`)
	tests := []struct {
		name, values, op, ptr string
		want                  string
		err                   string
	}{
		{"add to an absent array", ``, "add", "/tags", `{"tags": [""]}`, ""},
		{"add appends", `{"tags": ["a"]}`, "add", "/tags", `{"tags": ["a", ""]}`, ""},
		{"add keeps other values", `{"s": "x", "tags": []}`, "add", "/tags", `{"s": "x", "tags": [""]}`, ""},
		{"integer at its minimum", `{}`, "add", "/nums", `{"nums": [3]}`, ""},
		{"number at its maximum", `{}`, "add", "/ratios", `{"ratios": [-1]}`, ""},
		{"enum default", `{}`, "add", "/picks", `{"picks": ["y"]}`, ""},
		{"first choice", `{}`, "add", "/first", `{"first": [2]}`, ""},
		{"boolean", `{}`, "add", "/flags", `{"flags": [false]}`, ""},
		{"item default", `{}`, "add", "/dflt", `{"dflt": [{"a": "new"}]}`, ""},
		{"creates objects above", `{}`, "add", "/opts/list", `{"opts": {"list": [{}]}}`, ""},
		{"inner array", `{"grid": [["a"], []]}`, "add", "/grid/1", `{"grid": [["a"], [""]]}`, ""},
		{"outer array", `{"grid": [["a"]]}`, "add", "/grid", `{"grid": [["a"], []]}`, ""},
		{"remove", `{"tags": ["a", "b", "c"]}`, "remove", "/tags/1", `{"tags": ["a", "c"]}`, ""},
		{"remove the last leaves []", `{"tags": ["a"]}`, "remove", "/tags/0", `{"tags": []}`, ""},
		{"remove nested", `{"opts": {"list": [{"k": "1"}, {"k": "2"}]}}`, "remove", "/opts/list/0", `{"opts": {"list": [{"k": "2"}]}}`, ""},
		{"remove an inner item", `{"grid": [["a", "b"]]}`, "remove", "/grid/0/0", `{"grid": [["b"]]}`, ""},
		{"not an array", `{}`, "add", "/s", "", `schema: edit array: no array at "/s"`},
		{"unknown pointer", `{}`, "add", "/nope", "", `schema: edit array: no array at "/nope"`},
		{"the root", `{}`, "add", "", "", `schema: edit array: no array at ""`},
		{"a JSON sub-editor", `{}`, "add", "/free", "", `schema: edit array: no array at "/free"`},
		{"out of range", `{"tags": ["a"]}`, "remove", "/tags/1", "", `schema: edit array: no array item at "/tags/1"`},
		{"not an index", `{"tags": ["a"]}`, "remove", "/tags/-", "", `schema: edit array: no array item at "/tags/-"`},
		{"not canonical", `{"tags": ["a"]}`, "remove", "/tags/00", "", `schema: edit array: no array item at "/tags/00"`},
		{"remove from a non-array", `{"s": "x"}`, "remove", "/s/0", "", `schema: edit array: no array item at "/s/0"`},
		{"remove without a pointer", `{}`, "remove", "", "", `schema: edit array: no array item at ""`},
		{"unknown op", `{}`, "move", "/tags", "", `schema: edit array: unknown operation "move"`},
		{"values not an object", `[1]`, "add", "/tags", "", "schema: edit array: the arguments are not a JSON object"},
		{"values not JSON", `{`, "add", "/tags", "", "schema: edit array: arguments: unexpected EOF"},
		{"values the form cannot show", `{"zzz": 1}`, "add", "/tags", "", "schema: edit array: the form cannot express these arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := EditArray(schema, json.RawMessage(tt.values), tt.op, tt.ptr)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Errorf("got %s, %v, want error %q", got, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want %s", err, tt.want)
			}
			if !sameFormArgs(t, got, []byte(tt.want)) {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

// The form round trip: for every schema in the corpus, the example call goes
// into the form, comes back the way a browser submits it, and decodes to the
// same arguments. Adding an item and decoding again keeps the round trip.
func TestFormRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tl := range formCorpus(t) {
		t.Run(tl.Name, func(t *testing.T) {
			t.Parallel()
			example := formJSON(t, schema.ExampleArguments(tl.InputSchema))
			m := Build(tl.InputSchema, example)
			got, errs := Decode(tl.InputSchema, formSubmission(m))
			if errs != nil {
				t.Fatalf("got errors %v for %s", errs, example)
			}
			if !sameFormArgs(t, got, example) {
				t.Fatalf("got %s, want %s", got, example)
			}
			// Every array can grow by one item and still round-trip.
			walkFields(m.Root, func(f Field) {
				if f.Kind != "array" {
					return
				}
				edited, err := EditArray(tl.InputSchema, example, "add", f.Pointer)
				if err != nil {
					t.Errorf("add to %s: %v", f.Pointer, err)
					return
				}
				em := Build(tl.InputSchema, edited)
				got, errs := Decode(tl.InputSchema, formSubmission(em))
				if errs != nil || !sameFormArgs(t, got, edited) {
					t.Errorf("after adding to %s: got %s (%v), want %s", f.Pointer, got, errs, edited)
				}
				// The new item is a form too, unless the items already were JSON.
				if len(em.Unsupported) > len(m.Unsupported) {
					t.Errorf("after adding to %s: got JSON sub-editors %q, want those of before %q", f.Pointer, em.Unsupported, m.Unsupported)
				}
			})
		})
	}
}

// The corpus exercises what the form is meant to handle, so a change that
// quietly turns it all into JSON editors fails here.
func TestFormCorpusCoverage(t *testing.T) {
	t.Parallel()
	kinds := map[string]int{}
	inputs := map[string]int{}
	jsonOnly := 0
	for _, tl := range formCorpus(t) {
		m := Build(tl.InputSchema, formJSON(t, schema.ExampleArguments(tl.InputSchema)))
		if m.JSONOnly {
			jsonOnly++
		}
		walkFields(m.Root, func(f Field) {
			kinds[f.Kind]++
			if f.Input != "" {
				inputs[f.Input]++
			}
		})
	}
	for _, k := range []string{"string", "number", "integer", "boolean", "enum", "object", "array", "choice", "map", "json"} {
		if kinds[k] == 0 {
			t.Errorf("got no field of kind %s in the corpus, want some (kinds %v)", k, kinds)
		}
	}
	for _, in := range []string{"text", "email", "url", "date", "password", "textarea"} {
		if inputs[in] == 0 {
			t.Errorf("got no %s input in the corpus, want some (inputs %v)", in, inputs)
		}
	}
	if jsonOnly != 1 {
		t.Errorf("got %d JSON-only schemas, want 1 (root-oneof)", jsonOnly)
	}
}

// An optional string whose value is "" cannot be told from an empty input,
// which means "not set": the form leaves it out. This is the one value the
// form does not keep.
func TestFormEmptyOptionalString(t *testing.T) {
	t.Parallel()
	schema := json.RawMessage(`{"type": "object", "properties": {"prefix": {"type": "string", "default": ""}, "name": {"type": "string"}}, "required": ["name"]}`)
	got, errs := Decode(schema, formSubmission(Build(schema, json.RawMessage(`{"prefix": "", "name": ""}`))))
	if errs != nil || string(got) != `{}` {
		t.Errorf("got %s, %v, want {} (empty inputs are not set)", got, errs)
	}
}

// A consolidated tool's schema (services/builtin): the operation select is marked, and
// each parameter knows the operations it belongs to; another schema's fields are not.
func TestOperationFields(t *testing.T) {
	s := `{"type":"object","properties":{"operation":{"type":"string","enum":["read","write"]},"path":{"type":"string"},
		"content":{"type":"string"},"free":{"type":"string"}},"required":["operation"],
		"allOf":[{"if":{"properties":{"operation":{"const":"read"}}},"then":{"properties":{"path":{}}}},
		         {"if":{"properties":{"operation":{"const":"write"}}},"then":{"required":["path"],"properties":{"path":{},"content":{}}}}]}`
	m := Build([]byte(s), nil)
	got := map[string]string{}
	for _, f := range m.Root.Fields {
		got[f.Name] = strings.Join(f.Operations, " ")
		if f.OperationSelect != (f.Name == "operation") {
			t.Errorf("%s: OperationSelect %v", f.Name, f.OperationSelect)
		}
	}
	if got["path"] != "read write" || got["content"] != "write" || got["free"] != "" {
		t.Fatalf("operations: %v", got)
	}
	plain := Build([]byte(`{"type":"object","properties":{"operation":{"type":"string"},"x":{"type":"string"}}}`), nil)
	for _, f := range plain.Root.Fields {
		if f.OperationSelect || len(f.Operations) > 0 {
			t.Fatalf("a schema without an operation enum: %+v", f)
		}
	}
}

// Properties that refer to one definition each build it in full: a few kilobytes of
// schema nested a few levels would stand for millions of fields. Past MaxFields the
// arguments are edited as JSON, and building stops there.
func TestFieldBudget(t *testing.T) {
	defs := map[string]any{}
	for level := 1; level <= 8; level++ {
		props := map[string]any{}
		for i := range 10 {
			if level == 8 {
				props[fmt.Sprintf("p%d", i)] = map[string]any{"type": "string"}
			} else {
				props[fmt.Sprintf("p%d", i)] = map[string]any{"$ref": fmt.Sprintf("#/$defs/d%d", level+1)}
			}
		}
		defs[fmt.Sprintf("d%d", level)] = map[string]any{"type": "object", "properties": props}
	}
	s, _ := json.Marshal(map[string]any{"type": "object", "$defs": defs,
		"properties": map[string]any{"top": map[string]any{"$ref": "#/$defs/d1"}}})
	m := Build(s, json.RawMessage(`{"top":{"p0":{}}}`))
	if !m.JSONOnly || !strings.Contains(m.Root.Hint, "more than 2000 fields") || !strings.Contains(m.Root.Value, `"p0"`) {
		t.Fatalf("a schema of 10^8 fields: got JSON only %v, hint %q, value %q; want the arguments as JSON, saying why", m.JSONOnly, m.Root.Hint, m.Root.Value)
	}
	// A value that keeps the form small (null where the large object goes) does not
	// make it a form: a submission is read by the schema alone.
	nullable, _ := json.Marshal(map[string]any{"type": "object", "$defs": defs, "properties": map[string]any{
		"cfg": map[string]any{"anyOf": []any{map[string]any{"$ref": "#/$defs/d1"}, map[string]any{"type": "null"}}},
		"q":   map[string]any{"type": "string"}}})
	if m := Build(nullable, json.RawMessage(`{"cfg":null,"q":"hi"}`)); !m.JSONOnly {
		t.Fatal("a large schema with a null where its large object goes: a form, want JSON only as Decode reads it")
	}
	// A form just under the budget is still a form.
	small, _ := json.Marshal(map[string]any{"type": "object", "$defs": map[string]any{"d": map[string]any{"type": "object",
		"properties": map[string]any{"a": map[string]any{"type": "string"}, "b": map[string]any{"type": "number"}}}},
		"properties": map[string]any{"x": map[string]any{"$ref": "#/$defs/d"}, "y": map[string]any{"$ref": "#/$defs/d"}}})
	if m := Build(small, nil); m.JSONOnly {
		t.Fatalf("a small schema: JSON only (%s)", m.Root.Hint)
	}
}

// A map row without a key is read to see whether it is blank: what it reads counts
// against the form's bound too, or each such row of a map of maps could read the
// bound's worth of entries of its own.
func TestBlankMapRowsBounded(t *testing.T) {
	s := json.RawMessage(`{"type":"object","properties":{"m":{"type":"object","additionalProperties":{"type":"object","additionalProperties":{"type":"string"}}}}}`)
	form := url.Values{"arg/m": {"4"}, "arg/m/3" + KeySuffix: {"real"}, "arg/m/3": {"2000"}}
	for i := range 3 {
		form.Set(fmt.Sprintf("arg/m/%d", i), "3000")
	}
	_, errs := Decode(s, form)
	if errs == nil || !strings.Contains(errs.Error(), "too many entries") {
		t.Fatalf("rows without keys of 3 × 3,000 entries, then one of 2,000: got %v, want the form's bound of 10,000 entries to hold", errs)
	}
}

// A string with a carriage return is edited as JSON: a text box would send it back
// with every line break as CR LF, which reading the form makes LF.
func TestCarriageReturnKept(t *testing.T) {
	s := json.RawMessage(`{"type":"object","properties":{"body":{"type":"string"},"note":{"type":"string"}}}`)
	m := Build(s, json.RawMessage(`{"body":"a\r\nb","note":"c\nd"}`))
	if f := fieldAt(t, m, "/body"); f.Kind != "json" || f.Value != `"a\r\nb"` {
		t.Errorf("a string with CR: got kind %s value %q, want a JSON editor holding it", f.Kind, f.Value)
	}
	if f := fieldAt(t, m, "/note"); f.Kind != "string" || f.Value != "c\nd" {
		t.Errorf("a string with LF only: got kind %s value %q, want a text box", f.Kind, f.Value)
	}
}

// What JSON refuses of a number as people type it (a "+", leading zeros) is taken out
// as text: a long integer keeps every digit.
func TestNumbersAsTyped(t *testing.T) {
	s := json.RawMessage(`{"type":"object","properties":{"n":{"type":"number"},"i":{"type":"integer"}}}`)
	for typed, want := range map[string]string{"0123456789012345678901": "123456789012345678901", "+5": "5", "-007": "-7",
		"00.5": "0.5", ".5": "0.5", "5.": "5", "0": "0", "+0.25e2": "0.25e2", "0123456789012345678901.": "123456789012345678901"} {
		got, errs := Decode(s, url.Values{"arg/n": {typed}, "arg/i": {"0012345678901234567890123"}})
		var m map[string]json.Number
		if err := json.Unmarshal(got, &m); errs != nil || err != nil || m["n"].String() != want || m["i"].String() != "12345678901234567890123" {
			t.Errorf("%q: got %s %v, want n = %s", typed, got, errs, want)
		}
	}
}

// A submitted name with more segments than any field's path has is ignored before it
// is indexed: indexing every "/<n>" prefix of "arg/0/0/…" would hash the whole prefix
// at each segment, quadratic in the name's length.
func TestLongNameIgnored(t *testing.T) {
	t.Parallel()
	s := json.RawMessage(`{"type":"object","properties":{"xs":{"type":"array","items":{"type":"string"}}}}`)
	long := "arg/xs" + strings.Repeat("/0", 2_000)
	if last := lastIndexes(url.Values{long: {"x"}, "arg/xs/1": {"b"}}); len(last) != 1 || last["arg/xs"] != 2 {
		t.Errorf("indexes of a 2,000-segment name: got %d entries (/xs: %d), want only the short name's", len(last), last["arg/xs"])
	}
	// Decoding a 200,000-segment name returns (the test's own timeout is the guard) with
	// the name ignored, as any name that is no field's.
	done := make(chan struct{})
	var got json.RawMessage
	go func() {
		defer close(done)
		got, _ = Decode(s, url.Values{"arg/xs" + strings.Repeat("/0", 200_000): {"x"}, "arg/xs/0": {"a"}})
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		t.Fatal("Decode of a 200,000-segment name did not return within 5 minutes")
	}
	if !sameFormArgs(t, got, []byte(`{"xs": ["a"]}`)) {
		t.Errorf("got %s, want the long name ignored", got)
	}
}

// JSON typed into a sub-editor or the whole-arguments editor that holds a NUL, a lone
// surrogate or a key given twice is refused at that editor's pointer, saying where
// inside it, instead of reaching the database (a 500) or keeping the last key.
func TestJSONEditorsRefuseBadText(t *testing.T) {
	t.Parallel()
	s := json.RawMessage(`{"type":"object","properties":{"cfg":{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":true},"n":{"type":"string"}}}`)
	for _, tt := range []struct {
		name string
		form url.Values
		ptr  string
		want string
	}{
		{"NUL in a sub-editor", url.Values{"arg/cfg": {`{"a": "x\u0000y"}`}, JSONKey: {"/cfg"}}, "/cfg", `at /a: contains a NUL byte`},
		{"lone surrogate in a sub-editor", url.Values{"arg/cfg": {`{"b": "\ud800"}`}, JSONKey: {"/cfg"}}, "/cfg", `at /b: contains a lone UTF-16 surrogate`},
		{"duplicate key in a sub-editor", url.Values{"arg/cfg": {`{"a": "x", "a": "rm -rf /"}`}, JSONKey: {"/cfg"}}, "/cfg", `the key /a is given twice`},
		{"NUL in the arguments editor", url.Values{"arg": {`{"n": "\u0000"}`}, JSONKey: {""}}, "", `at /n: contains a NUL byte`},
		{"duplicate key in the arguments editor", url.Values{"arg": {`{"n": "a", "n": "b"}`}, JSONKey: {""}}, "", `the key /n is given twice`},
	} {
		_, errs := Decode(s, tt.form)
		if errs == nil || len(errs.Fields) != 1 || errs.Fields[0].Field != tt.ptr || !strings.HasPrefix(errs.Fields[0].Message, tt.want) {
			t.Errorf("%s: got %v, want one error at %q starting %q", tt.name, errs, tt.ptr, tt.want)
		}
	}
}
