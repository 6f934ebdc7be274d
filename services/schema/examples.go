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
func ExampleArguments(inputSchema json.RawMessage) map[string]any {
	root, err := Decode(inputSchema)
	if err != nil {
		return map[string]any{}
	}
	o, ok := root.(*Object)
	if !ok {
		return map[string]any{}
	}
	g := &generator{root: root}
	return g.object(Resolve(root, o, ""), 0)
}

type generator struct {
	root any
	n    int // values made so far: past MaxParams, placeholders (see MaxParams)
}

func (g *generator) object(v View, depth int) map[string]any {
	out := map[string]any{}
	if depth > MaxParamDepth {
		return out
	}
	props, required := ObjectProperties(g.root, v)
	var optional []Property
	for _, p := range props {
		s, _ := p.Schema.(*Object)
		pv := Resolve(g.root, s, p.Ptr)
		switch {
		case required[p.Name]:
			out[p.Name] = g.value(pv, p.Name, depth+1)
		case s != nil && pv.Has("default"):
			out[p.Name] = g.value(pv, p.Name, depth+1)
		default:
			optional = append(optional, p)
		}
	}
	if n, ok := v.Integer("minProperties"); ok {
		for _, p := range optional {
			if len(out) >= n {
				break
			}
			s, _ := p.Schema.(*Object)
			out[p.Name] = g.value(Resolve(g.root, s, p.Ptr), p.Name, depth+1)
		}
	}
	return out
}

func (g *generator) value(v View, name string, depth int) any {
	if g.n++; len(v) == 0 || v[0].Schema == nil || g.n > MaxParams {
		return nameExample(name)
	}
	for _, k := range []string{"const", "default"} {
		if x, _, ok := v.Get(k); ok {
			return plain(x)
		}
	}
	if ex := v.Array("examples"); len(ex) > 0 {
		return plain(ex[0])
	}
	if enum := v.Array("enum"); len(enum) > 0 {
		return plain(enum[0])
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
	x, pp, _ := v.Get("prefixItems")
	prefix, _ := x.([]any)
	items, ip := v.Object("items")
	for i := 0; i < n; i++ {
		var el any = nameExample(name)
		switch {
		case i < len(prefix):
			if po, ok := prefix[i].(*Object); ok {
				el = g.value(Resolve(g.root, po, PtrJoin(pp, "prefixItems", strconv.Itoa(i))), name, depth+1)
			}
		case items != nil:
			iv := Resolve(g.root, items, PtrJoin(ip, "items"))
			if enum := iv.Array("enum"); i < len(enum) {
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

func stringExample(v View, name string) string {
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
