package form

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/toolwarden/toolwarden/services/schema"
	"github.com/toolwarden/toolwarden/services/secrets"
	"github.com/toolwarden/toolwarden/services/verr"
)

// former builds form fields from one schema document.
type former struct {
	root any
	// stack holds the schemas being expanded, by pointer, to stop at recursion.
	stack map[string]bool
	// sub is the submitted form BuildFrom shows where the values cannot;
	// subLast indexes it as Decode does (input name → 1 + the highest row or
	// item index under it), and subRows counts the map rows built from it,
	// which are bounded as Decode bounds items.
	sub     url.Values
	subLast map[string]int
	subRows int
	// misfits counts the fields turned into JSON sub-editors because of their
	// value (not their schema): a choice's variant fits a value when building
	// it with the value adds none.
	misfits int
	// fields counts the fields built; past MaxFields the form is JSON only.
	fields int
	// size counts the bytes of text the fields built show (labels, help,
	// hints, defaults, choices); past MaxFormBytes the form is JSON only.
	size int
}

// MaxFields bounds the fields of one form: properties that refer to one
// definition each build it in full, so a few kilobytes of schema nested a few
// levels deep would stand for millions of fields. Past it the arguments are
// edited as JSON.
const MaxFields = 2000

// tooManyFields is the reason a form past MaxFields is JSON only.
var tooManyFields = fmt.Sprintf("the form would have more than %d fields", MaxFields)

// MaxFormBytes bounds the text of one form: a description or choices reused
// through $ref are written once per field, so a small schema could make a page
// of hundreds of megabytes. Past it the arguments are edited as JSON.
const MaxFormBytes = 1 << 20

// tooLarge is the reason a form past MaxFormBytes is JSON only.
var tooLarge = fmt.Sprintf("the form would be too large (more than %d KiB of labels, help and choices)", MaxFormBytes>>10)

// MaxChoices bounds the options of one select: an enum of more is a text
// field (strings) or a JSON editor.
const MaxChoices = 500

// overBudget is why the form is JSON only as built so far, or "".
func (b *former) overBudget() string {
	switch {
	case b.fields > MaxFields:
		return tooManyFields
	case b.size > MaxFormBytes:
		return tooLarge
	}
	return ""
}

// textSize is the bytes of schema text a field shows itself (not its
// sub-fields, which count their own).
func textSize(f Field) int {
	n := len(f.Label) + len(f.Help) + len(f.Hint) + len(f.Default)
	for i := range f.Enum {
		n += len(f.Enum[i]) + len(f.EnumJSON[i])
	}
	return n
}

// formPos is where a field sits and what the arguments hold there.
type formPos struct {
	ptr, path, name string
	item            int // index of an array item, -1 for a property or the root
	required        bool
	val             any
	has             bool
	depth           int
}

