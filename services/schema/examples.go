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

// ExampleArguments builds a plausible call for an input schema: every
// required parameter plus the optional ones that have defaults, each set to
// its const, default, first example or first enum value, or else a typed
// example value that satisfies the schema's bounds ("<path>", 0, false, []).
// It returns an empty map when the schema has no parameters or is unusable.
// An example too large to show is shortened (see ExampleArgumentsShortened).
func ExampleArguments(inputSchema json.RawMessage) map[string]any {
	args, _ := ExampleArgumentsShortened(inputSchema)
	return args
}

// The example is documentation that anyone who may see the tool reads, and a schema
// from an untrusted server may ask for more than any page can hold ("minItems":
// 2147483647, or one long name repeated through a definition thousands of times). So
// generated values stop at these sizes, and the example is then marked as shortened.
const (
	maxExampleItems = 16       // array items made for minItems
	maxExampleText  = 256      // characters of a string padded to minLength
	maxExampleName  = 64       // characters of a parameter's name shown as "<name>"
	maxExampleBytes = 64 << 10 // the whole example, counted roughly as JSON
)

// ExampleArgumentsShortened is ExampleArguments that also reports whether the example
// was shortened: cut at maxExampleItems items, maxExampleText characters or
// maxExampleBytes in all, where the schema asks for more. A shortened example does
// not pass its schema, and whoever shows it should say so (Markdown does).
func ExampleArgumentsShortened(inputSchema json.RawMessage) (map[string]any, bool) {
	root, err := Decode(inputSchema)
	if err != nil {
		return map[string]any{}, false
	}
	o, ok := root.(*Object)
	if !ok {
		return map[string]any{}, false
	}
	g := &generator{root: root}
	args := g.object(Resolve(root, o, ""), 0)
	return args, g.shortened
}

type generator struct {
	root      any
	n         int  // values made so far: past MaxParams, placeholders (see MaxParams)
	size      int  // bytes made so far, roughly as JSON: past maxExampleBytes, no more
	shortened bool // something was cut
}

// full reports whether the example has reached maxExampleBytes, and marks it shortened.
func (g *generator) full() bool {
	if g.size > maxExampleBytes {
		g.shortened = true
		return true
	}
	return false
}

// copy returns a value from the schema (a const, a default) for the example, or false
// when it would not fit in what is left of maxExampleBytes.
func (g *generator) copy(x any) (any, bool) {
	n, ok := jsonSize(x, maxExampleBytes-g.size, 0)
	if !ok {
		g.shortened = true
		return nil, false
	}
	g.size += n
	return plain(x), true
}

// jsonSize is about how many bytes v takes as JSON, or false when that is more than
// limit; it stops counting there, so a huge value costs no more than a small one.
func jsonSize(v any, limit, depth int) (int, bool) {
	n := 0
	switch t := v.(type) {
	case string:
		n = len(t) + 2
	case json.Number:
		n = len(t)
	case *Object:
		n = 2
		for _, k := range t.keys {
			if n > limit || depth > maxDepth {
				return 0, false
			}
			m, ok := jsonSize(t.m[k], limit-n-len(k)-4, depth+1)
			if !ok {
				return 0, false
			}
			n += len(k) + 4 + m
		}
	case []any:
		n = 2
		for _, e := range t {
			if n > limit || depth > maxDepth {
				return 0, false
			}
			m, ok := jsonSize(e, limit-n-1, depth+1)
			if !ok {
				return 0, false
			}
			n += m + 1
		}
	default: // true, false, null
		n = 5
	}
	return n, n <= limit
}

func (g *generator) object(v View, depth int) map[string]any {
	out := map[string]any{}
	if depth > MaxParamDepth {
		return out
	}
	add := func(p Property) bool {
		if g.full() {
			return false
		}
		g.size += len(p.Name) + 4
		s, _ := p.Schema.(*Object)
		out[p.Name] = g.value(Resolve(g.root, s, p.Ptr), p.Name, depth+1)
		return true
	}
	props, required := ObjectProperties(g.root, v)
	var optional []Property
	for _, p := range props {
		s, _ := p.Schema.(*Object)
		switch {
		case required[p.Name] || s != nil && Resolve(g.root, s, p.Ptr).Has("default"):
			if !add(p) {
				return out
			}
		default:
			optional = append(optional, p)
		}
	}
	if n, ok := v.Integer("minProperties"); ok {
		for _, p := range optional {
			if len(out) >= n || !add(p) {
				break
			}
		}
	}
	return out
}

