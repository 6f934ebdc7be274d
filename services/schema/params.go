package schema

import (
	"encoding/json"
	"math"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Param is one parameter of a tool, as the documentation table shows it.
type Param struct {
	// Path is the JSON pointer of the parameter's schema in the tool
	// definition ("/inputSchema/properties/path"), the same space as
	// Finding.Path, so findings can be shown next to their parameter. For a
	// parameter defined through $ref it points into $defs.
	Path string `json:"path"`
	// Arg is where the value goes in the arguments: "path", "options.depth",
	// "files[].name".
	Arg  string `json:"arg"`
	Name string `json:"name"`
	// Type is readable: "string", "string | null", "array of string", "any".
	Type        string `json:"type"`
	Required    bool   `json:"required"`
	Description string `json:"description,omitempty"`
	// Default, Enum and the bounds hold JSON values; whole numbers are int64.
	Default any      `json:"default,omitempty"`
	Enum    []any    `json:"enum,omitempty"` // a const shows as a one-value Enum
	Format  string   `json:"format,omitempty"`
	Pattern string   `json:"pattern,omitempty"`
	Min     *float64 `json:"min,omitempty"`
	Max     *float64 `json:"max,omitempty"`
	// ExclusiveMin and ExclusiveMax say that Min and Max are not allowed themselves.
	ExclusiveMin bool `json:"exclusive_min,omitempty"`
	ExclusiveMax bool `json:"exclusive_max,omitempty"`
	MinLength    *int `json:"min_length,omitempty"`
	MaxLength    *int `json:"max_length,omitempty"`
	MinItems     *int `json:"min_items,omitempty"`
	MaxItems     *int `json:"max_items,omitempty"`
	Deprecated   bool `json:"deprecated,omitempty"`
	// Children are the properties of a nested object, or of the objects in an
	// array (Arg "files[].name").
	Children []Param `json:"children,omitempty"`
}

// maxParamDepth bounds how deep the documentation follows nested objects;
// recursive definitions stop where they repeat.
const maxParamDepth = 8

// Parameters lists the parameters of an input schema in the order the schema
// declares them, following local $ref/$defs references. It returns an empty
// slice for a schema without properties or one that is not valid JSON.
func Parameters(inputSchema json.RawMessage) []Param {
	return parameters(inputSchema, "/inputSchema")
}

func parameters(raw json.RawMessage, at string) []Param {
	root, err := decode(raw)
	if err != nil {
		return []Param{}
	}
	o, ok := root.(*obj)
	if !ok {
		return []Param{}
	}
	d := &documenter{root: root, at: at}
	ps := d.object(resolve(root, o, ""), "", map[string]bool{}, 0)
	if ps == nil {
		ps = []Param{}
	}
	return ps
}

type documenter struct {
	root any
	at   string // prefix of Param.Path: "/inputSchema" or "/outputSchema"
}

// propRef is one property found while listing an object's properties.
type propRef struct {
	name   string
	schema any
	ptr    string
}

// objectProps lists the properties of an object schema: its own, then those
// of allOf parts, which is how generators compose objects.
func objectProps(root any, v view) ([]propRef, map[string]bool) {
	var out []propRef
	seen := map[string]bool{}
	required := map[string]bool{}
	add := func(v view) {
		props, pp := v.object("properties")
		for _, k := range props.keysOrNil() {
			if !seen[k] {
				seen[k] = true
				out = append(out, propRef{k, props.m[k], ptrJoin(pp, "properties", k)})
			}
		}
		for _, r := range v.array("required") {
			if s, ok := r.(string); ok {
				required[s] = true
			}
		}
	}
	add(v)
	_, allPtr, _ := v.get("allOf")
	for i, e := range v.array("allOf") {
		if sub, ok := e.(*obj); ok {
			add(resolve(root, sub, ptrJoin(allPtr, "allOf", strconv.Itoa(i))))
		}
	}
	return out, required
}

func (d *documenter) object(v view, arg string, stack map[string]bool, depth int) []Param {
	if depth > maxParamDepth {
		return nil
	}
	props, required := objectProps(d.root, v)
	var out []Param
	for _, p := range props {
		out = append(out, d.param(p, arg+p.name, required[p.name], stack, depth))
	}
	return out
}

func (d *documenter) param(pr propRef, arg string, required bool, stack map[string]bool, depth int) Param {
	p := Param{Path: d.at + pr.ptr, Arg: arg, Name: pr.name, Required: required, Type: "any"}
	s, ok := pr.schema.(*obj)
	if !ok {
		return p
	}
	v := resolve(d.root, s, pr.ptr)
	ev := v
	if alt, ok := optionalAlt(d.root, v); ok {
		ev = alt
	}
	p.Type = typeString(d.root, v, 0)
	p.Description = firstNonEmpty(v.str("description"), ev.str("description"), v.str("title"), ev.str("title"))
	if x, _, ok := v.get("default"); ok {
		p.Default = plain(x)
	} else if x, _, ok := ev.get("default"); ok {
		p.Default = plain(x)
	}
	if c, _, ok := ev.get("const"); ok {
		p.Enum = []any{plain(c)}
	} else {
		for _, e := range ev.array("enum") {
			p.Enum = append(p.Enum, plain(e))
		}
	}
	p.Format, p.Pattern = ev.str("format"), ev.str("pattern")
	p.Min, p.ExclusiveMin = bound(ev, "minimum", "exclusiveMinimum")
	p.Max, p.ExclusiveMax = bound(ev, "maximum", "exclusiveMaximum")
	p.MinLength, p.MaxLength = intPtr(ev, "minLength"), intPtr(ev, "maxLength")
	p.MinItems, p.MaxItems = intPtr(ev, "minItems"), intPtr(ev, "maxItems")
	if x, _, ok := v.get("deprecated"); ok {
		p.Deprecated, _ = x.(bool)
	}

	// Children: the properties of a nested object or of array items, unless
	// the definition is already being expanded further up (recursion).
	target := ev[len(ev)-1].ptr
	if stack[target] {
		return p
	}
	stack[target] = true
	defer delete(stack, target)
	if hasType(ev, "object") {
		p.Children = d.object(ev, arg+".", stack, depth+1)
	}
	if hasType(ev, "array") {
		if items, ip := ev.object("items"); items != nil {
			iv := resolve(d.root, items, ptrJoin(ip, "items"))
			if alt, ok := optionalAlt(d.root, iv); ok {
				iv = alt
			}
			if hasType(iv, "object") && !stack[iv[len(iv)-1].ptr] {
				stack[iv[len(iv)-1].ptr] = true
				p.Children = d.object(iv, arg+"[].", stack, depth+1)
				delete(stack, iv[len(iv)-1].ptr)
			}
		}
	}
	return p
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s = strings.TrimSpace(s); s != "" {
			return s
		}
	}
	return ""
}