func (b *former) field(s any, sptr string, a formPos) (built Field) {
	f := Field{Pointer: a.ptr, Path: a.path, Name: a.name, Label: a.name, Required: a.required, Set: a.has}
	b.fields++
	if reason := b.overBudget(); reason != "" {
		return b.toJSON(f, a, nil, false, reason) // build gives up on the form
	}
	defer func() { b.size += textSize(built) }()
	if a.item >= 0 {
		f.Label = "Item " + strconv.Itoa(a.item+1)
	}
	so, ok := s.(*schema.Object)
	if !ok {
		return b.toJSON(f, a, nil, false, "any JSON value is allowed")
	}
	v := schema.Resolve(b.root, so, sptr)
	ev := v // what the value must be: X for an optional "anyOf [X, null]"
	if alt, ok := schema.UnwrapOptional(b.root, v); ok {
		ev = alt
		f.Nullable = hasNullAlternative(b.root, v)
	}
	if t := firstNonEmpty(v.Str("title"), ev.Str("title")); t != "" {
		f.Label = t
		if a.item >= 0 {
			f.Label += " " + strconv.Itoa(a.item+1)
		}
	}
	f.Help = firstNonEmpty(v.Str("description"), ev.Str("description"))
	dflt, _, hasDflt := v.Get("default")
	if !hasDflt {
		dflt, _, hasDflt = ev.Get("default")
	}
	if a.depth > schema.MaxParamDepth {
		return b.toJSON(f, a, dflt, hasDflt, fmt.Sprintf("nested more than %d levels deep", schema.MaxParamDepth))
	}
	kind, reason := b.classify(ev, a.depth == 0)
	if kind != "json" && slices.Contains(ev.Types(), "null") {
		f.Nullable = true
	}
	if kind == "choice" && hasNullAlternative(b.root, ev) {
		f.Nullable = true
	}
	if kind == "array" || kind == "object" || kind == "choice" {
		target := ev[len(ev)-1].Ptr
		if b.stack[target] {
			kind, reason = "json", "a recursive definition"
		} else {
			b.stack[target] = true
			defer delete(b.stack, target)
		}
	}
	if kind == "json" {
		f.Nullable = false
	}
	in := a // what the editor of X shows: nothing when the value is null
	if f.Nullable && a.has && a.val == nil {
		f.Null = true
		in.has, in.val = false, nil
	}
	switch kind {
	case "string":
		reason = stringField(&f, ev, in)
	case "number", "integer":
		reason = numberField(&f, ev, in, kind == "integer")
	case "boolean":
		f.Kind = "boolean"
		if in.has {
			bv, ok := in.val.(bool)
			if !ok {
				reason = "the value is not true or false"
			}
			f.Value = strconv.FormatBool(bv)
		}
	case "enum":
		reason = enumField(&f, ev, in)
	case "longenum":
		if reason = stringField(&f, ev, in); reason == "" {
			f.Hint = joinHints(fmt.Sprintf("one of %d choices", len(ev.Array("enum"))), f.Hint)
		}
	case "object":
		reason = b.objectField(&f, ev, in)
	case "array":
		reason = b.arrayField(&f, ev, in)
	case "choice":
		reason = b.choiceField(&f, ev, in)
	}
	if reason != "" {
		if isValueReason(reason) {
			b.misfits++
		}
		return b.toJSON(f, a, dflt, hasDflt, reason)
	}
	if !in.has {
		b.keepTyped(&f)
	}
	if hasDflt {
		f.Default = valueText(f, dflt)
	}
	if x, _, _ := v.Get("deprecated"); x == true {
		f.Hint = joinHints("deprecated", f.Hint)
	}
	return f
}

// isValueReason tells the reasons that come from a field's value (it does not
// fit the schema) from those that come from the schema itself.
func isValueReason(reason string) bool {
	return strings.HasPrefix(reason, "the value ") || strings.HasPrefix(reason, "holds properties") ||
		strings.HasPrefix(reason, "item ") && !strings.HasPrefix(reason, "items")
}

// hasNullAlternative reports whether anyOf or oneOf offers {"type": "null"}.
func hasNullAlternative(root any, v schema.View) bool {
	for _, k := range []string{"anyOf", "oneOf"} {
		x, p, _ := v.Get(k)
		alts, _ := x.([]any)
		for i, e := range alts {
			if eo, ok := e.(*schema.Object); ok {
				if ts := schema.Resolve(root, eo, schema.PtrJoin(p, k, strconv.Itoa(i))).Types(); len(ts) == 1 && ts[0] == "null" {
					return true
				}
			}
		}
	}
	return false
}

// keepTyped shows, in a field the values leave unset, what was submitted for
// it (BuildFrom): text that could not be read, or a value that was left out
// with its map row.
func (b *former) keepTyped(f *Field) {
	if b.sub == nil {
		return
	}
	t, ok := b.sub[FieldName(f.Path)]
	if !ok || len(t) == 0 || t[0] == "" {
		return
	}
	text := strings.ReplaceAll(t[0], "\r\n", "\n")
	switch f.Kind {
	case "string", "number", "integer", "json":
		f.Value = text
		if f.Kind == "string" && strings.ContainsAny(text, "\n") {
			f.Input = "textarea"
		}
	case "boolean":
		if text == "true" || text == "false" {
			f.Value, f.Set = text, true
		}
	case "enum":
		if i := slices.Index(f.EnumJSON, text); i >= 0 {
			text = f.Enum[i]
		}
		if slices.Contains(f.Enum, text) {
			f.Value, f.Set = text, true
		}
	}
}

