// Package form is the test panel's form model: it turns a tool's input schema
// and argument values into fields for views/testform.templ (Form), reads a
// submitted form back into arguments (Decode) and applies the form's
// array edits (EditArray). It reads schemas through services/schema's walker
// and does no I/O.
package form

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strconv"

	"github.com/toolwarden/toolwarden/services/schema"
)

// The test form (issue #5) turns any tool's input schema into HTML inputs and
// the submitted inputs back into arguments. Form builds the model, Decode
// reads a submission, EditArray adds and removes array items (the form's
// "Add item"/"Remove" buttons post the form and the page re-renders it, so no
// script is needed).
//
// What the browser submits, and how Decode reads it:
//
//   - every input is named FieldName(pointer): "arg/path", "arg/filters/0/op";
//   - strings, numbers and integers are text inputs (or a textarea); an empty
//     input means "not set" and the property is left out, required or not,
//     so the server's validation reports "is required". Inside an array an
//     empty string is the item "" (items cannot be left out without moving
//     the others), and an empty number is an error;
//   - booleans and enums are a <select>: the empty option means "not set";
//     booleans submit "true" or "false", enums the Enum text of a choice,
//     which Decode maps back to the exact JSON (EnumJSON);
//   - an array that holds a value carries a hidden input named FieldName of
//     the array whose value is its item count, so that [] and arrays of empty
//     objects survive; without it the array is left out unless items were
//     submitted. Items keep their order; an item that cannot be read is
//     reported and left out, and all arrays together may hold at most
//     maxFormItems items;
//   - a JSON sub-editor (Kind "json") is a textarea holding JSON, plus a hidden
//     input named JSONKey whose value is its pointer, so Decode reads
//     it as JSON even where the schema alone would expect a plain input (a
//     value that does not fit the form is shown as JSON);
//   - an object is left out when none of its inputs is set, unless it is
//     required (then it is {}) or an array item (objects and arrays that are
//     items are always there); the root is always an object;
//   - a nullable field (type [X, "null"], anyOf [X, {"type": "null"}]) has a
//     checkbox named FieldName(path)+NullSuffix: checked, the value is null
//     and X's inputs are not read;
//   - a choice (Kind "choice": oneOf or anyOf of several schemas) has a select
//     named FieldName(path)+VariantSuffix holding the index of the chosen
//     variant; each variant has its own inputs, under the path
//     VariantPath(path, i), and only the chosen one's are read. When the
//     chosen variant is an object, its required constant properties (the
//     usual discriminator, {"kind": {"const": "circle"}}) are filled in;
//   - a map (Kind "map": an object whose properties are additionalProperties,
//     or one patternProperties pattern) has rows: row i's value has the path
//     "<map path>/<i>" and its key the input FieldName(row path)+KeySuffix,
//     and the map, when it holds a value, a hidden row count as arrays do.
//     A row whose key is empty and whose value is not set is skipped; any
//     other empty key, a key used twice or one its pattern refuses is
//     reported at the map's pointer ("row 2: ...") and the row left out. An
//     object with properties of its own and an additionalProperties schema
//     has such rows too (Field.Extra), under the path "<object path>/~more";
//
// Inputs are named by a field's Path, which is its Pointer except under a
// choice's variants and a map's rows (the key of a row is text the person is
// still typing; two variants may have the same properties). Errors are
// always reported at Pointers, which is what the server's validation names.
//
// BuildFrom re-renders a submitted form: what the arguments cannot hold (a
// map row whose key is empty or used twice, text that is not a number or not
// JSON, which variant was chosen while its inputs are still empty) is shown
// as it was typed, so nothing is lost when a submission has errors.
//
// Build never puts defaults into values: they are shown as Default (the page
// shows them as hints in the empty inputs), since a server applies its own defaults.

// JSONKey names the hidden inputs that mark JSON sub-editors: each one's
// value is the pointer of a field whose input holds JSON text. The pointer ""
// marks the whole arguments as one JSON editor named FieldName("").
const JSONKey = "_json"

// The suffixes of the inputs that are not values: a choice's variant select,
// a nullable field's null checkbox and a map row's key. Each starts with "~",
// which an escaped JSON pointer token never does unless followed by 0 or 1, so
// no property's input can be named like them.
const (
	VariantSuffix = "/~v"
	NullSuffix    = "/~null"
	KeySuffix     = "/~key"
	MoreSuffix    = "/~more"
)

// VariantPath is the path of the inputs of variant i of the choice at path.
func VariantPath(path string, i int) string {
	return path + VariantSuffix + strconv.Itoa(i)
}

// maxFormItems bounds the array items Decode reads in one form, whatever
// the submitted counts say, since nested counts multiply.
const maxFormItems = 10000