// bound reads minimum/maximum, or the 2019+ numeric exclusive form.
func bound(v view, incl, excl string) (*float64, bool) {
	if f, ok := v.num(incl); ok {
		return &f, false
	}
	if f, ok := v.num(excl); ok {
		return &f, true
	}
	return nil, false
}

func intPtr(v view, k string) *int {
	if n, ok := v.integer(k); ok {
		return &n
	}
	return nil
}

// hasType reports whether the schema allows type t, counting a typeless
// schema with properties as an object and one with items as an array.
func hasType(v view, t string) bool {
	ts := v.types()
	if len(ts) == 0 {
		switch t {
		case "object":
			return v.has("properties")
		case "array":
			return v.has("items") || v.has("prefixItems")
		}
		return false
	}
	return slices.Contains(ts, t)
}

// optionalAlt unwraps the "optional X" shape that generators emit,
// anyOf/oneOf [X, {"type": "null"}], returning the view of X.
func optionalAlt(root any, v view) (view, bool) {
	if len(v.types()) > 0 || v.has("properties") {
		return nil, false
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		x, p, _ := v.get(k)
		alts, _ := x.([]any)
		var found view
		n := 0
		for i, a := range alts {
			ao, ok := a.(*obj)
			if !ok {
				continue
			}
			av := resolve(root, ao, ptrJoin(p, k, strconv.Itoa(i)))
			if ts := av.types(); len(ts) == 1 && ts[0] == "null" {
				continue
			}
			found, n = av, n+1
		}
		if n == 1 {
			return found, true
		}
	}
	return nil, false
}

