package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolwarden/toolwarden/services/verr"
)

// What one document checked against a schema may hold. The validator cannot be stopped:
// it turns every number it looks at into an exact fraction (1e999999 is a million-digit
// integer, 16 ms each time), allocates a whole error for every value that fails (600
// bytes: a 4 MiB array of wrong items is 1.2 GB), and applies the schema to every value.
const (
	// MaxValues bounds the JSON values (objects, arrays, strings, numbers, booleans and
	// nulls; not property names) of one document checked against a schema.
	MaxValues = 250_000
	// maxNumberText bounds a number's text, in characters, and maxExponent its written
	// exponent: float64 reaches 1.8e308 and 5e-324, an int64 has 19 digits.
	maxNumberText = 100
	maxExponent   = 400
	// maxEvaluationWork bounds one validation, in values times the most evaluations the
	// schema may make at one value (checkComplexity; weighKeywords adds the names and
	// values of required and enum, each about one): 0.25 to 1.8 µs an evaluation as
	// measured on the 2-core development machine, so about 1 s or more. Real schemas make
	// at most 5 (the test data's), so MaxValues values stay well within it.
	maxEvaluationWork = 4_000_000
)

// numberProblem says why the number written n is not given to the validator, or "".
func numberProblem(n string) string {
	if len(n) > maxNumberText {
		return fmt.Sprintf("is a number written with %d characters; at most %d are checked against a schema", len(n), maxNumberText)
	}
	i := strings.IndexAny(n, "eE")
	if i < 0 {
		return ""
	}
	// Written, not parsed: ParseFloat reads 1e-999999 as 0, but the validator builds 10^999999.
	digits := strings.TrimLeft(strings.TrimLeft(n[i+1:], "+-"), "0")
	if e, err := strconv.Atoi(digits); digits != "" && (err != nil || e > maxExponent) {
		return fmt.Sprintf("is a number with the exponent %s; exponents up to ±%d are checked against a schema", n[i+1:], maxExponent)
	}
	return ""
}

// scan is what the pre-pass found in a document: how many values the schema reaches
// (reach), and the first such number not to be given to the validator, with its place.
type scan struct {
	values        int
	at, numberWhy string
}

// maxReach bounds the schemas one reach tracks; past it, everything under the value is
// counted, as when in doubt.
const maxReach = 64

// reach is the schemas that apply to one value of a document: those given by its
// parent, with every schema they apply to the value itself ($ref, allOf, if, ...). The
// validator never looks inside an array or object unless one of them applies something
// to its children (items, properties, ...), so what no schema reaches is not counted: a
// database tool's thousands of rows under {"type":"array"} are never checked. all means
// everything at and under the value counts: for a keyword not modelled here ($dynamicRef,
// an extension) or one that compares the whole value (enum, const, uniqueItems). nil
// reaches nothing. The children's reaches are cached, so each is worked out once a scan.
type reach struct {
	schemas  []*jsonschema.Schema
	all      bool
	patterns bool // some schema has patternProperties: every property counts (no regexp run twice)
	prefix   int  // the longest prefixItems (or draft-7 items list)
	pre      []*reach
	item     *reach // for the items past prefix
	named    map[string]*reach
	other    *reach // for a property no schema names
	cached   struct{ item, other bool }
}

var everything = &reach{all: true}

// newReach is the reach of a value the schemas in apply to.
func newReach(in []*jsonschema.Schema) *reach {
	seen := map[*jsonschema.Schema]bool{}
	r := &reach{}
	for len(in) > 0 {
		s := in[len(in)-1]
		in = in[:len(in)-1]
		if s == nil || seen[s] {
			continue
		}
		seen[s] = true
		if s.DynamicRef != nil || s.RecursiveRef != nil || len(s.Extensions) > 0 || s.Const != nil || s.Enum != nil ||
			s.UniqueItems || len(r.schemas) == maxReach {
			return everything
		}
		r.schemas = append(r.schemas, s)
		in = append(in, s.Ref, s.Not, s.If, s.Then, s.Else)
		in = append(in, s.AllOf...)
		in = append(in, s.AnyOf...)
		in = append(in, s.OneOf...)
		for _, d := range s.DependentSchemas {
			in = append(in, d)
		}
		for _, d := range s.Dependencies {
			if d, ok := d.(*jsonschema.Schema); ok {
				in = append(in, d)
			}
		}
		list, _ := s.Items.([]*jsonschema.Schema)
		r.prefix = max(r.prefix, len(s.PrefixItems), len(list))
		r.patterns = r.patterns || len(s.PatternProperties) > 0 || s.PropertyNames != nil
	}
	if len(r.schemas) == 0 {
		return nil
	}
	return r
}