func (g *generator) value(v View, name string, depth int) any {
	if g.n++; len(v) == 0 || v[0].Schema == nil || g.n > MaxParams {
		return g.nameExample(name)
	}
	given, found := any(nil), false
	for _, k := range []string{"const", "default"} {
		if x, _, ok := v.Get(k); ok && !found {
			given, found = x, true
		}
	}
	if ex := v.Array("examples"); len(ex) > 0 && !found {
		given, found = ex[0], true
	}
	if enum := v.Array("enum"); len(enum) > 0 && !found {
		given, found = enum[0], true
	}
	if found {
		if x, ok := g.copy(given); ok {
			return x
		}
		return g.nameExample(name)
	}
	if depth > MaxParamDepth {
		return nil
	}
	if alt, ok := g.alternative(v); ok {
		return g.value(alt, name, depth+1)
	}
	typ := ""
	for _, t := range v.Types() {
		if t != "null" {
			typ = t
			break
		}
	}
	if typ == "" {
		switch {
		case v.Has("properties"):
			typ = "object"
		case v.Has("items") || v.Has("prefixItems"):
			typ = "array"
		case slices.Equal(v.Types(), []string{"null"}):
			return nil
		default:
			typ = "string"
		}
	}
	switch typ {
	case "string":
		ex, cut := stringExample(v, name)
		g.size += len(ex) + 2
		g.shortened = g.shortened || cut
		return ex
	case "integer":
		g.size += 8
		return numberExample(v, true)
	case "number":
		g.size += 8
		return numberExample(v, false)
	case "boolean":
		g.size += 5
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
func (g *generator) alternative(v View) (View, bool) {
	if len(v.Types()) > 0 || v.Has("properties") {
		return nil, false
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		x, p, _ := v.Get(k)
		alts, _ := x.([]any)
		for i, a := range alts {
			ao, ok := a.(*Object)
			if !ok {
				continue
			}
			av := Resolve(g.root, ao, PtrJoin(p, k, strconv.Itoa(i)))
			if ts := av.Types(); len(ts) == 1 && ts[0] == "null" {
				continue
			}
			return av, true
		}
	}
	return nil, false
}

func (g *generator) array(v View, name string, depth int) []any {
	out := []any{}
	n, _ := v.Integer("minItems")
	if n > maxExampleItems {
		n, g.shortened = maxExampleItems, true
	}
	x, pp, _ := v.Get("prefixItems")
	prefix, _ := x.([]any)
	items, ip := v.Object("items")
	g.size += 2
	for i := 0; i < n && !g.full(); i++ {
		g.size++
		var el any
		made := false
		switch {
		case i < len(prefix):
			if po, ok := prefix[i].(*Object); ok {
				el, made = g.value(Resolve(g.root, po, PtrJoin(pp, "prefixItems", strconv.Itoa(i))), name, depth+1), true
			}
		case items != nil:
			iv := Resolve(g.root, items, PtrJoin(ip, "items"))
			if enum := iv.Array("enum"); i < len(enum) {
				el, made = g.copy(enum[i]) // distinct values, in case of uniqueItems
			} else {
				el, made = g.value(iv, name, depth+1), true
			}
		}
		if !made {
			el = g.nameExample(name)
		}
		out = append(out, el)
	}
	return out
}

// nameExample is g's nameExample, counted in the example's size.
func (g *generator) nameExample(name string) string {
	ex := nameExample(name)
	g.size += len(ex) + 2
	if utf8.RuneCountInString(name) > maxExampleName {
		g.shortened = true
	}
	return ex
}

// nameExample is the example value of a string parameter with nothing better to
// show: its name in angle brackets, as documentation writes it ("<path>"), a long
// name cut at maxExampleName characters ("<aaa…>").
func nameExample(name string) string {
	if name == "" {
		name = "value"
	}
	if utf8.RuneCountInString(name) > maxExampleName {
		name = string([]rune(name)[:maxExampleName]) + "…"
	}
	return "<" + name + ">"
}

// FormatExample returns a valid value for a common string format
// ("date-time", "email", "uuid", ...).
func FormatExample(format string) (string, bool) {
	ex, ok := formatExamples[format]
	return ex, ok
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

// stringExample picks a string that meets the schema's bounds, or one cut at
// maxExampleText characters when minLength asks for more (then cut is true).
func stringExample(v View, name string) (ex string, cut bool) {
	minLen, hasMin := v.Integer("minLength")
	maxLen, hasMax := v.Integer("maxLength")
	var re *regexp.Regexp
	if p := v.Str("pattern"); p != "" {
		re, _ = regexp.Compile(p)
	}
	fits := func(s string) bool {
		n := utf8.RuneCountInString(s)
		return (!hasMin || n >= minLen) && (!hasMax || n <= maxLen) && (re == nil || re.MatchString(s))
	}
	if f, ok := formatExamples[v.Str("format")]; ok {
		return f, false
	}
	long := utf8.RuneCountInString(name) > maxExampleName // nameExample cuts it
	short := name
	if long {
		short = "" // never a candidate
	}
	cands := []string{nameExample(name), short, "example", "abc", "a", "A", "0", "1", "123", "x"}
	if re != nil {
		cands = append(cands, patternExample(re.String()))
	}
	for i, c := range cands {
		if c != "" && fits(c) {
			return c, long && i == 0
		}
	}
	s := nameExample(name)
	if hasMin && minLen > maxExampleText {
		minLen, cut = maxExampleText, true
	}
	if n := utf8.RuneCountInString(s); hasMin && n < minLen {
		s += strings.Repeat("x", minLen-n)
	}
	if hasMax && utf8.RuneCountInString(s) > maxLen {
		s = string([]rune(s)[:maxLen])
	}
	return s, cut || long
}

// numberExample picks 0, or the nearest value the bounds and multipleOf allow.
func numberExample(v View, integer bool) any {
	step := 1.0
	if !integer {
		step = 0.5
	}
	x := 0.0
	lo, hasLo := v.Num("minimum")
	xlo, hasXlo := v.Num("exclusiveMinimum")
	hi, hasHi := v.Num("maximum")
	xhi, hasXhi := v.Num("exclusiveMaximum")
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
	if m, ok := v.Num("multipleOf"); ok && m > 0 {
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
