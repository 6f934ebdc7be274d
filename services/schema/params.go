package schema

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
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

// MaxParamDepth bounds how deep the documentation (Parameters,
// ExampleArguments) follows nested objects; recursive definitions stop where
// they repeat. Code that walks schemas for people should stop there too.
const MaxParamDepth = 8

// ArgumentNames lists, sorted, every top-level argument name an input schema
// declares: its properties and those of the parts it combines (allOf, oneOf, anyOf,
// then, else; local references followed), as a tool whose operations take different
// arguments declares them. nil when it declares none or is not valid JSON.
func ArgumentNames(inputSchema json.RawMessage) []string {
	root, err := Decode(inputSchema)
	if err != nil {
		return nil
	}
	o, ok := root.(*Object)
	if !ok {
		return nil
	}
	seen := map[string]bool{}
	// Each part once: a hostile schema's parts can refer to each other, or to the root.
	walked := map[*Object]bool{}
	var walk func(v View, depth int)
	walk = func(v View, depth int) {
		// Every layer: a schema's own keywords, and those of what it references.
		for _, l := range v {
			for _, k := range l.Schema.Object("properties").Keys() {
				seen[k] = true
			}
			if depth == MaxParamDepth {
				continue
			}
			part := func(sub *Object, ptr string) {
				if !walked[sub] {
					walked[sub] = true
					walk(Resolve(root, sub, ptr), depth+1)
				}
			}
			for _, kw := range []string{"allOf", "oneOf", "anyOf"} {
				for i, e := range l.Schema.Array(kw) {
					if sub, ok := e.(*Object); ok {
						part(sub, PtrJoin(l.Ptr, kw, strconv.Itoa(i)))
					}
				}
			}
			for _, kw := range []string{"then", "else"} {
				if sub := l.Schema.Object(kw); sub != nil {
					part(sub, PtrJoin(l.Ptr, kw))
				}
			}
		}
	}
	walk(Resolve(root, o, ""), 0)
	if len(seen) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(seen))
}

// Parameters lists the parameters of an input schema in the order the schema
// declares them, following local $ref/$defs references. It returns an empty
// slice for a schema without properties or one that is not valid JSON.
func Parameters(inputSchema json.RawMessage) []Param {
	return parameters(inputSchema, "/inputSchema")
}

func parameters(raw json.RawMessage, at string) []Param {
	root, err := Decode(raw)
	if err != nil {
		return []Param{}
	}
	o, ok := root.(*Object)
	if !ok {
		return []Param{}
	}
	d := &documenter{root: root, at: at}
	ps := d.object(Resolve(root, o, ""), "", map[string]bool{}, 0)
	if ps == nil {
		ps = []Param{}
	}
	return ps
}

type documenter struct {
	root any
	at   string // prefix of Param.Path: "/inputSchema" or "/outputSchema"
	n    int    // parameters listed so far
	size int    // bytes of text listed so far
}

// MaxParams bounds the parameters listed with their children: properties that refer
// to one definition each list it in full, so a few kilobytes of schema nested a few
// levels deep would stand for millions. Past it, parameters are listed without their
// children.
const MaxParams = 2000

// maxParamBytes bounds the text of the parameters listed in the same way, for a
// definition with long names or descriptions that many properties refer to: past it,
// parameters are listed without their children, description, default or allowed values.
const maxParamBytes = 1 << 20

// Property is one property found while listing an object's properties: its
// name, its schema (usually *Object; true or false are schemas too) and the
// schema's pointer.
type Property struct {
	Name   string
	Schema any
	Ptr    string
}

// ObjectProperties lists the properties of the object schema v in document
// root: its own, then those of allOf parts, which is how generators compose
// objects. required holds the names listed as required by v and its parts.
func ObjectProperties(root any, v View) ([]Property, map[string]bool) {
	var out []Property
	seen := map[string]bool{}
	required := map[string]bool{}
	add := func(v View) {
		props, pp := v.Object("properties")
		for _, k := range props.Keys() {
			if !seen[k] {
				seen[k] = true
				out = append(out, Property{k, props.m[k], PtrJoin(pp, "properties", k)})
			}
		}
		for _, r := range v.Array("required") {
			if s, ok := r.(string); ok {
				required[s] = true
			}
		}
	}
	add(v)
	_, allPtr, _ := v.Get("allOf")
	for i, e := range v.Array("allOf") {
		if sub, ok := e.(*Object); ok {
			add(Resolve(root, sub, PtrJoin(allPtr, "allOf", strconv.Itoa(i))))
		}
	}
	return out, required
}