// toJSON turns f into a JSON sub-editor, keeping where it is and what it is called.
func (b *former) toJSON(f Field, a formPos, dflt any, hasDflt bool, reason string) Field {
	j := Field{
		Pointer: f.Pointer, Path: f.Path, Name: f.Name, Label: f.Label, Help: f.Help,
		Kind: "json", Required: f.Required, Set: a.has, Hint: reason,
	}
	if a.has {
		j.Value = jsonText(a.val, true)
	} else {
		b.keepTyped(&j)
	}
	if hasDflt {
		j.Default = jsonText(dflt, false)
	}
	return j
}

// classify picks the kind of input for a schema, or "json" and why not.
func (b *former) classify(v schema.View, root bool) (kind, reason string) {
	if c, _, ok := v.Get("const"); ok {
		if !scalar(c) {
			return "json", "a constant object or array"
		}
		return "enum", ""
	}
	if v.Has("enum") {
		enum := v.Array("enum")
		if len(enum) == 0 {
			return "json", "an enum without choices"
		}
		if slices.ContainsFunc(enum, func(e any) bool { return !scalar(e) }) {
			return "json", "choices that are objects or arrays"
		}
		if len(enum) > MaxChoices {
			// Too many for a select: strings are typed, other values given as JSON.
			if slices.ContainsFunc(enum, func(e any) bool { _, ok := e.(string); return !ok }) {
				return "json", fmt.Sprintf("more than %d choices", MaxChoices)
			}
			return "longenum", ""
		}
		return "enum", ""
	}
	if v.Has("oneOf") || v.Has("anyOf") {
		return b.classifyChoice(v)
	}
	merged := v.Has("allOf") && !allOfFollowed(v) // parts schema.ObjectProperties merges
	if merged && !b.objectParts(v) {
		return "json", "allOf: several schemas combined"
	}
	var ts []string
	for _, t := range v.Types() {
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
	case v.Has("properties") || merged:
		return "object", ""
	case v.Has("items") || v.Has("prefixItems"):
		return "array", ""
	case len(v.Types()) > 0:
		return "json", "always null"
	case root:
		return "object", "" // MCP: the arguments are an object, typed or not
	}
	return "json", "no type: any JSON value is allowed"
}

// choiceSiblings are the keywords that make a oneOf/anyOf a constraint on a
// schema of its own (properties that one of several subsets must hold)
// rather than a choice between schemas: such a schema stays JSON.
var choiceSiblings = []string{"properties", "required", "items", "prefixItems", "additionalProperties",
	"patternProperties", "allOf", "enum", "const", "not", "if"}

// classifyChoice reads oneOf/anyOf: a choice between at least two schemas
// that are not null, or JSON when the form cannot offer it as one.
func (b *former) classifyChoice(v schema.View) (kind, reason string) {
	key := "anyOf"
	if v.Has("oneOf") {
		key = "oneOf"
		if v.Has("anyOf") {
			return "json", "oneOf and anyOf together"
		}
	}
	alts := v.Array(key)
	for _, s := range choiceSiblings {
		if v.Has(s) {
			return "json", key + ": one of several schemas"
		}
	}
	n := 0
	for _, e := range alts {
		if _, ok := e.(*schema.Object); !ok && e != true {
			return "json", key + ": one of several schemas"
		}
		n++
	}
	if n < 2 {
		return "json", key + ": one of several schemas"
	}
	return "choice", ""
}

// variantSchema is one schema of a choice and its pointer in the document.
type variantSchema struct {
	s   any
	ptr string
}

