package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/toolwarden/toolwarden/services/secrets"
	"github.com/toolwarden/toolwarden/services/verr"
)

// The test form (issue #5) turns any tool's input schema into HTML inputs and
// the submitted inputs back into arguments. Form builds the model, DecodeForm
// reads a submission, EditArray adds and removes array items (the form's
// "Add item"/"Remove" buttons post the form and the page re-renders it, so no
// script is needed).
//
// What the browser submits, and how DecodeForm reads it:
//
//   - every input is named FieldName(pointer): "arg/path", "arg/filters/0/op";
//   - strings, numbers and integers are text inputs (or a textarea); an empty
//     input means "not set" and the property is left out, required or not,
//     so the server's validation reports "is required". Inside an array an
//     empty string is the item "" (items cannot be left out without moving
//     the others), and an empty number is an error;
//   - booleans and enums are a <select>: the empty option means "not set";
//     booleans submit "true" or "false", enums the Enum text of a choice,
//     which DecodeForm maps back to the exact JSON (EnumJSON);
//   - an array that holds a value carries a hidden input named FieldName of
//     the array whose value is its item count, so that [] and arrays of empty
//     objects survive; without it the array is left out unless items were
//     submitted. Items keep their order; an item that cannot be read is
//     reported and left out, and all arrays together may hold at most
//     maxFormItems items;
//   - a JSON sub-editor (Kind "json") is a textarea holding JSON, plus a hidden
//     input named FormJSONKey whose value is its pointer, so DecodeForm reads
//     it as JSON even where the schema alone would expect a plain input (a
//     value that does not fit the form is shown as JSON);
//   - an object is left out when none of its inputs is set, unless it is
//     required (then it is {}) or an array item (objects and arrays that are
//     items are always there); the root is always an object.
//
// Form never puts defaults into values: they are shown as Default (the page
// uses them as placeholders), since a server applies its own defaults.

// FormJSONKey names the hidden inputs that mark JSON sub-editors: each one's
// value is the pointer of a field whose input holds JSON text. The pointer ""
// marks the whole arguments as one JSON editor named FieldName("").
const FormJSONKey = "_json"

// maxFormItems bounds the array items DecodeForm reads in one form, whatever
// the submitted counts say, since nested counts multiply.
const maxFormItems = 10000

// FormField is one input of the generated form, or a group (object) / list
// (array) of them.
type FormField struct {
	// Pointer is the JSON pointer of the value in the arguments, "/a/0/b"; ""
	// is the root object. An array's Item template has the pointer "/a/-".
	Pointer string
	// Name is the property name ("" for array items and the root).
	Name string
	// Label is the title, else the property name; array items are "Item N"
	// (or "<title> N" when the item schema has a title).
	Label string
	// Help is the description, as plain text.
	Help string
	// Kind is "string", "number", "integer", "boolean", "enum", "object",
	// "array" or "json" (a raw JSON sub-editor, for what a form cannot express).
	Kind string
	// Input is the HTML control for strings: "text", "email", "url", "date",
	// "password" or "textarea" (see stringInput for the rules). "date-time"
	// and "time" stay "text": the browser's datetime-local and time inputs
	// cannot hold the time zone offset those formats require.
	Input    string
	Required bool
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
	Fields []FormField
	// Item is an array's template of one new item (what "Add item" adds).
	Item               *FormField
	MinItems, MaxItems *int
	// Secret marks password-like strings: writeOnly, format "password", or a
	// name that holds credentials (secrets.LooksSecretName).
	Secret bool
}