func (d *documenter) object(v View, arg string, stack map[string]bool, depth int) []Param {
	if depth > MaxParamDepth {
		return nil
	}
	props, required := ObjectProperties(d.root, v)
	var out []Param
	for _, p := range props {
		out = append(out, d.param(p, arg+p.Name, required[p.Name], stack, depth))
	}
	return out
}

func (d *documenter) param(pr Property, arg string, required bool, stack map[string]bool, depth int) Param {
	p := Param{Path: d.at + pr.Ptr, Arg: arg, Name: pr.Name, Required: required, Type: "any"}
	s, ok := pr.Schema.(*Object)
	if !ok {
		return p
	}
	v := Resolve(d.root, s, pr.Ptr)
	ev := v
	if alt, ok := UnwrapOptional(d.root, v); ok {
		ev = alt
	}
	p.Type = typeString(d.root, v, 0)
	d.size += len(p.Path) + len(p.Arg) + len(p.Type)
	if d.size > maxParamBytes {
		return p
	}
	p.Description = firstNonEmpty(v.Str("description"), ev.Str("description"), v.Str("title"), ev.Str("title"))
	d.size += len(p.Description)
	if x, _, ok := v.Get("default"); ok {
		p.Default, _ = d.copy(x)
	} else if x, _, ok := ev.Get("default"); ok {
		p.Default, _ = d.copy(x)
	}
	if c, _, ok := ev.Get("const"); ok {
		if x, ok := d.copy(c); ok {
			p.Enum = []any{x}
		}
	} else if enum := ev.Array("enum"); len(enum) > 0 {
		if x, ok := d.copy(enum); ok {
			p.Enum, _ = x.([]any)
		}
	}
	p.Format, p.Pattern = ev.Str("format"), ev.Str("pattern")
	d.size += len(p.Format) + len(p.Pattern)
	p.Min, p.ExclusiveMin = bound(ev, "minimum", "exclusiveMinimum")
	p.Max, p.ExclusiveMax = bound(ev, "maximum", "exclusiveMaximum")
	p.MinLength, p.MaxLength = intPtr(ev, "minLength"), intPtr(ev, "maxLength")
	p.MinItems, p.MaxItems = intPtr(ev, "minItems"), intPtr(ev, "maxItems")
	if x, _, ok := v.Get("deprecated"); ok {
		p.Deprecated, _ = x.(bool)
	}

	// Children: the properties of a nested object or of array items, unless
	// the definition is already being expanded further up (recursion) or the
	// list is long enough already.
	target := ev[len(ev)-1].Ptr
	if d.n++; stack[target] || d.n > MaxParams || d.size > maxParamBytes {
		return p
	}
	stack[target] = true
	defer delete(stack, target)
	if hasType(ev, "object") {
		p.Children = d.object(ev, arg+".", stack, depth+1)
	}
	if hasType(ev, "array") {
		if items, ip := ev.Object("items"); items != nil {
			iv := Resolve(d.root, items, PtrJoin(ip, "items"))
			if alt, ok := UnwrapOptional(d.root, iv); ok {
				iv = alt
			}
			if hasType(iv, "object") && !stack[iv[len(iv)-1].Ptr] {
				stack[iv[len(iv)-1].Ptr] = true
				p.Children = d.object(iv, arg+"[].", stack, depth+1)
				delete(stack, iv[len(iv)-1].Ptr)
			}
		}
	}
	return p
}