// choiceField builds a choice's variants: the one the value fits (the
// submitted choice when it fits too) is built with the value, the others
// empty; without a value, the submitted choice or the first is chosen.
func (b *former) choiceField(f *Field, v schema.View, a formPos) string {
	f.Kind = "choice"
	key := "anyOf"
	if v.Has("oneOf") {
		key = "oneOf"
	}
	x, p, _ := v.Get(key)
	alts, _ := x.([]any)
	var vs []variantSchema
	for i, e := range alts {
		ptr := schema.PtrJoin(p, key, strconv.Itoa(i))
		if eo, ok := e.(*schema.Object); ok {
			if ts := schema.Resolve(b.root, eo, ptr).Types(); len(ts) == 1 && ts[0] == "null" {
				continue
			}
		}
		vs = append(vs, variantSchema{e, ptr})
	}
	if len(vs) == 0 {
		return key + ": always null"
	}
	pos := func(j int, has bool) formPos {
		return formPos{ptr: a.ptr, path: VariantPath(a.path, j), name: a.name, item: a.item,
			required: a.required, val: a.val, has: has, depth: a.depth + 1}
	}
	picked := -1
	if b.sub != nil {
		if n, err := strconv.Atoi(b.sub.Get(FieldName(a.path) + VariantSuffix)); err == nil && n >= 0 && n < len(vs) {
			picked = n
		}
	}
	chosen := max(picked, 0)
	var fitted *Field // the chosen variant, built with the value while trying it
	if a.has {
		saved, savedRows := b.misfits, b.subRows
		fits := func(j int) bool {
			before := b.misfits
			vf := b.field(vs[j].s, vs[j].ptr, pos(j, true))
			if b.misfits != before {
				return false
			}
			fitted = &vf
			return true
		}
		chosen = -1
		if picked >= 0 && fits(picked) {
			chosen = picked
		} else {
			for j := range vs {
				if fits(j) {
					chosen = j
					break
				}
			}
		}
		b.misfits, b.subRows = saved, savedRows
		if chosen < 0 {
			return "the value fits none of the variants"
		}
	}
	f.Chosen = chosen
	seen := map[string]int{}
	for j, alt := range vs {
		var vf Field
		if j == chosen && fitted != nil {
			vf = *fitted
		} else {
			vf = b.field(alt.s, alt.ptr, pos(j, a.has && j == chosen))
		}
		vf.Label = b.variantLabel(alt, vf)
		vf.Name = "" // the choice is the property; its variants are not marked required again
		if n := seen[vf.Label]; n > 0 {
			vf.Label += " (" + strconv.Itoa(n+1) + ")"
		}
		seen[vf.Label]++
		f.Variants = append(f.Variants, vf)
	}
	return ""
}

// variantLabel names a variant for the picker: its title, else what tells it
// apart: a constant ("circle"), a constant property ("kind: circle"), the
// properties an object requires ("object: width, height"), or its type.
func (b *former) variantLabel(alt variantSchema, f Field) string {
	format := ""
	if so, ok := alt.s.(*schema.Object); ok {
		v := schema.Resolve(b.root, so, alt.ptr)
		if t := v.Str("title"); strings.TrimSpace(t) != "" {
			return strings.TrimSpace(t)
		}
		format = v.Str("format")
	}
	if format != "" && (f.Kind == "string" || f.Kind == "number" || f.Kind == "integer") {
		return f.Kind + " (" + format + ")"
	}
	switch f.Kind {
	case "enum":
		if len(f.Enum) == 1 {
			return f.Enum[0]
		}
		return "one of " + strings.Join(f.Enum, ", ")
	case "object":
		var names []string
		for _, c := range f.Fields {
			if c.Kind == "enum" && len(c.Enum) == 1 {
				return c.Name + ": " + c.Enum[0]
			}
		}
		for _, c := range f.Fields {
			if c.Required {
				names = append(names, c.Name)
			}
		}
		if len(names) == 0 {
			for _, c := range f.Fields {
				names = append(names, c.Name)
			}
		}
		switch {
		case len(names) == 0:
			return "object"
		case len(names) > 3:
			names = append(names[:3], "…")
		}
		return "object: " + strings.Join(names, ", ")
	case "array":
		if f.Item != nil {
			return "list of " + f.Item.Kind
		}
		return "list"
	case "map":
		return "map"
	case "choice":
		return "one of several"
	case "json":
		return "JSON value"
	}
	return f.Kind
}