// index is the reach of an array's item i.
func (r *reach) index(i int) *reach {
	switch {
	case r.all:
		return everything
	case i < r.prefix:
		if r.pre == nil {
			r.pre = make([]*reach, r.prefix)
			for j := range r.pre {
				r.pre[j] = r.itemReach(j)
			}
		}
		return r.pre[i]
	case !r.cached.item:
		r.item, r.cached.item = r.itemReach(i), true
	}
	return r.item
}

// itemReach is every schema that may apply to item i (more than apply, at times).
func (r *reach) itemReach(i int) *reach {
	var in []*jsonschema.Schema
	for _, s := range r.schemas {
		switch items := s.Items.(type) {
		case *jsonschema.Schema:
			in = append(in, items)
		case []*jsonschema.Schema:
			if i < len(items) {
				in = append(in, items[i])
			}
		}
		if a, ok := s.AdditionalItems.(*jsonschema.Schema); ok {
			in = append(in, a)
		}
		if i < len(s.PrefixItems) {
			in = append(in, s.PrefixItems[i])
		} else {
			in = append(in, s.Items2020)
		}
		in = append(in, s.Contains, s.UnevaluatedItems)
	}
	return newReach(in)
}

// prop is the reach of an object's property name.
func (r *reach) prop(name string) *reach {
	if r.all || r.patterns {
		return everything
	}
	if c, ok := r.named[name]; ok {
		return c
	}
	named := false
	var in []*jsonschema.Schema
	for _, s := range r.schemas {
		if p, ok := s.Properties[name]; ok {
			named = true
			in = append(in, p)
		} else if a, ok := s.AdditionalProperties.(*jsonschema.Schema); ok {
			in = append(in, a)
		}
		in = append(in, s.UnevaluatedProperties)
	}
	if !named { // the same for every name no schema names
		if !r.cached.other {
			r.other, r.cached.other = newReach(in), true
		}
		return r.other
	}
	if r.named == nil {
		r.named = map[string]*reach{}
	}
	r.named[name] = newReach(in)
	return r.named[name]
}