// copy returns a value from the schema (a default, the allowed values) for the list,
// or false when it would take the list past maxParamBytes.
func (d *documenter) copy(x any) (any, bool) {
	n, ok := jsonSize(x, maxParamBytes-d.size, 0)
	if !ok {
		return nil, false
	}
	d.size += n
	return plain(x), true
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
func bound(v View, incl, excl string) (*float64, bool) {
	if f, ok := v.Num(incl); ok {
		return &f, false
	}
	if f, ok := v.Num(excl); ok {
		return &f, true
	}
	return nil, false
}

func intPtr(v View, k string) *int {
	if n, ok := v.Integer(k); ok {
		return &n
	}
	return nil
}

// hasType reports whether the schema allows type t, counting a typeless
// schema with properties as an object and one with items as an array.
func hasType(v View, t string) bool {
	ts := v.Types()
	if len(ts) == 0 {
		switch t {
		case "object":
			return v.Has("properties")
		case "array":
			return v.Has("items") || v.Has("prefixItems")
		}
		return false
	}
	return slices.Contains(ts, t)
}

// UnwrapOptional unwraps the "optional X" shape that generators emit,
// anyOf/oneOf [X, {"type": "null"}], returning the view of X.
func UnwrapOptional(root any, v View) (View, bool) {
	if len(v.Types()) > 0 || v.Has("properties") {
		return nil, false
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		x, p, _ := v.Get(k)
		alts, _ := x.([]any)
		var found View
		n := 0
		for i, a := range alts {
			ao, ok := a.(*Object)
			if !ok {
				continue
			}
			av := Resolve(root, ao, PtrJoin(p, k, strconv.Itoa(i)))
			if ts := av.Types(); len(ts) == 1 && ts[0] == "null" {
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
func typeString(root any, v View, depth int) string {
	if depth > 4 {
		return "any"
	}
	if ts := v.Types(); len(ts) > 0 {
		parts := make([]string, len(ts))
		for i, t := range ts {
			parts[i] = t
			if t == "array" {
				parts[i] = arrayType(root, v, depth)
			}
		}
		return strings.Join(parts, " | ")
	}
	if c, _, ok := v.Get("const"); ok {
		return jsonType(c)
	}
	if enum := v.Array("enum"); len(enum) > 0 {
		var ts []string
		for _, e := range enum {
			if t := jsonType(e); !slices.Contains(ts, t) {
				ts = append(ts, t)
			}
		}
		return strings.Join(ts, " | ")
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		x, p, _ := v.Get(k)
		alts, _ := x.([]any)
		var ts []string
		for i, a := range alts {
			if ao, ok := a.(*Object); ok {
				t := typeString(root, Resolve(root, ao, PtrJoin(p, k, strconv.Itoa(i))), depth+1)
				if !slices.Contains(ts, t) {
					ts = append(ts, t)
				}
			}
		}
		if len(ts) > 0 {
			return strings.Join(ts, " | ")
		}
	}
	x, p, _ := v.Get("allOf")
	all, _ := x.([]any)
	for i, a := range all {
		if ao, ok := a.(*Object); ok {
			if t := typeString(root, Resolve(root, ao, PtrJoin(p, "allOf", strconv.Itoa(i))), depth+1); t != "any" {
				return t
			}
		}
	}
	switch {
	case v.Has("properties"):
		return "object"
	case v.Has("items") || v.Has("prefixItems"):
		return arrayType(root, v, depth)
	}
	return "any"
}

func arrayType(root any, v View, depth int) string {
	items, p := v.Object("items")
	if items == nil {
		return "array"
	}
	t := typeString(root, Resolve(root, items, PtrJoin(p, "items")), depth+1)
	if t == "any" {
		return "array"
	}
	if strings.Contains(t, " | ") {
		t = "(" + t + ")"
	}
	return "array of " + t
}

// PropertySchemas gives each top-level parameter of an input schema (those Parameters
// lists: its own properties, those of allOf parts, through $ref) as one plain map of
// the keywords its resolved schema has, the nearest layer's keyword first, so a caller
// reading "type", "enum" or "format" sees what the form and the validator see.
func PropertySchemas(inputSchema json.RawMessage) map[string]map[string]any {
	out := map[string]map[string]any{}
	root, err := Decode(inputSchema)
	if err != nil {
		return out
	}
	o, ok := root.(*Object)
	if !ok {
		return out
	}
	props, _ := ObjectProperties(root, Resolve(root, o, ""))
	for _, p := range props {
		m := map[string]any{}
		if s, ok := p.Schema.(*Object); ok {
			for _, l := range Resolve(root, s, p.Ptr) {
				for _, k := range l.Schema.Keys() {
					if _, set := m[k]; !set && k != "$ref" {
						m[k] = plain(l.Schema.m[k])
					}
				}
			}
		}
		out[p.Name] = m
	}
	return out
}