// FormModel is the generated form of one input schema with its current values.
type FormModel struct {
	// Root is the arguments object; its Fields are the top-level inputs.
	Root FormField
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

// Form builds the model for inputSchema with the current argument values.
// values may be nil or empty; defaults are never filled in as values, they are
// shown as Default. Values the form cannot show exactly (a string where the
// schema wants a number, properties the schema does not declare) turn their
// field into a JSON sub-editor, so nothing is lost by going through the form.
func Form(inputSchema, values json.RawMessage) FormModel {
	root := FormField{Label: "Arguments", Kind: "object", Required: true}
	var val any
	if present(values) {
		v, err := decode(values)
		if err != nil {
			root.Value = string(values)
			return jsonOnly(root, "the arguments are not valid JSON")
		}
		val = v
		root.Set = true
		if _, ok := v.(*obj); !ok {
			return jsonOnly(rootJSON(root, val), "the arguments are not a JSON object")
		}
	}
	doc, err := decode(inputSchema)
	s, ok := doc.(*obj)
	if err != nil || !ok {
		return jsonOnly(rootJSON(root, val), "the input schema is not a JSON object")
	}
	b := &former{root: doc, stack: map[string]bool{}}
	f := b.field(s, "", formPos{required: true, val: val, has: root.Set, item: -1})
	if f.Label == "" {
		f.Label = root.Label
	}
	switch f.Kind {
	case "json":
		return jsonOnly(f, f.Hint)
	case "object":
	default:
		return jsonOnly(rootJSON(f, val), "the arguments are of type "+f.Kind+", not an object")
	}
	m := FormModel{Root: f}
	collectJSON(f, &m.Unsupported)
	return m
}

func rootJSON(f FormField, val any) FormField {
	if f.Set {
		f.Value = jsonText(val, true)
	}
	return f
}

func jsonOnly(root FormField, reason string) FormModel {
	root.Kind, root.Hint, root.Fields, root.Item = "json", reason, nil, nil
	return FormModel{Root: root, JSONOnly: true, Unsupported: []string{"arguments: " + reason}}
}

// collectJSON lists the JSON sub-editors of f for FormModel.Unsupported.
func collectJSON(f FormField, out *[]string) {
	if f.Kind == "json" {
		*out = append(*out, f.Pointer+": "+f.Hint)
		return
	}
	for _, c := range f.Fields {
		collectJSON(c, out)
	}
}

// former builds form fields from one schema document.
type former struct {
	root any
	// stack holds the schemas being expanded, by pointer, to stop at recursion.
	stack map[string]bool
}

// formPos is where a field sits and what the arguments hold there.
type formPos struct {
	ptr, name string
	item      int // index of an array item, -1 for a property or the root
	required  bool
	val       any
	has       bool
	depth     int
}

func (b *former) field(s any, sptr string, a formPos) FormField {
	f := FormField{Pointer: a.ptr, Name: a.name, Label: a.name, Required: a.required, Set: a.has}
	if a.item >= 0 {
		f.Label = "Item " + strconv.Itoa(a.item+1)
	}
	so, ok := s.(*obj)
	if !ok {
		return toJSON(f, a, nil, false, "any JSON value is allowed")
	}
	v := resolve(b.root, so, sptr)
	ev := v // what the value must be: X for an optional "anyOf [X, null]"
	if alt, ok := optionalAlt(b.root, v); ok {
		ev = alt
	}
	if t := firstNonEmpty(v.str("title"), ev.str("title")); t != "" {
		f.Label = t
		if a.item >= 0 {
			f.Label += " " + strconv.Itoa(a.item+1)
		}
	}
	f.Help = firstNonEmpty(v.str("description"), ev.str("description"))
	dflt, _, hasDflt := v.get("default")
	if !hasDflt {
		dflt, _, hasDflt = ev.get("default")
	}
	if a.depth > maxParamDepth {
		return toJSON(f, a, dflt, hasDflt, fmt.Sprintf("nested more than %d levels deep", maxParamDepth))
	}
	kind, reason := b.classify(ev, a.depth == 0)
	if kind == "array" || kind == "object" {
		target := ev[len(ev)-1].ptr
		if b.stack[target] {
			kind, reason = "json", "a recursive definition"
		} else {
			b.stack[target] = true
			defer delete(b.stack, target)
		}
	}
	switch kind {
	case "string":
		reason = stringField(&f, ev, a)
	case "number", "integer":
		reason = numberField(&f, ev, a, kind == "integer")
	case "boolean":
		f.Kind = "boolean"
		if a.has {
			bv, ok := a.val.(bool)
			if !ok {
				reason = "the value is not true or false"
			}
			f.Value = strconv.FormatBool(bv)
		}
	case "enum":
		reason = enumField(&f, ev, a)
	case "object":
		reason = b.objectField(&f, ev, a)
	case "array":
		reason = b.arrayField(&f, ev, a)
	}
	if reason != "" {
		return toJSON(f, a, dflt, hasDflt, reason)
	}
	if hasDflt {
		f.Default = valueText(f, dflt)
	}
	if x, _, _ := v.get("deprecated"); x == true {
		f.Hint = joinHints("deprecated", f.Hint)
	}
	return f
}

// toJSON turns f into a JSON sub-editor, keeping where it is and what it is called.
func toJSON(f FormField, a formPos, dflt any, hasDflt bool, reason string) FormField {
	j := FormField{
		Pointer: f.Pointer, Name: f.Name, Label: f.Label, Help: f.Help,
		Kind: "json", Required: f.Required, Set: a.has, Hint: reason,
	}
	if a.has {
		j.Value = jsonText(a.val, true)
	}
	if hasDflt {
		j.Default = jsonText(dflt, false)
	}
	return j
}

// classify picks the kind of input for a schema, or "json" and why not.
func (b *former) classify(v view, root bool) (kind, reason string) {
	if c, _, ok := v.get("const"); ok {
		if !scalar(c) {
			return "json", "a constant object or array"
		}
		return "enum", ""
	}
	if v.has("enum") {
		enum := v.array("enum")
		if len(enum) == 0 {
			return "json", "an enum without choices"
		}
		if slices.ContainsFunc(enum, func(e any) bool { return !scalar(e) }) {
			return "json", "choices that are objects or arrays"
		}
		return "enum", ""
	}
	for _, k := range []string{"oneOf", "anyOf"} {
		if v.has(k) {
			return "json", k + ": one of several schemas"
		}
	}
	merged := v.has("allOf") && !allOfFollowed(v) // parts objectProps merges
	if merged && !b.objectParts(v) {
		return "json", "allOf: several schemas combined"
	}
	var ts []string
	for _, t := range v.types() {
		if t != "null" {
			ts = append(ts, t)
		}
	}
	switch {
	case len(ts) == 2 && slices.Contains(ts, "integer") && slices.Contains(ts, "number"):
		return "number", ""
	case len(ts) > 1:
		return "json", "one of several types (" + strings.Join(ts, " | ") + ")"
	case len(ts) == 1:
		switch ts[0] {
		case "string", "number", "integer", "boolean", "object", "array":
			return ts[0], ""
		}
		return "json", "an unknown type " + strconv.Quote(ts[0])
	case v.has("properties") || merged:
		return "object", ""
	case v.has("items") || v.has("prefixItems"):
		return "array", ""
	case len(v.types()) > 0:
		return "json", "always null"
	case root:
		return "object", "" // MCP: the arguments are an object, typed or not
	}
	return "json", "no type: any JSON value is allowed"
}

// allOfFollowed reports whether resolve already read a single-part allOf as
// a wrapper (the view continues into the part).
func allOfFollowed(v view) bool {
	for i, l := range v {
		if l.o.has("allOf") {
			return i+1 < len(v) && v[i+1].ptr == ptrJoin(l.ptr, "allOf", "0")
		}
	}
	return false
}

// objectParts reports whether every part of an allOf is an object schema the
// form can merge (properties and required, as objectProps reads them).
func (b *former) objectParts(v view) bool {
	x, p, _ := v.get("allOf")
	parts, _ := x.([]any)
	for i, part := range parts {
		po, ok := part.(*obj)
		if !ok {
			return false
		}
		pv := resolve(b.root, po, ptrJoin(p, "allOf", strconv.Itoa(i)))
		if hasAny(pv[len(pv)-1].o, []string{"oneOf", "anyOf", "allOf", "enum", "const", "items", "prefixItems"}) {
			return false
		}
		if ts := pv.types(); len(ts) > 0 && !slices.Equal(ts, []string{"object"}) {
			return false
		}
	}
	return true
}

func scalar(v any) bool {
	switch v.(type) {
	case string, json.Number, bool, nil:
		return true
	}
	return false
}

func stringField(f *FormField, v view, a formPos) string {
	f.Kind = "string"
	if a.has {
		s, ok := a.val.(string)
		if !ok {
			return "the value is not a string"
		}
		f.Value = s
	}
	f.MinLength, f.MaxLength = intPtr(v, "minLength"), intPtr(v, "maxLength")
	f.Pattern = v.str("pattern")
	format := v.str("format")
	wo, _, _ := v.get("writeOnly")
	f.Secret = format == "password" || wo == true || secrets.LooksSecretName(a.name)
	f.Input, f.Hint = stringInput(f, v, format)
	return ""
}

// formatInputs are the formats with an HTML input type whose value the browser
// keeps as it is (it empties a date input holding anything but YYYY-MM-DD).
var formatInputs = map[string]string{
	"email": "email", "idn-email": "email",
	"uri": "url", "url": "url", "iri": "url",
	"date": "date",
}

// longText are the last words of names that usually hold prose or documents.
var longText = map[string]bool{
	"body": true, "content": true, "contents": true, "text": true, "description": true,
	"prompt": true, "markdown": true, "html": true, "script": true, "template": true,
	"note": true, "notes": true, "comment": true, "instructions": true,
}

// shortText are the last words of names that hold one line however long they
// may be (a path's maxLength is often 4096).
var shortText = map[string]bool{
	"path": true, "file": true, "filename": true, "dir": true, "directory": true,
	"url": true, "uri": true, "link": true, "name": true, "id": true, "title": true,
}

// stringInput picks the HTML control of a string and a hint for its format:
// a textarea when the value has line breaks (a text input would drop them),
// "password" for secrets, the format's input type where the browser keeps the
// value as it is, a textarea for long text (no format, and contentMediaType,
// contentEncoding, a name ending in a word like "content", "body" or "text",
// or a maxLength over 200 unless the name ends in a word like "path" or
// "url"), else "text".
func stringInput(f *FormField, v view, format string) (input, hint string) {
	if format != "" && formatInputs[format] == "" && format != "password" {
		hint = "format: " + format
		if ex, ok := formatExamples[format]; ok {
			hint += ", e.g. " + ex
		}
	}
	switch t := formatInputs[format]; {
	case strings.ContainsAny(f.Value, "\r\n"):
		return "textarea", hint
	case f.Secret:
		return "password", hint
	case t == "date" && f.Value != "" && !isDate(f.Value),
		t != "" && strings.TrimSpace(f.Value) != f.Value:
		return "text", "format: " + format
	case t != "":
		return t, hint
	case format != "":
	case v.has("contentMediaType") || v.has("contentEncoding") || longText[lastWord(f.Name)],
		f.MaxLength != nil && *f.MaxLength > 200 && !shortText[lastWord(f.Name)]:
		return "textarea", hint
	}
	return "text", hint
}

func isDate(s string) bool {
	_, err := time.Parse(time.DateOnly, s)
	return err == nil && len(s) == len(time.DateOnly)
}

// lastWord is the last word of a name, lower-cased: "fileContent" and
// "file_content" both end in "content".
func lastWord(name string) string {
	end := len(name)
	for end > 0 && !isLetter(name[end-1]) {
		end--
	}
	start := end
	for start > 0 && isLetter(name[start-1]) {
		start--
		if start > 0 && unicode.IsUpper(rune(name[start])) && unicode.IsLower(rune(name[start-1])) {
			break
		}
	}
	return strings.ToLower(name[start:end])
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

func numberField(f *FormField, v view, a formPos, integer bool) string {
	f.Kind, f.Step = "number", "any"
	if integer {
		f.Kind, f.Step = "integer", "1"
	}
	if a.has {
		n, ok := a.val.(json.Number)
		if !ok {
			return "the value is not a number"
		}
		f.Value = string(n) // a fraction in an integer stays visible, to be corrected
	}
	lo, hasLo := v.num("minimum")
	hi, hasHi := v.num("maximum")
	xlo, hasXlo := v.num("exclusiveMinimum")
	xhi, hasXhi := v.num("exclusiveMaximum")
	if x, _, _ := v.get("exclusiveMinimum"); x == true && hasLo { // draft-04
		xlo, hasXlo, hasLo = lo, true, false
	}
	if x, _, _ := v.get("exclusiveMaximum"); x == true && hasHi {
		xhi, hasXhi, hasHi = hi, true, false
	}
	var hints []string
	if integer {
		// The browser counts steps from min, so min must be a whole number;
		// for integers that changes nothing.
		if hasLo {
			lo = math.Ceil(lo)
		}
		if hasHi {
			hi = math.Floor(hi)
		}
		if hasXlo && (!hasLo || math.Floor(xlo)+1 > lo) {
			lo, hasLo = math.Floor(xlo)+1, true
		}
		if hasXhi && (!hasHi || math.Ceil(xhi)-1 < hi) {
			hi, hasHi = math.Ceil(xhi)-1, true
		}
		hasXlo, hasXhi = false, false
	}
	if m, ok := v.num("multipleOf"); ok && m > 0 {
		whole := m == math.Trunc(m)
		switch {
		case integer && !whole:
			hints = append(hints, "multiple of "+numText(m))
		case !hasLo || isMultiple(lo, m):
			f.Step = numText(m)
		case whole:
			lo = math.Ceil(lo/m) * m // the same values, and a step base the browser gets right
			f.Step = numText(m)
		default:
			hints = append(hints, "multiple of "+numText(m))
		}
	}
	if hasLo {
		f.Minimum = &lo
	}
	if hasHi {
		f.Maximum = &hi
	}
	if hasXlo {
		hints = append(hints, "greater than "+numText(xlo))
	}
	if hasXhi {
		hints = append(hints, "less than "+numText(xhi))
	}
	f.Hint = strings.Join(hints, "; ")
	return ""
}

func isMultiple(x, m float64) bool {
	r := math.Abs(math.Mod(x, m))
	return r < 1e-9*m || m-r < 1e-9*m
}

func numText(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

func enumField(f *FormField, v view, a formPos) string {
	f.Kind = "enum"
	vals := v.array("enum")
	if c, _, ok := v.get("const"); ok {
		vals = []any{c}
	}
	f.Enum, f.EnumJSON = enumTexts(vals)
	if a.has {
		i := slices.IndexFunc(vals, func(e any) bool { return sameJSON(e, a.val) })
		if i < 0 {
			return "the value is not one of the choices"
		}
		f.Value = f.Enum[i]
	}
	return ""
}

// enumTexts names the choices: strings as they are, other values as JSON, and
// as JSON too a string that would read like another choice or like the empty
// "not set" option.
func enumTexts(vals []any) (texts, exact []string) {
	texts, exact = make([]string, len(vals)), make([]string, len(vals))
	count := map[string]int{}
	for i, e := range vals {
		exact[i] = jsonText(e, false)
		texts[i] = exact[i]
		if s, ok := e.(string); ok {
			texts[i] = s
		}
		count[texts[i]]++
	}
	for i, e := range vals {
		if _, ok := e.(string); ok && (texts[i] == "" || count[texts[i]] > 1) {
			texts[i] = exact[i]
		}
	}
	return texts, exact
}

// sameJSON compares decoded values, numbers by value (1 equals 1.0).
func sameJSON(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		if x == y {
			return true
		}
		fx, err1 := x.Float64()
		fy, err2 := y.Float64()
		return err1 == nil && err2 == nil && fx == fy
	case *obj:
		y, ok := b.(*obj)
		if !ok || len(x.m) != len(y.m) {
			return false
		}
		for k, xv := range x.m {
			if yv, ok := y.m[k]; !ok || !sameJSON(xv, yv) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		return ok && slices.EqualFunc(x, y, sameJSON)
	}
	return a == b
}

func (b *former) objectField(f *FormField, v view, a formPos) string {
	f.Kind = "object"
	var vo *obj
	if a.has {
		var ok bool
		if vo, ok = a.val.(*obj); !ok {
			return "the value is not an object"
		}
	}
	props, required := objectProps(b.root, v)
	if len(props) == 0 && !v.has("properties") {
		ap, _, hasAP := v.get("additionalProperties")
		if v.has("patternProperties") || ap != false && (hasAP || a.depth > 0) {
			return "an object with free-form properties"
		}
	}
	order := b.requiredOrder(v)
	slices.SortStableFunc(props, func(p, q propRef) int {
		i, j := slices.Index(order, p.name), slices.Index(order, q.name)
		switch {
		case i >= 0 && j >= 0:
			return i - j
		case i >= 0:
			return -1
		case j >= 0:
			return 1
		}
		return strings.Compare(p.name, q.name)
	})
	known := map[string]bool{}
	for _, p := range props {
		if p.schema == false {
			continue // the property may not be given at all
		}
		known[p.name] = true
		cv, has := vo.get(p.name)
		f.Fields = append(f.Fields, b.field(p.schema, p.ptr, formPos{
			ptr: ptrJoin(a.ptr, p.name), name: p.name, item: -1,
			required: required[p.name], val: cv, has: has, depth: a.depth + 1,
		}))
	}
	var extra []string
	for _, k := range vo.keysOrNil() {
		if !known[k] {
			extra = append(extra, strconv.Quote(k))
		}
	}
	if len(extra) > 0 {
		return "holds properties the schema does not declare: " + strings.Join(extra, ", ")
	}
	return ""
}

// requiredOrder lists required names as the schema gives them: its own
// "required", then those of allOf parts.
func (b *former) requiredOrder(v view) []string {
	var out []string
	add := func(v view) {
		for _, r := range v.array("required") {
			if s, ok := r.(string); ok && !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	add(v)
	_, p, _ := v.get("allOf")
	for i, e := range v.array("allOf") {
		if sub, ok := e.(*obj); ok {
			add(resolve(b.root, sub, ptrJoin(p, "allOf", strconv.Itoa(i))))
		}
	}
	return out
}

func (b *former) arrayField(f *FormField, v view, a formPos) string {
	f.Kind = "array"
	f.MinItems, f.MaxItems = intPtr(v, "minItems"), intPtr(v, "maxItems")
	if v.has("prefixItems") {
		return "a tuple (prefixItems)"
	}
	x, ip, _ := v.get("items")
	items, ok := x.(*obj)
	if !ok {
		if _, tuple := x.([]any); tuple {
			return "a tuple (items is a list)"
		}
		return "items of any type"
	}
	var arr []any
	if a.has {
		if arr, ok = a.val.([]any); !ok {
			return "the value is not an array"
		}
	}
	iptr := ptrJoin(ip, "items")
	tmpl := b.field(items, iptr, formPos{ptr: a.ptr + "/-", item: len(arr), required: true, depth: a.depth + 1})
	if tmpl.Kind == "json" {
		return "items: " + tmpl.Hint
	}
	f.Item = &tmpl
	for i, el := range arr {
		it := b.field(items, iptr, formPos{
			ptr: ptrJoin(a.ptr, strconv.Itoa(i)), item: i, required: true, val: el, has: true, depth: a.depth + 1,
		})
		if it.Kind == "json" {
			return fmt.Sprintf("item %d: %s", i+1, it.Hint)
		}
		f.Fields = append(f.Fields, it)
	}
	lo := f.MinItems
	if lo != nil && *lo == 0 {
		lo = nil
	}
	if c := countText(lo, f.MaxItems); c != "" {
		f.Hint = c + " item"
		if f.MaxItems == nil && *lo != 1 || f.MaxItems != nil && *f.MaxItems != 1 {
			f.Hint += "s"
		}
	}
	if u, _, _ := v.get("uniqueItems"); u == true {
		f.Hint = joinHints(f.Hint, "no duplicates")
	}
	return ""
}

func joinHints(hs ...string) string {
	return strings.Join(slices.DeleteFunc(hs, func(h string) bool { return h == "" }), "; ")
}

// valueText renders a decoded value as FormField.Value text for f's kind.
func valueText(f FormField, v any) string {
	switch f.Kind {
	case "string":
		if s, ok := v.(string); ok {
			return s
		}
	case "enum":
		for i, e := range f.EnumJSON {
			if ev, err := decode([]byte(e)); err == nil && sameJSON(ev, v) {
				return f.Enum[i]
			}
		}
	}
	return jsonText(v, false)
}

// jsonText encodes a decoded value, keeping the order of object keys and
// leaving <, > and & as they are (the text is shown to people).
func jsonText(v any, indent bool) string {
	var buf bytes.Buffer
	appendJSON(&buf, v)
	if indent {
		var out bytes.Buffer
		if json.Indent(&out, buf.Bytes(), "", "  ") == nil {
			return out.String()
		}
	}
	return buf.String()
}

func appendJSON(buf *bytes.Buffer, v any) {
	switch t := v.(type) {
	case *obj:
		buf.WriteByte('{')
		for i, k := range t.keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			appendJSON(buf, k)
			buf.WriteByte(':')
			appendJSON(buf, t.m[k])
		}
		buf.WriteByte('}')
	case []any:
		buf.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				buf.WriteByte(',')
			}
			appendJSON(buf, e)
		}
		buf.WriteByte(']')
	case json.Number:
		buf.WriteString(string(t))
	default:
		enc := json.NewEncoder(buf)
		enc.SetEscapeHTML(false)
		if enc.Encode(t) != nil {
			buf.WriteString("null")
			return
		}
		buf.Truncate(buf.Len() - 1) // Encode's newline
	}
}

func (o *obj) set(k string, v any) {
	if _, ok := o.m[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.m[k] = v
}

func newObj() *obj { return &obj{m: map[string]any{}} }

// DecodeForm turns submitted form values (named by FieldName) into JSON
// arguments typed by the schema; the rules are at the top of this file. Values
// that cannot be read are left out and reported, all at once, each at its
// pointer ("/count": "is not a number"); a fraction typed for an integer is
// kept and reported, so the page can show it again. The error is nil when
// everything could be read. The JSON is always an object.
func DecodeForm(inputSchema json.RawMessage, form url.Values) (json.RawMessage, *verr.Error) {
	m := Form(inputSchema, nil)
	d := &formDecoder{form: form, json: map[string]bool{}, last: map[string]int{}, errs: &verr.Error{}}
	for _, p := range form[FormJSONKey] {
		d.json[p] = true
	}
	// Index every "<name>/<index>" prefix of the submitted names once, so an
	// array finds its items without scanning every name.
	for k := range form {
		for i := 0; i < len(k); i++ {
			if k[i] != '/' {
				continue
			}
			tok, _, _ := strings.Cut(k[i+1:], "/")
			if n, err := strconv.Atoi(tok); err == nil && n >= 0 && n+1 > d.last[k[:i]] {
				d.last[k[:i]] = n + 1
			}
		}
	}
	var out any
	if m.JSONOnly || d.json[""] {
		out = d.rootJSON()
	} else {
		out, _ = d.value(m.Root, "", false)
	}
	raw := json.RawMessage(jsonText(out, false))
	if len(d.errs.Fields) == 0 {
		return raw, nil
	}
	return raw, d.errs
}

type formDecoder struct {
	form  url.Values
	json  map[string]bool // pointers of JSON sub-editors
	last  map[string]int  // input name of an array → 1 + the highest item index submitted
	items int             // array items read so far
	errs  *verr.Error
}

func (d *formDecoder) rootJSON() any {
	s := strings.TrimSpace(d.form.Get(FieldName("")))
	if s == "" {
		return newObj()
	}
	v, err := decode([]byte(s))
	if err != nil {
		d.errs.Add("", jsonProblem(err))
		return newObj()
	}
	if _, ok := v.(*obj); !ok {
		d.errs.Add("", "must be a JSON object")
		return newObj()
	}
	return v
}

// value reads the field f at ptr. It reports whether the field is set; an
// object is returned even when it is not, for a parent that requires it.
func (d *formDecoder) value(f FormField, ptr string, item bool) (any, bool) {
	if f.Kind == "json" || d.json[ptr] {
		return d.jsonValue(ptr, item)
	}
	switch f.Kind {
	case "object":
		return d.object(f, ptr, item)
	case "array":
		return d.array(f, ptr, item)
	}
	s := strings.ReplaceAll(d.form.Get(FieldName(ptr)), "\r\n", "\n") // textareas send CRLF
	if f.Kind == "number" || f.Kind == "integer" || f.Kind == "boolean" {
		s = strings.TrimSpace(s)
	}
	if s == "" {
		switch {
		case !item:
			return nil, false
		case f.Kind == "string":
			return "", true
		}
		d.errs.Add(ptr, "is required")
		return nil, false
	}
	switch f.Kind {
	case "number", "integer":
		n, problem := parseNumber(s, f.Kind == "integer")
		if problem != "" {
			d.errs.Add(ptr, problem)
		}
		return n, n != nil
	case "boolean":
		if s != "true" && s != "false" {
			d.errs.Add(ptr, "must be true or false")
			return nil, false
		}
		return s == "true", true
	case "enum":
		i := slices.Index(f.Enum, s)
		if i < 0 {
			i = slices.Index(f.EnumJSON, s)
		}
		if i < 0 {
			d.errs.Add(ptr, "is not one of the choices")
			return nil, false
		}
		v, _ := decode([]byte(f.EnumJSON[i]))
		return v, true
	}
	return s, true
}

var numberText = regexp.MustCompile(`^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$`)

// parseNumber reads a number as the browser's number input sends it. It keeps
// the text where it is valid JSON, so large integers keep their digits.
func parseNumber(s string, integer bool) (any, string) {
	if !numberText.MatchString(s) {
		return nil, "is not a number"
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) {
		return nil, "is out of range"
	}
	if !json.Valid([]byte(s)) {
		s = strconv.FormatFloat(f, 'g', -1, 64) // "+5", ".5", "5." and "05"
	}
	if integer {
		if f != math.Trunc(f) {
			return json.Number(s), "is not a whole number"
		}
		if _, err := strconv.ParseInt(s, 10, 64); err != nil && math.Abs(f) < 1<<53 {
			s = numText(f) // "3.0" and "1e3" as an integer's digits
		}
	}
	return json.Number(s), ""
}

func (d *formDecoder) jsonValue(ptr string, item bool) (any, bool) {
	s := strings.TrimSpace(d.form.Get(FieldName(ptr)))
	if s == "" {
		if item {
			d.errs.Add(ptr, "is required")
		}
		return nil, false
	}
	v, err := decode([]byte(s))
	if err != nil {
		d.errs.Add(ptr, jsonProblem(err))
		return nil, false
	}
	return v, true
}

func jsonProblem(err error) string {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "is not valid JSON: it ends too early"
	}
	return "is not valid JSON: " + err.Error()
}

func (d *formDecoder) object(f FormField, ptr string, item bool) (any, bool) {
	out, set := newObj(), false
	for _, c := range f.Fields {
		v, ok := d.value(c, ptrJoin(ptr, c.Name), false)
		switch {
		case ok:
			out.set(c.Name, v)
			set = true
		case c.Required && c.Kind == "object" && !d.json[ptrJoin(ptr, c.Name)]:
			out.set(c.Name, v) // {} so the server names what it lacks
		}
	}
	return out, set || item
}

func (d *formDecoder) array(f FormField, ptr string, item bool) (any, bool) {
	name := FieldName(ptr)
	n := -1
	if s, ok := d.form[name]; ok && len(s) > 0 {
		n = 0
		if c, err := strconv.Atoi(strings.TrimSpace(s[0])); err == nil && c > 0 {
			n = c
		}
	}
	if last, ok := d.last[name]; ok {
		n = max(n, last)
	}
	if item {
		n = max(n, 0) // an item is there even when it sends nothing
	}
	if n < 0 || f.Item == nil {
		return nil, false
	}
	if d.items+n > maxFormItems {
		d.errs.Add(ptr, fmt.Sprintf("has too many items (the form takes %d in all)", maxFormItems))
		return nil, false
	}
	d.items += n
	out := make([]any, 0, n)
	for i := range n {
		if v, ok := d.value(*f.Item, ptrJoin(ptr, strconv.Itoa(i)), true); ok {
			out = append(out, v)
		}
	}
	return out, true
}

// EditArray applies an array edit to argument values and returns the new
// values. Op "add" appends one item to the array at pointer (creating the
// array, and objects above it, when absent): the item schema's default, else
// an empty value of its kind ("" for strings, 0 or the nearest bound for
// numbers, false, the first choice of an enum, {} or []). Op "remove" removes
// the item at pointer ("/tags/2"). A pointer that names no array (or no item
// of one) in the form is an error.
func EditArray(inputSchema, values json.RawMessage, op, pointer string) (json.RawMessage, error) {
	args := newObj()
	if present(values) {
		v, err := decode(values)
		if err != nil {
			return nil, fmt.Errorf("schema: edit array: arguments: %w", err)
		}
		o, ok := v.(*obj)
		if !ok {
			return nil, errors.New("schema: edit array: the arguments are not a JSON object")
		}
		args = o
	}
	m := Form(inputSchema, values)
	if m.JSONOnly {
		return nil, errors.New("schema: edit array: the form cannot express these arguments")
	}
	switch op {
	case "add":
		f := findField(&m.Root, pointer)
		if f == nil || f.Kind != "array" || f.Item == nil {
			return nil, fmt.Errorf("schema: edit array: no array at %q", pointer)
		}
		cur, _ := lookup(args, pointer)
		arr, _ := cur.([]any)
		if err := setAt(args, pointer, append(slices.Clip(arr), newItem(*f.Item))); err != nil {
			return nil, err
		}
	case "remove":
		i := strings.LastIndexByte(pointer, '/')
		if i < 0 {
			return nil, fmt.Errorf("schema: edit array: no array item at %q", pointer)
		}
		parent, tok := pointer[:i], pointer[i+1:]
		f := findField(&m.Root, parent)
		idx, err := strconv.Atoi(tok)
		if f == nil || f.Kind != "array" || err != nil || strconv.Itoa(idx) != tok || idx < 0 || idx >= len(f.Fields) {
			return nil, fmt.Errorf("schema: edit array: no array item at %q", pointer)
		}
		cur, _ := lookup(args, parent)
		arr, _ := cur.([]any)
		if err := setAt(args, parent, slices.Delete(slices.Clone(arr), idx, idx+1)); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("schema: edit array: unknown operation %q", op)
	}
	return json.RawMessage(jsonText(args, false)), nil
}

// findField finds the field at ptr among f and its descendants (not templates).
func findField(f *FormField, ptr string) *FormField {
	if f.Pointer == ptr {
		return f
	}
	if f.Pointer != "" && !strings.HasPrefix(ptr, f.Pointer+"/") {
		return nil
	}
	for i := range f.Fields {
		if got := findField(&f.Fields[i], ptr); got != nil {
			return got
		}
	}
	return nil
}

// setAt stores v at ptr in root, creating missing objects on the way.
func setAt(root *obj, ptr string, v any) error {
	toks := strings.Split(ptr, "/")[1:]
	var cur any = root
	for i, tok := range toks {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		last := i == len(toks)-1
		switch c := cur.(type) {
		case *obj:
			if last {
				c.set(tok, v)
				return nil
			}
			next, ok := c.get(tok)
			if !ok || next == nil {
				next = newObj()
				c.set(tok, next)
			}
			cur = next
		case []any:
			j, err := strconv.Atoi(tok)
			if err != nil || j < 0 || j >= len(c) {
				return fmt.Errorf("schema: edit array: no value at %q", ptr)
			}
			if last {
				c[j] = v
				return nil
			}
			cur = c[j]
		default:
			return fmt.Errorf("schema: edit array: no value at %q", ptr)
		}
	}
	return fmt.Errorf("schema: edit array: no value at %q", ptr)
}

// newItem is the value "Add item" appends for the item template f.
func newItem(f FormField) any {
	switch f.Kind {
	case "string":
		return f.Default
	case "enum":
		i := max(slices.Index(f.Enum, f.Default), 0)
		v, _ := decode([]byte(f.EnumJSON[i]))
		return v
	}
	if f.Default != "" {
		if v, err := decode([]byte(f.Default)); err == nil {
			return v
		}
	}
	switch f.Kind {
	case "number", "integer":
		x := 0.0
		if f.Minimum != nil && x < *f.Minimum {
			x = *f.Minimum
		}
		if f.Maximum != nil && x > *f.Maximum {
			x = *f.Maximum
		}
		return json.Number(numText(x))
	case "boolean":
		return false
	case "object":
		return newObj()
	case "array":
		return []any{}
	}
	return nil
}