// scanRaw scans a JSON document checked against s without decoding it. ok is false when
// jsontext cannot read it; the caller then decodes it as the validator does and scans
// the result.
func scanRaw(s *jsonschema.Schema, raw []byte) (sc scan, ok bool) {
	dec := jsontext.NewDecoder(bytes.NewReader(raw), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	type open struct {
		r      *reach
		object bool
		name   string // the property being read
		n      int    // the items read
	}
	var stack []open
	root := newReach([]*jsonschema.Schema{s})
	for {
		k := dec.PeekKind()
		switch k {
		case 0: // the end, or an error
			_, err := dec.ReadToken()
			return sc, err == io.EOF
		case '}', ']':
			if _, err := dec.ReadToken(); err != nil {
				return sc, false
			}
			stack = stack[:len(stack)-1]
			continue
		}
		r := root
		if len(stack) > 0 {
			top := &stack[len(stack)-1]
			if _, n := dec.StackIndex(dec.StackDepth()); top.object && n%2 == 0 { // a property name
				tok, err := dec.ReadToken()
				if err != nil {
					return sc, false
				}
				top.name = tok.String()
				continue
			}
			if top.object {
				r = top.r.prop(top.name)
			} else {
				r = top.r.index(top.n)
				top.n++
			}
		}
		if r == nil { // no schema looks at it, nor inside it
			if err := dec.SkipValue(); err != nil {
				return sc, false
			}
			continue
		}
		sc.values++
		switch k {
		case '0':
			v, err := dec.ReadValue()
			if err != nil {
				return sc, false
			}
			if sc.numberWhy == "" && (len(v) > maxNumberText || bytes.ContainsAny(v, "eE")) {
				if why := numberProblem(string(v)); why != "" {
					sc.at, sc.numberWhy = string(dec.StackPointer()), why
				}
			}
		case '{', '[':
			if _, err := dec.ReadToken(); err != nil {
				return sc, false
			}
			stack = append(stack, open{r: r, object: k == '{'})
		default:
			if err := dec.SkipValue(); err != nil {
				return sc, false
			}
		}
	}
}

// scanValue scans a decoded document (maps or *Object, slices, json.Number, and any
// other scalar) the same way from its reach r, keys in order so the number named is
// always the same.
func scanValue(r *reach, v any) scan {
	type step struct {
		key   string
		index int // -1 for a key
	}
	var sc scan
	var path []step // the place walked, spelled out only for the number named
	var walk func(r *reach, v any)
	walk = func(r *reach, v any) {
		if r == nil {
			return
		}
		sc.values++
		switch t := v.(type) {
		case map[string]any:
			for _, k := range sortedKeys(t) {
				path = append(path, step{k, -1})
				walk(r.prop(k), t[k])
				path = path[:len(path)-1]
			}
		case *Object:
			for _, k := range t.Keys() {
				path = append(path, step{k, -1})
				walk(r.prop(k), t.m[k])
				path = path[:len(path)-1]
			}
		case []any:
			for i, e := range t {
				path = append(path, step{"", i})
				walk(r.index(i), e)
				path = path[:len(path)-1]
			}
		case json.Number:
			if why := numberProblem(string(t)); why != "" && sc.numberWhy == "" {
				tokens := make([]string, len(path))
				for i, p := range path {
					if tokens[i] = p.key; p.index >= 0 {
						tokens[i] = strconv.Itoa(p.index)
					}
				}
				sc.at, sc.numberWhy = PtrJoin("", tokens...), why
			}
		}
	}
	walk(r, v)
	return sc
}

// scanBytes scans raw checked against s; v is the document when it had to be decoded to
// be scanned, and err says it is not JSON.
func scanBytes(s *jsonschema.Schema, raw []byte) (sc scan, v any, err error) {
	if sc, ok := scanRaw(s, raw); ok {
		return sc, nil, nil
	}
	if v, err = jsonschema.UnmarshalJSON(bytes.NewReader(raw)); err != nil {
		return scan{}, nil, err
	}
	return scanValue(newReach([]*jsonschema.Schema{s}), v), v, nil
}

// problem says why a document scanned as sc is not checked against s, or "": at is the
// place of the number it names ("" for too many values).
func (sc scan) problem(s *jsonschema.Schema) (at, why string) {
	if sc.values > MaxValues {
		return "", fmt.Sprintf("too many values to check against the schema: the schema would check %d JSON values of the document; at most %d are checked", sc.values, MaxValues)
	}
	if sc.numberWhy != "" {
		return sc.at, sc.numberWhy
	}
	if evals := factsOf(s).evals; float64(sc.values)*evals > maxEvaluationWork {
		return "", fmt.Sprintf("too many values to check against the schema: %d JSON values, each of which the schema may check up to %.0f times (through $ref, allOf, anyOf and the like, and once more for each name or value that required, dependentRequired or enum lists), could take %.2g evaluations, more than the %.0g allowed",
			sc.values, evals, float64(sc.values)*evals, float64(maxEvaluationWork))
	}
	return "", ""
}

// refuse is ValidateArguments' problem for a document it does not check against s, or nil.
func (sc scan) refuse(s *jsonschema.Schema) error {
	at, why := sc.problem(s)
	switch {
	case why == "":
		return nil
	case why == sc.numberWhy:
		e := &verr.Error{}
		e.AddKind(at, verr.KindValue, why)
		return e
	}
	return verr.New("", why+"; send fewer")
}

// ErrUnchecked is wrapped by ValidateOutput's error for a document the validator is not
// given.
var ErrUnchecked = errors.New("schema: too large to check against the schema")

// unchecked is the error, wrapping ErrUnchecked, for a document scanned as sc that
// ValidateArguments would refuse unchecked (too many values the schema reaches, too much
// work, or a number the validator must not be given), or nil: output is not sent by its
// checker, so it says it was not checked rather than asking for fewer.
func (sc scan) unchecked(s *jsonschema.Schema) error {
	at, why := sc.problem(s)
	switch {
	case why == "":
		return nil
	case sc.numberWhy == why:
		return fmt.Errorf("%w: the value at %q %s", ErrUnchecked, at, why)
	}
	return fmt.Errorf("%w: %s", ErrUnchecked, strings.TrimPrefix(why, "too many values to check against the schema: "))
}

// checkNumbers refuses a schema holding a number the validator must not be given, with
// its place: compiling it (minimum, multipleOf), checking the schema against the
// meta-schema (maxLength) or comparing a value to it (enum, const) costs seconds.
func checkNumbers(doc any) (string, error) {
	sc := scanValue(everything, doc)
	if sc.numberWhy == "" {
		return "", nil
	}
	return sc.at, fmt.Errorf("%w: the value at %q %s; write a smaller number", ErrTooComplex, sc.at, sc.numberWhy)
}

// What a schema document may hold before the library compiles it. Its compiler finds
// each subschema in a queue by linear search (200,000 properties took four minutes) and
// recurses without a bound (3,000 nested "items" took 27 s and 55 GB), and its validator
// compares a value with every entry of an enum, nested values and all.
const (
	// maxSchemaNodes bounds the objects and booleans of a schema document, anywhere in
	// it: a superset of its subschemas (each is one or the other). 10,000 true
	// properties compile in about 0.9 s on the 2-core machine, 20,000 in 3.6 s.
	maxSchemaNodes = 10_000
	// maxEnumValues bounds the JSON values of one enum or const, nested ones included.
	maxEnumValues = 10_000
)

// checkShape refuses, with an error wrapping ErrTooComplex and the place, a schema
// document (either decoded form: *Object or maps) nested more than maxDepth levels deep
// (Decode's limit), holding more than maxSchemaNodes objects and booleans, or an enum or
// const of more than maxEnumValues values. It walks the document once and stops at the
// first fault, so it costs far less than compiling.
func checkShape(doc any) (string, error) {
	nodes := 0
	var walk func(v any, ptr string, depth int, enumKey bool) (string, error)
	walk = func(v any, ptr string, depth int, enumKey bool) (string, error) {
		if depth > maxDepth {
			return ptr, fmt.Errorf("%w: the schema is nested more than %d levels deep", ErrTooComplex, maxDepth)
		}
		if enumKey {
			if n := jsonValues(v, maxEnumValues+1); n > maxEnumValues {
				return ptr, fmt.Errorf("%w: the value at %q holds more than %d JSON values; an enum or const may hold at most %d", ErrTooComplex, ptr, maxEnumValues, maxEnumValues)
			}
		}
		each := func(k string, c any) (string, error) {
			return walk(c, PtrJoin(ptr, k), depth+1, k == "enum" || k == "const")
		}
		switch t := v.(type) {
		case bool:
			nodes++
		case *Object:
			nodes++
			for _, k := range t.keys {
				if p, err := each(k, t.m[k]); err != nil {
					return p, err
				}
			}
		case map[string]any:
			nodes++
			for _, k := range sortedKeys(t) {
				if p, err := each(k, t[k]); err != nil {
					return p, err
				}
			}
		case []any:
			for i, c := range t {
				if p, err := walk(c, PtrJoin(ptr, strconv.Itoa(i)), depth+1, false); err != nil {
					return p, err
				}
			}
		}
		if nodes > maxSchemaNodes {
			return "", fmt.Errorf("%w: the schema holds more than %d objects and booleans (subschemas, enum entries...); at most %d are compiled", ErrTooComplex, maxSchemaNodes, maxSchemaNodes)
		}
		return "", nil
	}
	return walk(doc, "", 0, false)
}

// jsonValues counts the JSON values in v (v itself, and every value nested in it; not
// property names), stopping once it reaches limit.
func jsonValues(v any, limit int) int {
	n := 0
	var walk func(v any)
	walk = func(v any) {
		if n++; n >= limit {
			return
		}
		switch t := v.(type) {
		case *Object:
			for _, k := range t.keys {
				walk(t.m[k])
			}
		case map[string]any:
			for _, c := range t {
				walk(c)
			}
		case []any:
			for _, c := range t {
				walk(c)
			}
		}
	}
	walk(v)
	return min(n, limit)
}