// typeString renders a schema's type for people.
func typeString(root any, v view, depth int) string {
	if depth > 4 {
		return "any"
	}
	if ts := v.types(); len(ts) > 0 {
		parts := make([]string, len(ts))
		for i, t := range ts {
			parts[i] = t
			if t == "array" {
				parts[i] = arrayType(root, v, depth)
			}
		}
		return strings.Join(parts, " | ")
	}
	if c, _, ok := v.get("const"); ok {
		return jsonType(c)
	}
	if enum := v.array("enum"); len(enum) > 0 {
		var ts []string
		for _, e := range enum {
			if t := jsonType(e); !slices.Contains(ts, t) {
				ts = append(ts, t)
			}
		}
		return strings.Join(ts, " | ")
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		x, p, _ := v.get(k)
		alts, _ := x.([]any)
		var ts []string
		for i, a := range alts {
			if ao, ok := a.(*obj); ok {
				t := typeString(root, resolve(root, ao, ptrJoin(p, k, strconv.Itoa(i))), depth+1)
				if !slices.Contains(ts, t) {
					ts = append(ts, t)
				}
			}
		}
		if len(ts) > 0 {
			return strings.Join(ts, " | ")
		}
	}
	x, p, _ := v.get("allOf")
	all, _ := x.([]any)
	for i, a := range all {
		if ao, ok := a.(*obj); ok {
			if t := typeString(root, resolve(root, ao, ptrJoin(p, "allOf", strconv.Itoa(i))), depth+1); t != "any" {
				return t
			}
		}
	}
	switch {
	case v.has("properties"):
		return "object"
	case v.has("items") || v.has("prefixItems"):
		return arrayType(root, v, depth)
	}
	return "any"
}

func arrayType(root any, v view, depth int) string {
	items, p := v.object("items")
	if items == nil {
		return "array"
	}
	t := typeString(root, resolve(root, items, ptrJoin(p, "items")), depth+1)
	if t == "any" {
		return "array"
	}
	if strings.Contains(t, " | ") {
		t = "(" + t + ")"
	}
	return "array of " + t
}

// ExampleArguments builds a plausible call for an input schema: every
// required parameter plus the optional ones that have defaults, each set to
// its const, default, first example or first enum value, or else a typed
// example value that satisfies the schema's bounds ("<path>", 0, false, []).
// It returns an empty map when the schema has no parameters or is unusable.
func ExampleArguments(inputSchema json.RawMessage) map[string]any {
	root, err := decode(inputSchema)
	if err != nil {
		return map[string]any{}
	}
	o, ok := root.(*obj)
	if !ok {
		return map[string]any{}
	}
	g := &generator{root: root}
	return g.object(resolve(root, o, ""), 0)
}

type generator struct {
	root any
}

func (g *generator) object(v view, depth int) map[string]any {
	out := map[string]any{}
	if depth > maxParamDepth {
		return out
	}
	props, required := objectProps(g.root, v)
	var optional []propRef
	for _, p := range props {
		s, _ := p.schema.(*obj)
		pv := resolve(g.root, s, p.ptr)
		switch {
		case required[p.name]:
			out[p.name] = g.value(pv, p.name, depth+1)
		case s != nil && pv.has("default"):
			out[p.name] = g.value(pv, p.name, depth+1)
		default:
			optional = append(optional, p)
		}
	}
	if n, ok := v.integer("minProperties"); ok {
		for _, p := range optional {
			if len(out) >= n {
				break
			}
			s, _ := p.schema.(*obj)
			out[p.name] = g.value(resolve(g.root, s, p.ptr), p.name, depth+1)
		}
	}
	return out
}