// Field is one input of the generated form, or a group (object) / list
// (array) of them.
type Field struct {
	// Pointer is the JSON pointer of the value in the arguments, "/a/0/b"; ""
	// is the root object. An array's Item template has the pointer "/a/-".
	Pointer string
	// Path names the field's inputs (FieldName(Path)): the Pointer, except
	// under a choice's variants (VariantPath) and in map rows ("<map path>/<i>").
	Path string
	// Name is the property name ("" for array items, map rows and the root).
	Name string
	// Label is the title, else the property name; array items are "Item N"
	// (or "<title> N" when the item schema has a title).
	Label string
	// Help is the description, as plain text.
	Help string
	// Kind is "string", "number", "integer", "boolean", "enum", "object",
	// "array", "choice" (oneOf/anyOf: a variant picker), "map" (key/value
	// rows) or "json" (a raw JSON sub-editor, for what a form cannot express).
	Kind string
	// Input is the HTML control for strings: "text", "email", "url", "date",
	// "password" or "textarea" (see stringInput for the rules). "date-time"
	// and "time" stay "text": the browser's datetime-local and time inputs
	// cannot hold the time zone offset those formats require.
	Input    string
	Required bool
	// Operations are the operations of a consolidated tool this top-level field is a
	// parameter of (none: all, or not such a tool); OperationSelect marks the field
	// that chooses the operation (markOperations).
	Operations      []string
	OperationSelect bool
	// Value is the current value as text for leaf inputs: strings as they
	// are, numbers as JSON text, booleans "true"/"false", enums their Enum
	// text, "" when unset; for Kind "json" the indented JSON text.
	Value string
	// Set says the arguments hold a value here.
	Set bool
	// Default is the schema's default as text, in the same form as Value
	// (compact JSON for objects, arrays and JSON sub-editors); "" if none.
	Default string
	// Enum lists the choices of Kind "enum" as text (a const is an enum of
	// one): strings as they are, other values as JSON, and a string that would
	// read like another choice (or the empty "not set" option) as JSON too.
	// EnumJSON is the parallel list of exact JSON values.
	Enum     []string
	EnumJSON []string
	// Pattern is the schema's pattern (ECMA-262, unanchored).
	Pattern              string
	MinLength, MaxLength *int
	// Minimum and Maximum are inclusive. For integers an exclusive bound is
	// folded into them (exclusiveMinimum 0 is Minimum 1), as is a minimum
	// that is no multiple of a whole multipleOf; other exclusive bounds
	// are only in Hint.
	Minimum, Maximum *float64
	// Step is "1" for integers, "any" for numbers, or multipleOf.
	Step string
	// Hint is a short human hint for constraints HTML cannot express
	// ("greater than 0", "3 to 10 items", "format: uuid"), and for Kind
	// "json" why the form cannot express this part.
	Hint string
	// Fields are an object's properties (required ones in the order of
	// "required", then the rest alphabetically) or an array's items.
	Fields []Field
	// Item is an array's template of one new item (what "Add item" adds).
	Item               *Field
	MinItems, MaxItems *int
	// Secret marks password-like strings: writeOnly, format "password", or a
	// name that holds credentials (secrets.LooksSecretName).
	Secret bool
	// Nullable says the schema also allows null (the form shows a "null"
	// checkbox); Null says the value is null (the checkbox is checked).
	Nullable, Null bool
	// Variants are a choice's schemas, each built at the choice's Pointer with
	// its own Path and labelled by its title, else by what tells it apart
	// (a constant property, its type and required properties). Chosen is the
	// index of the one in use: the first the value fits, or the one the
	// person picked.
	Variants []Field
	Chosen   int
	// Key is a map row's key as entered; KeyPattern the pattern keys must
	// match (propertyNames or the one patternProperties pattern); a map's
	// MinItems and MaxItems are its minProperties and maxProperties, and its
	// Item the template of a new row's value.
	Key        string
	KeyPattern string
	// Extra holds an object's properties beyond those it declares, when
	// additionalProperties is a schema: a map (Kind "map") at the object's
	// Pointer whose Path is the object's plus MoreSuffix. A key that names a
	// declared property is refused there (it has its own input).
	Extra *Field
}

// Model is the generated form of one input schema with its current values.
type Model struct {
	// Root is the arguments object; its Fields are the top-level inputs.
	Root Field
	// JSONOnly says the schema (or the current arguments) cannot be
	// expressed as a form at all; the page shows only the raw JSON editor.
	// Root.Hint then says why and Root.Value holds the arguments as JSON.
	JSONOnly bool
	// Unsupported lists the fields shown as raw JSON sub-editors and why, as
	// "<pointer>: <reason>" ("arguments: <reason>" when JSONOnly), for a notice.
	Unsupported []string
}

// FieldName is the form input name for a pointer: "arg" + pointer (e.g.
// "arg/a/0/b"); the root is "arg".
func FieldName(pointer string) string {
	return "arg" + pointer
}

// Build builds the model for inputSchema with the current argument values.
// values may be nil or empty; defaults are never filled in as values, they are
// shown as Default. Values the form cannot show exactly (a string where the
// schema wants a number, properties the schema does not declare) turn their
// field into a JSON sub-editor, so nothing is lost by going through the form.
func Build(inputSchema, values json.RawMessage) Model {
	return build(inputSchema, values, nil)
}

