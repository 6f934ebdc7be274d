package form

import (
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

	"github.com/toolwarden/toolwarden/internal/textcheck"
	"github.com/toolwarden/toolwarden/services/schema"
	"github.com/toolwarden/toolwarden/services/verr"
)

// Decode turns submitted form values (named by FieldName) into JSON
// arguments typed by the schema; the rules are at the top of form.go. Values
// that cannot be read are left out and reported, all at once, each at its
// pointer ("/count": "is not a number"); a fraction typed for an integer is
// kept and reported, so the page can show it again. The error is nil when
// everything could be read. The JSON is always an object.
func Decode(inputSchema json.RawMessage, form url.Values) (json.RawMessage, *verr.Error) {
	m := Build(inputSchema, nil)
	d := &formDecoder{form: form, json: map[string]bool{}, errs: &verr.Error{}}
	for _, p := range form[JSONKey] {
		d.json[p] = true
	}
	d.last = lastIndexes(form)
	var out any
	if m.JSONOnly || d.json[""] {
		out = d.rootJSON()
	} else {
		out, _ = d.value(m.Root, loc{}, false)
	}
	raw := json.RawMessage(jsonText(out, false))
	if len(d.errs.Fields) == 0 {
		return raw, nil
	}
	return raw, d.errs
}

// loc is where a field's value goes (ptr, which errors name) and where its
// inputs are (path, which names them).
type loc struct{ ptr, path string }

func (l loc) child(name string) loc {
	return loc{schema.PtrJoin(l.ptr, name), schema.PtrJoin(l.path, name)}
}

// maxNameSegments bounds the "/" segments of a submitted name that can be some
// input's: each level of nesting (at most schema.MaxParamDepth+1, then a JSON
// sub-editor) adds a property, item or row, perhaps a variant and "~more", and a
// suffix ends it. Longer names are no input's and are not indexed: indexing
// each prefix of "arg/0/0/…" would hash the whole prefix at every segment.
const maxNameSegments = 3*(schema.MaxParamDepth+1) + 2

// lastIndexes indexes every "<name>/<index>" prefix of the submitted names
// once (name → 1 + the highest index), so an array or a map finds its items
// without scanning every name.
func lastIndexes(form url.Values) map[string]int {
	last := map[string]int{}
	for k := range form {
		if strings.Count(k, "/") > maxNameSegments {
			continue
		}
		for i := 0; i < len(k); i++ {
			if k[i] != '/' {
				continue
			}
			tok, _, _ := strings.Cut(k[i+1:], "/")
			if n, err := strconv.Atoi(tok); err == nil && n >= 0 && n+1 > last[k[:i]] {
				last[k[:i]] = n + 1
			}
		}
	}
	return last
}

type formDecoder struct {
	form  url.Values
	json  map[string]bool // paths of JSON sub-editors
	last  map[string]int  // input name of an array → 1 + the highest item index submitted
	items int             // array items read so far
	errs  *verr.Error
}

func (d *formDecoder) rootJSON() any {
	s := strings.TrimSpace(d.form.Get(FieldName("")))
	if s == "" {
		return schema.NewObject()
	}
	v, err := schema.Decode([]byte(s))
	if err != nil {
		d.errs.Add("", jsonProblem(err))
		return schema.NewObject()
	}
	if problem := textcheck.Problem([]byte(s)); problem != "" {
		d.errs.Add("", problem)
		return schema.NewObject()
	}
	if _, ok := v.(*schema.Object); !ok {
		d.errs.Add("", "must be a JSON object")
		return schema.NewObject()
	}
	return v
}

// value reads the field f at l. It reports whether the field is set; an
// object is returned even when it is not, for a parent that requires it.
func (d *formDecoder) value(f Field, l loc, item bool) (any, bool) {
	if f.Kind == "json" || d.json[l.path] {
		return d.jsonValue(l, item)
	}
	if f.Nullable && d.form.Get(FieldName(l.path)+NullSuffix) != "" {
		return nil, true
	}
	switch f.Kind {
	case "object":
		return d.object(f, l, item, false)
	case "array":
		return d.array(f, l, item)
	case "choice":
		return d.choice(f, l, item)
	case "map":
		return d.mapValue(f, l, item)
	}
	ptr := l.ptr
	s := strings.ReplaceAll(d.form.Get(FieldName(l.path)), "\r\n", "\n") // textareas send CRLF
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
		v, _ := schema.Decode([]byte(f.EnumJSON[i]))
		return v, true
	}
	return s, true
}