func (g *generator) value(v view, name string, depth int) any {
	if len(v) == 0 || v[0].o == nil {
		return nameExample(name)
	}
	for _, k := range []string{"const", "default"} {
		if x, _, ok := v.get(k); ok {
			return plain(x)
		}
	}
	if ex := v.array("examples"); len(ex) > 0 {
		return plain(ex[0])
	}
	if enum := v.array("enum"); len(enum) > 0 {
		return plain(enum[0])
	}
	if depth > maxParamDepth {
		return nil
	}
	if alt, ok := g.alternative(v); ok {
		return g.value(alt, name, depth+1)
	}
	typ := ""
	for _, t := range v.types() {
		if t != "null" {
			typ = t
			break
		}
	}
	if typ == "" {
		switch {
		case v.has("properties"):
			typ = "object"
		case v.has("items") || v.has("prefixItems"):
			typ = "array"
		case slices.Equal(v.types(), []string{"null"}):
			return nil
		default:
			typ = "string"
		}
	}
	switch typ {
	case "string":
		return stringExample(v, name)
	case "integer":
		return numberExample(v, true)
	case "number":
		return numberExample(v, false)
	case "boolean":
		return false
	case "array":
		return g.array(v, name, depth)
	case "object":
		return g.object(v, depth)
	}
	return nil
}

// alternative picks the first non-null branch of anyOf/oneOf (or the first
// part of allOf) for a schema that has no type of its own.
func (g *generator) alternative(v view) (view, bool) {
	if len(v.types()) > 0 || v.has("properties") {
		return nil, false
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		x, p, _ := v.get(k)
		alts, _ := x.([]any)
		for i, a := range alts {
			ao, ok := a.(*obj)
			if !ok {
				continue
			}
			av := resolve(g.root, ao, ptrJoin(p, k, strconv.Itoa(i)))
			if ts := av.types(); len(ts) == 1 && ts[0] == "null" {
				continue
			}
			return av, true
		}
	}
	return nil, false
}

func (g *generator) array(v view, name string, depth int) []any {
	out := []any{}
	n, _ := v.integer("minItems")
	x, pp, _ := v.get("prefixItems")
	prefix, _ := x.([]any)
	items, ip := v.object("items")
	for i := 0; i < n; i++ {
		var el any = nameExample(name)
		switch {
		case i < len(prefix):
			if po, ok := prefix[i].(*obj); ok {
				el = g.value(resolve(g.root, po, ptrJoin(pp, "prefixItems", strconv.Itoa(i))), name, depth+1)
			}
		case items != nil:
			iv := resolve(g.root, items, ptrJoin(ip, "items"))
			if enum := iv.array("enum"); i < len(enum) {
				el = plain(enum[i]) // distinct values, in case of uniqueItems
			} else {
				el = g.value(iv, name, depth+1)
			}
		}
		out = append(out, el)
	}
	return out
}

// nameExample is the example value of a string parameter with nothing better to
// show: its name in angle brackets, as documentation writes it ("<path>").
func nameExample(name string) string {
	if name == "" {
		name = "value"
	}
	return "<" + name + ">"
}

// formatExamples are valid values for the common formats.
var formatExamples = map[string]string{
	"date-time":     "2025-01-01T12:00:00Z",
	"date":          "2025-01-01",
	"time":          "12:00:00Z",
	"duration":      "PT1H",
	"email":         "user@example.com",
	"idn-email":     "user@example.com",
	"hostname":      "example.com",
	"idn-hostname":  "example.com",
	"ipv4":          "192.0.2.1",
	"ipv6":          "2001:db8::1",
	"uri":           "https://example.com/",
	"uri-reference": "https://example.com/",
	"iri":           "https://example.com/",
	"iri-reference": "https://example.com/",
	"url":           "https://example.com/",
	"uuid":          "123e4567-e89b-12d3-a456-426614174000",
	"json-pointer":  "/example",
	"regex":         "^example$",
	"uri-template":  "https://example.com/{id}",
}