// mapSchema finds the schema of a map's values: additionalProperties, or
// the one pattern of patternProperties (whose pattern keys must then match),
// with the pattern of propertyNames. ok is false for an object whose
// properties the form cannot list as rows.
func (b *former) mapSchema(v schema.View) (vs variantSchema, keyPattern string, ok bool) {
	ap, app, hasAP := v.Get("additionalProperties")
	pp, ppp := v.Object("patternProperties")
	if names, _ := v.Object("propertyNames"); names != nil {
		keyPattern = names.Str("pattern")
	}
	switch {
	case pp != nil:
		if len(pp.Keys()) != 1 || hasAP && ap != false || keyPattern != "" {
			return vs, "", false
		}
		k := pp.Keys()[0]
		s, _ := pp.Get(k)
		return variantSchema{s, schema.PtrJoin(ppp, "patternProperties", k)}, k, true
	case hasAP:
		if ao, isObj := ap.(*schema.Object); isObj {
			return variantSchema{ao, schema.PtrJoin(app, "additionalProperties")}, keyPattern, true
		}
	}
	return vs, "", false
}

// mapField builds a map's rows: from the values, or from a submitted form as
// its rows were typed (BuildFrom), a row's value from the values when its
// key is there and not taken by an earlier row.
func (b *former) mapField(f *Field, v schema.View, a formPos, vs variantSchema, keyPattern string) string {
	f.Kind = "map"
	f.KeyPattern = keyPattern
	f.MinItems, f.MaxItems = intPtr(v, "minProperties"), intPtr(v, "maxProperties")
	var vo *schema.Object
	if a.has {
		var ok bool
		if vo, ok = a.val.(*schema.Object); !ok {
			return "the value is not an object"
		}
	}
	tmpl := b.field(vs.s, vs.ptr, formPos{ptr: a.ptr + "/-", path: a.path + "/-", item: -1, required: true, depth: a.depth + 1})
	tmpl.Label = "Value"
	f.Item = &tmpl
	type row struct {
		key string
		val any
		has bool
	}
	var rows []row
	if n, ok := b.rowsSent(a.path); ok {
		f.Set = true
		used := map[string]bool{}
		for i := range n {
			r := row{key: b.sub.Get(FieldName(a.path+"/"+strconv.Itoa(i)) + KeySuffix)}
			if x, ok := vo.Get(r.key); ok && !used[r.key] {
				r.val, r.has, used[r.key] = x, true, true
			}
			rows = append(rows, r)
		}
	} else {
		for _, k := range vo.Keys() {
			x, _ := vo.Get(k)
			rows = append(rows, row{k, x, true})
		}
	}
	for i, r := range rows {
		rf := b.field(vs.s, vs.ptr, formPos{ptr: schema.PtrJoin(a.ptr, r.key), path: a.path + "/" + strconv.Itoa(i),
			item: i, required: true, val: r.val, has: r.has, depth: a.depth + 1})
		rf.Key, rf.Label = r.key, "Value "+strconv.Itoa(i+1)
		f.Fields = append(f.Fields, rf)
	}
	var hints []string
	if c := countText(f.MinItems, f.MaxItems); c != "" {
		hints = append(hints, c+" entries")
	}
	if keyPattern != "" {
		hints = append(hints, "keys match "+keyPattern)
	}
	f.Hint = joinHints(hints...)
	return ""
}