// BuildFrom is Build for a form that was submitted (values are what Decode
// made of it): where the values cannot hold what was entered, the form shows
// the submission as it was: map rows as typed (keys that are empty or used
// twice, and their values), the text of inputs that could not be read (not a
// number, not JSON), the variant each choice was set to, and the values of
// fields that were left out (the select of an enum in a refused map row).
func BuildFrom(inputSchema, values json.RawMessage, submitted url.Values) Model {
	return build(inputSchema, values, submitted)
}

func build(inputSchema, values json.RawMessage, sub url.Values) Model {
	root := Field{Label: "Arguments", Kind: "object", Required: true}
	var val any
	if present(values) {
		v, err := schema.Decode(values)
		if err != nil {
			root.Value = string(values)
			return jsonOnly(root, "the arguments are not valid JSON")
		}
		val = v
		root.Set = true
		if _, ok := v.(*schema.Object); !ok {
			return jsonOnly(rootJSON(root, val), "the arguments are not a JSON object")
		}
	}
	doc, err := schema.Decode(inputSchema)
	s, ok := doc.(*schema.Object)
	if err != nil || !ok {
		return jsonOnly(rootJSON(root, val), "the input schema is not a JSON object")
	}
	b := &former{root: doc, stack: map[string]bool{}, sub: sub}
	f := b.field(s, "", formPos{required: true, val: val, has: root.Set, item: -1})
	f.Nullable, f.Null = false, false // the arguments are an object, never null
	if f.Label == "" {
		f.Label = root.Label
	}
	reason := b.overBudget()
	if reason == "" && root.Set {
		// Also when only the values kept it small (a null where a large object
		// goes): Decode reads a submission by the schema alone.
		reason = schemaTooBig(doc, s)
	}
	if reason != "" {
		return jsonOnly(rootJSON(root, val), reason)
	}
	switch f.Kind {
	case "json":
		return jsonOnly(f, f.Hint)
	case "choice":
		key := "anyOf"
		if s.Has("oneOf") {
			key = "oneOf"
		}
		return jsonOnly(rootJSON(f, val), key+": one of several schemas")
	case "object":
	default:
		return jsonOnly(rootJSON(f, val), "the arguments are of type "+f.Kind+", not an object")
	}
	markOperations(s, &f)
	m := Model{Root: f}
	collectJSON(f, &m.Unsupported)
	return m
}

// markOperations gives each top-level field the operations it belongs to, when the
// schema is a consolidated tool's (services/builtin): a property "operation" whose enum
// names the operations, and allOf entries "if operation is X then {properties}"
// naming each operation's parameters. The page then shows an operation's own
// parameters only.
func markOperations(s *schema.Object, root *Field) {
	obj := func(o *schema.Object, k string) *schema.Object {
		if o == nil {
			return nil
		}
		v, _ := o.Get(k)
		c, _ := v.(*schema.Object)
		return c
	}
	props := obj(s, "properties")
	if op := obj(props, "operation"); op == nil {
		return
	} else if _, ok := op.Get("enum"); !ok {
		return
	}
	all, _ := s.Get("allOf")
	allOf, _ := all.([]any)
	of := map[string][]string{}
	for _, e := range allOf {
		entry, _ := e.(*schema.Object)
		c, _ := obj(obj(obj(entry, "if"), "properties"), "operation").Get("const")
		name, _ := c.(string)
		tp := obj(obj(entry, "then"), "properties")
		if name == "" || tp == nil {
			continue
		}
		for _, k := range tp.Keys() {
			of[k] = append(of[k], name)
		}
	}
	if len(of) == 0 {
		return
	}
	for i := range root.Fields {
		f := &root.Fields[i]
		if f.Name == "operation" {
			f.OperationSelect = true
			continue
		}
		f.Operations = of[f.Name]
	}
}

// schemaTooBig says why the form of schema s (in document doc) without values
// is over its budget of fields or bytes, or "".
func schemaTooBig(doc any, s *schema.Object) string {
	b := &former{root: doc, stack: map[string]bool{}}
	b.field(s, "", formPos{required: true, item: -1})
	return b.overBudget()
}

func rootJSON(f Field, val any) Field {
	if f.Set {
		f.Value = jsonText(val, true)
	}
	return f
}

func jsonOnly(root Field, reason string) Model {
	root.Kind, root.Hint, root.Fields, root.Item = "json", reason, nil, nil
	return Model{Root: root, JSONOnly: true, Unsupported: []string{"arguments: " + reason}}
}

// collectJSON lists the JSON sub-editors of f for Model.Unsupported.
func collectJSON(f Field, out *[]string) {
	if f.Kind == "json" {
		*out = append(*out, f.Pointer+": "+f.Hint)
		return
	}
	for _, c := range f.Fields {
		collectJSON(c, out)
	}
	if f.Extra != nil {
		collectJSON(*f.Extra, out)
	}
	if f.Kind == "choice" && f.Chosen < len(f.Variants) {
		collectJSON(f.Variants[f.Chosen], out)
	}
}

// present reports whether raw holds a value: absent, empty and JSON null all
// mean "not given", as in services/schema.
func present(raw json.RawMessage) bool {
	s := bytes.TrimSpace(raw)
	return len(s) > 0 && !bytes.Equal(s, []byte("null"))
}