// choice reads the chosen variant only. A choice that names no variant reads
// the first (a form from before the choice had a picker).
func (d *formDecoder) choice(f Field, l loc, item bool) (any, bool) {
	if len(f.Variants) == 0 {
		return nil, false
	}
	j := 0
	if s := strings.TrimSpace(d.form.Get(FieldName(l.path) + VariantSuffix)); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n >= len(f.Variants) {
			d.errs.Add(l.ptr, "names a variant the schema does not have")
			return nil, false
		}
		j = n
	}
	vf := f.Variants[j]
	vl := loc{l.ptr, VariantPath(l.path, j)}
	if vf.Kind == "object" && !d.json[vl.path] {
		return d.object(vf, vl, item, true)
	}
	return d.value(vf, vl, item)
}

// mapValue reads a map's rows in order; rows whose key is wrong are reported
// and left out.
func (d *formDecoder) mapValue(f Field, l loc, item bool) (any, bool) {
	name := FieldName(l.path)
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
	if n < 0 || f.Item == nil {
		return schema.NewObject(), item
	}
	if d.items+n > maxFormItems {
		d.errs.Add(l.ptr, fmt.Sprintf("has too many entries (the form takes %d in all)", maxFormItems))
		return schema.NewObject(), false
	}
	d.items += n
	out := schema.NewObject()
	rowOf := map[string]int{}
	var re *regexp.Regexp
	if f.KeyPattern != "" {
		re, _ = regexp.Compile(f.KeyPattern)
	}
	for i := range n {
		rl := loc{path: l.path + "/" + strconv.Itoa(i)}
		key := d.form.Get(FieldName(rl.path) + KeySuffix)
		rl.ptr = schema.PtrJoin(l.ptr, key)
		if key == "" {
			// A row left blank (as "Add entry" made it) is no entry.
			scratch := &formDecoder{form: d.form, json: d.json, last: d.last, items: d.items, errs: &verr.Error{}}
			_, set := scratch.value(*f.Item, rl, false)
			d.items = scratch.items // what it read counts against the bound, blank or not
			if !set && len(scratch.errs.Fields) == 0 {
				continue
			}
		}
		problem := keyProblem(key, f.KeyPattern, re)
		if first, dup := rowOf[key]; dup && problem == "" {
			problem = fmt.Sprintf("the key %s is already used in row %d", strconv.Quote(key), first+1)
		}
		if problem != "" {
			d.errs.Add(l.ptr, fmt.Sprintf("row %d: %s", i+1, problem))
			continue
		}
		rowOf[key] = i
		if v, ok := d.value(*f.Item, rl, true); ok {
			out.Set(key, v)
		}
	}
	return out, true
}

var numberText = regexp.MustCompile(`^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$`)

// plainDigits is a number as typed without a leading "+" and without the zeros
// before its first digit (one is kept before a point or alone): what JSON refuses of
// what people type, taken out as text, so a long integer keeps every digit.
func plainDigits(s string) string {
	sign := ""
	switch {
	case strings.HasPrefix(s, "+"):
		s = s[1:]
	case strings.HasPrefix(s, "-"):
		sign, s = "-", s[1:]
	}
	t := strings.TrimSuffix(strings.TrimLeft(s, "0"), ".")
	if t == "" || t[0] < '0' || t[0] > '9' {
		t = "0" + t
	}
	return sign + t
}

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
		if t := plainDigits(s); json.Valid([]byte(t)) {
			s = t // "+5" and "05" as written, every digit kept
		} else {
			s = strconv.FormatFloat(f, 'g', -1, 64) // ".5" and "5."
		}
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