// itemsUnread puts back, for a submitted form (BuildFrom), the items of the array
// at a that could not be read: the values leave them out, so the items after one
// would each show in the place before theirs. The items are read again one by one
// from the submission, in their places; those that cannot be read are reported, to
// show what was typed (keepTyped).
func (b *former) itemsUnread(item Field, a formPos, arr *[]any) map[int]bool {
	n, ok := b.rowsSent(a.path)
	if !ok || n <= len(*arr) {
		return nil
	}
	d := &formDecoder{form: b.sub, json: map[string]bool{}, last: b.subLast, errs: &verr.Error{}}
	for _, p := range b.sub[JSONKey] {
		d.json[p] = true
	}
	unread := map[int]bool{}
	out := make([]any, 0, n)
	for i := range n {
		before := len(d.errs.Fields)
		l := loc{schema.PtrJoin(a.ptr, strconv.Itoa(i)), schema.PtrJoin(a.path, strconv.Itoa(i))}
		v, ok := d.value(item, l, true)
		if !ok || len(d.errs.Fields) > before {
			unread[i], v = true, nil
		}
		out = append(out, v)
	}
	*arr = out
	return unread
}

// rowsSent counts the rows a submitted form has for the map at path: its row
// count, or one more than the highest row index among its inputs. All maps
// together get at most maxFormItems rows.
func (b *former) rowsSent(path string) (int, bool) {
	if b.sub == nil {
		return 0, false
	}
	if b.subLast == nil {
		b.subLast = lastIndexes(b.sub)
	}
	name := FieldName(path)
	n, ok := 0, false
	if c, has := b.sub[name]; has && len(c) > 0 {
		ok = true
		if x, err := strconv.Atoi(strings.TrimSpace(c[0])); err == nil && x > 0 {
			n = x
		}
	}
	if last, has := b.subLast[name]; has {
		n, ok = max(n, last), true
	}
	n = max(min(n, maxFormItems-b.subRows), 0)
	b.subRows += n
	return n, ok
}

// keyProblem says what is wrong with a map row's key, or "". re is the
// compiled pattern (nil: none, or one Go cannot run: the server checks it).
func keyProblem(key, pattern string, re *regexp.Regexp) string {
	if key == "" {
		return "the key is empty"
	}
	if re != nil && !re.MatchString(key) {
		return "the key " + strconv.Quote(key) + " does not match " + pattern
	}
	return ""
}

// allOfFollowed reports whether resolve already read a single-part allOf as
// a wrapper (the view continues into the part).
func allOfFollowed(v schema.View) bool {
	for i, l := range v {
		if l.Schema.Has("allOf") {
			return i+1 < len(v) && v[i+1].Ptr == schema.PtrJoin(l.Ptr, "allOf", "0")
		}
	}
	return false
}