func stringExample(v view, name string) string {
	minLen, hasMin := v.integer("minLength")
	maxLen, hasMax := v.integer("maxLength")
	var re *regexp.Regexp
	if p := v.str("pattern"); p != "" {
		re, _ = regexp.Compile(p)
	}
	fits := func(s string) bool {
		n := utf8.RuneCountInString(s)
		return (!hasMin || n >= minLen) && (!hasMax || n <= maxLen) && (re == nil || re.MatchString(s))
	}
	if f, ok := formatExamples[v.str("format")]; ok {
		return f
	}
	cands := []string{nameExample(name), name, "example", "abc", "a", "A", "0", "1", "123", "x"}
	if re != nil {
		cands = append(cands, patternExample(re.String()))
	}
	for _, c := range cands {
		if c != "" && fits(c) {
			return c
		}
	}
	s := nameExample(name)
	if hasMin && utf8.RuneCountInString(s) < minLen {
		s += strings.Repeat("x", minLen-utf8.RuneCountInString(s))
	}
	if hasMax && utf8.RuneCountInString(s) > maxLen {
		s = string([]rune(s)[:maxLen])
	}
	return s
}

// numberExample picks 0, or the nearest value the bounds and multipleOf allow.
func numberExample(v view, integer bool) any {
	step := 1.0
	if !integer {
		step = 0.5
	}
	x := 0.0
	lo, hasLo := v.num("minimum")
	xlo, hasXlo := v.num("exclusiveMinimum")
	hi, hasHi := v.num("maximum")
	xhi, hasXhi := v.num("exclusiveMaximum")
	if hasLo && x < lo {
		x = lo
	}
	if hasXlo && x <= xlo {
		x = xlo + step
	}
	if hasHi && x > hi {
		x = hi
	}
	if hasXhi && x >= xhi {
		x = xhi - step
	}
	if hasXlo && hasXhi && (x <= xlo || x >= xhi) {
		x = (xlo + xhi) / 2
	}
	if m, ok := v.num("multipleOf"); ok && m > 0 {
		if r := math.Ceil(x/m) * m; !(hasHi && r > hi) && !(hasXhi && r >= xhi) {
			x = r
		} else {
			x = math.Floor(x/m) * m
		}
	}
	if integer {
		x = math.Ceil(x)
		if (hasHi && x > hi) || (hasXhi && x >= xhi) {
			x--
		}
	}
	return number(x)
}

// patternExample builds a short string that a regular expression matches:
// the first alternative of each choice, the minimum of each repeat, and a
// readable member of each character class. The caller checks the result,
// since anchors and word boundaries are not taken into account.
func patternExample(p string) string {
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return ""
	}
	var b strings.Builder
	var walk func(*syntax.Regexp, int)
	walk = func(re *syntax.Regexp, depth int) {
		if depth > 32 || b.Len() > 256 {
			return
		}
		switch re.Op {
		case syntax.OpLiteral:
			b.WriteString(string(re.Rune))
		case syntax.OpCharClass:
			b.WriteRune(classExample(re.Rune))
		case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
			b.WriteByte('a')
		case syntax.OpCapture, syntax.OpPlus:
			walk(re.Sub[0], depth+1)
		case syntax.OpRepeat:
			for i := 0; i < re.Min && i < 64; i++ {
				walk(re.Sub[0], depth+1)
			}
		case syntax.OpConcat:
			for _, sub := range re.Sub {
				walk(sub, depth+1)
			}
		case syntax.OpAlternate:
			walk(re.Sub[0], depth+1)
		}
	}
	walk(re, 0)
	return b.String()
}

// classExample picks a readable rune from a character class given as ranges.
func classExample(ranges []rune) rune {
	for _, want := range []rune{'a', 'A', '0', '_', '-'} {
		for i := 0; i+1 < len(ranges); i += 2 {
			if ranges[i] <= want && want <= ranges[i+1] {
				return want
			}
		}
	}
	if len(ranges) > 0 {
		return ranges[0]
	}
	return 'a'
}