func (d *formDecoder) jsonValue(l loc, item bool) (any, bool) {
	s := strings.TrimSpace(d.form.Get(FieldName(l.path)))
	if s == "" {
		if item {
			d.errs.Add(l.ptr, "is required")
		}
		return nil, false
	}
	v, err := schema.Decode([]byte(s))
	if err != nil {
		d.errs.Add(l.ptr, jsonProblem(err))
		return nil, false
	}
	if problem := textcheck.Problem([]byte(s)); problem != "" {
		d.errs.Add(l.ptr, problem)
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

// object reads an object's properties. variant says it is a choice's
// chosen variant: its required constant properties are filled in.
func (d *formDecoder) object(f Field, l loc, item, variant bool) (any, bool) {
	out, set := schema.NewObject(), false
	for _, c := range f.Fields {
		v, ok := d.value(c, l.child(c.Name), false)
		_, isObj := v.(*schema.Object)
		switch {
		case ok:
			out.Set(c.Name, v)
			// A required constant is always sent (its select has nothing else to offer):
			// alone it does not make an optional object set.
			set = set || !(c.Kind == "enum" && c.Required && len(c.EnumJSON) == 1)
		case c.Required && isObj:
			out.Set(c.Name, v) // {} so the server names what it lacks
		case variant && c.Required && c.Kind == "enum" && len(c.EnumJSON) == 1 && !d.json[l.child(c.Name).path]:
			cv, _ := schema.Decode([]byte(c.EnumJSON[0]))
			out.Set(c.Name, cv)
		}
	}
	if f.Extra != nil {
		mv, _ := d.mapValue(*f.Extra, loc{l.ptr, l.path + MoreSuffix}, false)
		more, _ := mv.(*schema.Object)
		for _, k := range more.Keys() {
			if slices.ContainsFunc(f.Fields, func(c Field) bool { return c.Name == k }) {
				d.errs.Add(l.ptr, fmt.Sprintf("the key %s is a property of its own: use its field", strconv.Quote(k)))
				continue
			}
			x, _ := more.Get(k)
			out.Set(k, x)
			set = true
		}
	}
	return out, set || item
}

func (d *formDecoder) array(f Field, l loc, item bool) (any, bool) {
	ptr := l.ptr
	name := FieldName(l.path)
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
		if v, ok := d.value(*f.Item, l.child(strconv.Itoa(i)), true); ok {
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
// of one) in the form is an error. The errors keep the "schema: edit array:"
// prefix they had before the form moved here; the page shows them.
func EditArray(inputSchema, values json.RawMessage, op, pointer string) (json.RawMessage, error) {
	args := schema.NewObject()
	if present(values) {
		v, err := schema.Decode(values)
		if err != nil {
			return nil, fmt.Errorf("schema: edit array: arguments: %w", err)
		}
		o, ok := v.(*schema.Object)
		if !ok {
			return nil, errors.New("schema: edit array: the arguments are not a JSON object")
		}
		args = o
	}
	m := Build(inputSchema, values)
	if m.JSONOnly {
		return nil, errors.New("schema: edit array: the form cannot express these arguments")
	}
	switch op {
	case "add":
		f := findField(&m.Root, pointer)
		if f == nil || f.Kind != "array" || f.Item == nil {
			return nil, fmt.Errorf("schema: edit array: no array at %q", pointer)
		}
		cur, _ := schema.Lookup(args, pointer)
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
		cur, _ := schema.Lookup(args, parent)
		arr, _ := cur.([]any)
		if err := setAt(args, parent, slices.Delete(slices.Clone(arr), idx, idx+1)); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("schema: edit array: unknown operation %q", op)
	}
	return json.RawMessage(jsonText(args, false)), nil
}

// PointerAt is the JSON pointer, in values, of the input at path of the form
// built from values and the form submitted: an array item's Remove names its
// inputs' path, which is not its pointer in a map whose keys are digits or in
// a choice's variant. False when no input of the form has that path.
func PointerAt(inputSchema, values json.RawMessage, submitted url.Values, path string) (string, bool) {
	m := BuildFrom(inputSchema, values, submitted)
	if f := findPath(&m.Root, path); f != nil {
		return f.Pointer, true
	}
	return "", false
}

// Map row edits: "Add entry" and "Remove" of a map's rows are _edit buttons
// whose value is "addrow:<map path>" or "removerow:<row path>". They edit the
// submitted form itself, since rows may hold keys the arguments cannot (empty,
// or used twice): the page applies the edit, decodes the result and shows it
// with BuildFrom.
const (
	OpAddRow    = "addrow"
	OpRemoveRow = "removerow"
)

// EditRows applies a map row edit to a submitted form and returns the edited
// form: "addrow" adds an empty row to the map whose path is path; "removerow"
// removes the row at path ("<map path>/<i>"), and the rows after it move up
// one, with their inputs and JSON markers. A path that names no map (or no
// row of one) is an error.
func EditRows(inputSchema json.RawMessage, submitted url.Values, op, path string) (url.Values, error) {
	values, _ := Decode(inputSchema, submitted)
	m := BuildFrom(inputSchema, values, submitted)
	if m.JSONOnly {
		return nil, errors.New("form: edit rows: the form cannot express these arguments")
	}
	mapPath, idx := path, -1
	if op == OpRemoveRow {
		i := strings.LastIndexByte(path, '/')
		n, err := strconv.Atoi(path[i+1:])
		if i < 0 || err != nil || n < 0 || strconv.Itoa(n) != path[i+1:] {
			return nil, fmt.Errorf("form: edit rows: no map entry at %q", path)
		}
		mapPath, idx = path[:i], n
	}
	f := findPath(&m.Root, mapPath)
	switch {
	case op != OpAddRow && op != OpRemoveRow:
		return nil, fmt.Errorf("form: edit rows: unknown operation %q", op)
	case f == nil || f.Kind != "map" && (op != OpRemoveRow || f.Kind != "array"):
		return nil, fmt.Errorf("form: edit rows: no map at %q", mapPath)
	case op == OpRemoveRow && idx >= len(f.Fields):
		return nil, fmt.Errorf("form: edit rows: no map entry at %q", path)
	}
	out := url.Values{}
	for k, vs := range submitted {
		if k == "_edit" {
			continue
		}
		out[k] = slices.Clone(vs)
	}
	n := len(f.Fields)
	if op == OpAddRow {
		out.Set(FieldName(mapPath), strconv.Itoa(n+1))
		return out, nil
	}
	// rename moves the inputs of row i to row i-1, or drops them (to < 0).
	prefix := mapPath + "/"
	rename := func(p string) (string, bool) {
		rest, ok := strings.CutPrefix(p, prefix)
		if !ok {
			return p, true
		}
		tok, tail, _ := strings.Cut(rest, "/")
		i, err := strconv.Atoi(tok)
		if err != nil || strconv.Itoa(i) != tok || i < idx {
			return p, true
		}
		if i == idx {
			return "", false
		}
		p = prefix + strconv.Itoa(i-1)
		if tail != "" || strings.HasPrefix(rest[len(tok):], "/") {
			p += "/" + tail
		}
		return p, true
	}
	edited := url.Values{}
	for k, vs := range out {
		p, isArg := strings.CutPrefix(k, FieldName(""))
		if !isArg || k == JSONKey {
			edited[k] = vs
			continue
		}
		if np, keep := rename(p); keep {
			edited[FieldName(np)] = vs
		}
	}
	var marks []string
	for _, p := range edited[JSONKey] {
		if np, keep := rename(p); keep {
			marks = append(marks, np)
		}
	}
	if marks == nil {
		delete(edited, JSONKey)
	} else {
		edited[JSONKey] = marks
	}
	edited.Set(FieldName(mapPath), strconv.Itoa(n-1))
	return edited, nil
}

// findPath finds the field whose inputs are at path, through every variant.
func findPath(f *Field, path string) *Field {
	if f.Path == path {
		return f
	}
	if f.Path != "" && !strings.HasPrefix(path, f.Path+"/") {
		return nil
	}
	if f.Extra != nil {
		if got := findPath(f.Extra, path); got != nil {
			return got
		}
	}
	for _, fs := range [][]Field{f.Fields, f.Variants} {
		for i := range fs {
			if got := findPath(&fs[i], path); got != nil {
				return got
			}
		}
	}
	return nil
}

// findField finds the field at ptr among f and its descendants (not
// templates; of a choice, the chosen variant).
func findField(f *Field, ptr string) *Field {
	if f.Kind == "choice" && f.Chosen < len(f.Variants) {
		return findField(&f.Variants[f.Chosen], ptr)
	}
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
	if f.Extra != nil {
		for i := range f.Extra.Fields {
			if got := findField(&f.Extra.Fields[i], ptr); got != nil {
				return got
			}
		}
	}
	return nil
}

// setAt stores v at ptr in root, creating missing objects on the way.
func setAt(root *schema.Object, ptr string, v any) error {
	toks := strings.Split(ptr, "/")[1:]
	var cur any = root
	for i, tok := range toks {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		last := i == len(toks)-1
		switch c := cur.(type) {
		case *schema.Object:
			if last {
				c.Set(tok, v)
				return nil
			}
			next, ok := c.Get(tok)
			if !ok || next == nil {
				next = schema.NewObject()
				c.Set(tok, next)
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

// newItem is the value "Add item" appends for the item template f: of a
// choice, the first variant's (an object variant with its constants, so the
// item reads as that variant); of a map, {}.
func newItem(f Field) any {
	switch f.Kind {
	case "choice":
		if f.Default == "" && len(f.Variants) > 0 {
			v := newItem(f.Variants[0])
			if o, ok := v.(*schema.Object); ok && f.Variants[0].Kind == "object" {
				for _, c := range f.Variants[0].Fields {
					if c.Required && c.Kind == "enum" && len(c.EnumJSON) == 1 {
						cv, _ := schema.Decode([]byte(c.EnumJSON[0]))
						o.Set(c.Name, cv)
					}
				}
			}
			return v
		}
	case "map":
		if f.Default == "" {
			return schema.NewObject()
		}
	case "string":
		return f.Default
	case "enum":
		i := max(slices.Index(f.Enum, f.Default), 0)
		v, _ := schema.Decode([]byte(f.EnumJSON[i]))
		return v
	}
	if f.Default != "" {
		if v, err := schema.Decode([]byte(f.Default)); err == nil {
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
		return schema.NewObject()
	case "array":
		return []any{}
	}
	return nil
}