// objectParts reports whether every part of an allOf is an object schema the
// form can merge (properties and required, as ObjectProperties reads them).
func (b *former) objectParts(v schema.View) bool {
	x, p, _ := v.Get("allOf")
	parts, _ := x.([]any)
	for i, part := range parts {
		po, ok := part.(*schema.Object)
		if !ok {
			return false
		}
		pv := schema.Resolve(b.root, po, schema.PtrJoin(p, "allOf", strconv.Itoa(i)))
		if hasAny(pv[len(pv)-1].Schema, []string{"oneOf", "anyOf", "allOf", "enum", "const", "items", "prefixItems"}) {
			return false
		}
		if ts := pv.Types(); len(ts) > 0 && !slices.Equal(ts, []string{"object"}) {
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

func stringField(f *Field, v schema.View, a formPos) string {
	f.Kind = "string"
	if a.has {
		s, ok := a.val.(string)
		if !ok {
			return "the value is not a string"
		}
		if strings.ContainsRune(s, '\r') {
			// A browser sends every line break of a text box as CR LF, and reading the
			// form makes each one LF: a CR would be lost. As JSON it stays.
			return "the value holds a carriage return (\\r), which a text box cannot keep"
		}
		f.Value = s
	}
	f.MinLength, f.MaxLength = intPtr(v, "minLength"), intPtr(v, "maxLength")
	f.Pattern = v.Str("pattern")
	format := v.Str("format")
	f.Secret = schema.MarksSecret(v) || secrets.LooksSecretName(a.name)
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
func stringInput(f *Field, v schema.View, format string) (input, hint string) {
	if format != "" && formatInputs[format] == "" && format != "password" {
		hint = "format: " + format
		if ex, ok := schema.FormatExample(format); ok {
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
	case v.Has("contentMediaType") || v.Has("contentEncoding") || longText[lastWord(f.Name)],
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

func numberField(f *Field, v schema.View, a formPos, integer bool) string {
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
	lo, hasLo := v.Num("minimum")
	hi, hasHi := v.Num("maximum")
	xlo, hasXlo := v.Num("exclusiveMinimum")
	xhi, hasXhi := v.Num("exclusiveMaximum")
	if x, _, _ := v.Get("exclusiveMinimum"); x == true && hasLo { // draft-04
		xlo, hasXlo, hasLo = lo, true, false
	}
	if x, _, _ := v.Get("exclusiveMaximum"); x == true && hasHi {
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
	if m, ok := v.Num("multipleOf"); ok && m > 0 {
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

func enumField(f *Field, v schema.View, a formPos) string {
	f.Kind = "enum"
	vals := v.Array("enum")
	if c, _, ok := v.Get("const"); ok {
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
	case *schema.Object:
		y, ok := b.(*schema.Object)
		if !ok || len(x.Keys()) != len(y.Keys()) {
			return false
		}
		for _, k := range x.Keys() {
			xv, _ := x.Get(k)
			if yv, ok := y.Get(k); !ok || !sameJSON(xv, yv) {
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

func (b *former) objectField(f *Field, v schema.View, a formPos) string {
	f.Kind = "object"
	var vo *schema.Object
	if a.has {
		var ok bool
		if vo, ok = a.val.(*schema.Object); !ok {
			return "the value is not an object"
		}
	}
	props, required := schema.ObjectProperties(b.root, v)
	_, _, isMap := b.mapSchema(v)
	if len(props) == 0 && !v.Has("properties") {
		if vs, pat, ok := b.mapSchema(v); ok && a.depth > 0 {
			return b.mapField(f, v, a, vs, pat)
		}
		ap, _, hasAP := v.Get("additionalProperties")
		rootMap := a.depth == 0 && isMap && !v.Has("patternProperties") // the arguments stay an object: rows in it
		if !rootMap && (v.Has("patternProperties") || ap != false && (hasAP || a.depth > 0)) {
			return "an object with free-form properties"
		}
	}
	order := b.requiredOrder(v)
	slices.SortStableFunc(props, func(p, q schema.Property) int {
		i, j := slices.Index(order, p.Name), slices.Index(order, q.Name)
		switch {
		case i >= 0 && j >= 0:
			return i - j
		case i >= 0:
			return -1
		case j >= 0:
			return 1
		}
		return strings.Compare(p.Name, q.Name)
	})
	known := map[string]bool{}
	for _, p := range props {
		if p.Schema == false {
			continue // the property may not be given at all
		}
		known[p.Name] = true
		cv, has := vo.Get(p.Name)
		f.Fields = append(f.Fields, b.field(p.Schema, p.Ptr, formPos{
			ptr: schema.PtrJoin(a.ptr, p.Name), path: schema.PtrJoin(a.path, p.Name), name: p.Name, item: -1,
			required: required[p.Name], val: cv, has: has, depth: a.depth + 1,
		}))
	}
	var extra []string
	more := schema.NewObject()
	for _, k := range vo.Keys() {
		if !known[k] {
			extra = append(extra, strconv.Quote(k))
			x, _ := vo.Get(k)
			more.Set(k, x)
		}
	}
	if xs, pat, ok := b.mapSchema(v); ok && !v.Has("patternProperties") {
		// Properties beyond the declared ones, as rows under them.
		mf := Field{Pointer: a.ptr, Path: a.path + MoreSuffix, Label: "More properties"}
		if reason := b.mapField(&mf, v, formPos{ptr: a.ptr, path: a.path + MoreSuffix, item: -1,
			val: more, has: len(extra) > 0, depth: a.depth}, xs, pat); reason != "" {
			return reason
		}
		mf.MinItems, mf.MaxItems, mf.Hint = nil, nil, ""
		if pat != "" {
			mf.Hint = "keys match " + pat
		}
		f.Extra = &mf
		return ""
	}
	if len(extra) > 0 {
		return "holds properties the schema does not declare: " + strings.Join(extra, ", ")
	}
	return ""
}

// requiredOrder lists required names as the schema gives them: its own
// "required", then those of allOf parts.
func (b *former) requiredOrder(v schema.View) []string {
	var out []string
	add := func(v schema.View) {
		for _, r := range v.Array("required") {
			if s, ok := r.(string); ok && !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	add(v)
	_, p, _ := v.Get("allOf")
	for i, e := range v.Array("allOf") {
		if sub, ok := e.(*schema.Object); ok {
			add(schema.Resolve(b.root, sub, schema.PtrJoin(p, "allOf", strconv.Itoa(i))))
		}
	}
	return out
}

func (b *former) arrayField(f *Field, v schema.View, a formPos) string {
	f.Kind = "array"
	f.MinItems, f.MaxItems = intPtr(v, "minItems"), intPtr(v, "maxItems")
	if v.Has("prefixItems") {
		return "a tuple (prefixItems)"
	}
	x, ip, _ := v.Get("items")
	items, ok := x.(*schema.Object)
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
	iptr := schema.PtrJoin(ip, "items")
	tmpl := b.field(items, iptr, formPos{ptr: a.ptr + "/-", path: a.path + "/-", item: len(arr), required: true, depth: a.depth + 1})
	if tmpl.Kind == "json" {
		return "items: " + tmpl.Hint
	}
	f.Item = &tmpl
	unread := b.itemsUnread(tmpl, a, &arr)
	for i, el := range arr {
		it := b.field(items, iptr, formPos{
			ptr: schema.PtrJoin(a.ptr, strconv.Itoa(i)), path: schema.PtrJoin(a.path, strconv.Itoa(i)), item: i, required: true, val: el, has: !unread[i], depth: a.depth + 1,
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
	if u, _, _ := v.Get("uniqueItems"); u == true {
		f.Hint = joinHints(f.Hint, "no duplicates")
	}
	return ""
}

func joinHints(hs ...string) string {
	return strings.Join(slices.DeleteFunc(hs, func(h string) bool { return h == "" }), "; ")
}

// valueText renders a decoded value as Field.Value text for f's kind.
func valueText(f Field, v any) string {
	switch f.Kind {
	case "string":
		if s, ok := v.(string); ok {
			return s
		}
	case "enum":
		for i, e := range f.EnumJSON {
			if ev, err := schema.Decode([]byte(e)); err == nil && sameJSON(ev, v) {
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
	case *schema.Object:
		buf.WriteByte('{')
		for i, k := range t.Keys() {
			if i > 0 {
				buf.WriteByte(',')
			}
			appendJSON(buf, k)
			buf.WriteByte(':')
			v, _ := t.Get(k)
			appendJSON(buf, v)
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

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s = strings.TrimSpace(s); s != "" {
			return s
		}
	}
	return ""
}

func intPtr(v schema.View, k string) *int {
	if n, ok := v.Integer(k); ok {
		return &n
	}
	return nil
}

func hasAny(o *schema.Object, keys []string) bool {
	for _, k := range keys {
		if o.Has(k) {
			return true
		}
	}
	return false
}

func countText(lo, hi *int) string {
	switch {
	case lo != nil && hi != nil:
		return fmt.Sprintf("%d to %d", *lo, *hi)
	case lo != nil:
		return fmt.Sprintf("at least %d", *lo)
	case hi != nil:
		return fmt.Sprintf("at most %d", *hi)
	}
	return ""
}
