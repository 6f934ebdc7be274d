package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// ErrTooComplex is wrapped by CompileSchema's error when validating one value could
// apply the schema's subschemas more than maxEvaluations times. The validator keeps no
// memory of what it has checked and cannot be stopped, so a schema whose definitions
// each apply the next one twice ("allOf": [{"$ref": next}, {"$ref": next}], forty deep)
// would make every call spin a CPU for ever. A schema holding a number the validator
// cannot compare cheaply (numberProblem) is refused with it too.
var ErrTooComplex = errors.New("schema: too complex to validate")

// maxEvaluations bounds how many times validation may apply subschemas to one value
// (one object, array, string... of the arguments). Real schemas stay far below it:
// every alternative of every anyOf, followed through its references, is counted.
const maxEvaluations = 10_000

// The analysis itself is bounded too: a schema that needs more work than this to be
// measured, or whose recursion does not settle in maxRounds passes, is too complex.
const (
	maxAnalysisWork = 20_000_000
	maxRounds       = 50
	maxNamedKeys    = 256 // property names followed apart; past it, one bound for any name
)

// pair is what one subschema costs: h evaluations at the value it is applied to, and
// at most d at any single value nested in it.
type pair struct{ h, d float64 }

func (p pair) plus(q pair) pair { return pair{p.h + q.h, p.d + q.d} }
func (p pair) top() float64     { return max(p.h, p.d) }

// agg is what applying a subschema in place, with everything it applies in place
// ($ref, allOf, anyOf, oneOf, not, if/then/else, dependentSchemas), costs: e
// evaluations at the value itself, and what the subschemas applied to nested values
// cost, one entry per place a nested value can be in. A value is an object or an array,
// never both, and a property name picks its own subschemas, so those are kept apart.
type agg struct {
	e       float64
	named   map[string]pair // an object's property of this name
	other   pair            // an object's property of any other name
	names   float64         // a property name itself (propertyNames)
	items   pair            // an array's item
	content pair            // the decoded content of a string (contentSchema)
}

// bound is the most any one place's value costs, nested values included.
func (a *agg) bound() float64 {
	d := max(a.other.top(), a.names, a.items.top(), a.content.top())
	for _, p := range a.named {
		d = max(d, p.top())
	}
	return d
}

// add adds what b costs to a: two schemas applied to one value.
func (a *agg) add(b *agg) {
	a.e += b.e
	if len(b.named) > 0 || len(a.named) > 0 {
		named := make(map[string]pair, len(a.named)+len(b.named))
		for k, p := range a.named {
			named[k] = p.plus(b.at(k))
		}
		for k, p := range b.named {
			if _, done := named[k]; !done {
				named[k] = a.other.plus(p)
			}
		}
		a.named = named
	}
	a.other = a.other.plus(b.other)
	a.names += b.names
	a.items = a.items.plus(b.items)
	a.content = a.content.plus(b.content)
	if len(a.named) > maxNamedKeys {
		for _, p := range a.named { // keep an upper bound for every name
			a.other = pair{max(a.other.h, p.h), max(a.other.d, p.d)}
		}
		a.named = nil
	}
}

// most is an agg that costs at least as much as a and as b, wherever a value is.
func (a *agg) most(b *agg) *agg {
	hi := func(p, q pair) pair { return pair{max(p.h, q.h), max(p.d, q.d)} }
	out := &agg{e: max(a.e, b.e), other: hi(a.other, b.other), names: max(a.names, b.names),
		items: hi(a.items, b.items), content: hi(a.content, b.content)}
	if len(a.named) > 0 || len(b.named) > 0 {
		out.named = map[string]pair{}
		for k := range a.named {
			out.named[k] = hi(a.at(k), b.at(k))
		}
		for k := range b.named {
			out.named[k] = hi(a.at(k), b.at(k))
		}
	}
	out.add(&agg{}) // folds the names past maxNamedKeys
	return out
}

// at is what a property of the name k costs.
func (a *agg) at(k string) pair {
	if p, ok := a.named[k]; ok {
		return p
	}
	return a.other
}

// complexity measures a compiled schema, as jsonschema's validator runs it: through
// every reference and every branch, without memory of what it has checked.
type complexity struct {
	root    *jsonschema.Schema
	order   []*jsonschema.Schema // every subschema reachable from root, children first
	index   map[*jsonschema.Schema]int
	cyclic  []bool // on a cycle of in-place references, which the validator cuts short
	val     []pair // what each subschema costs, as far as the passes so far tell
	memo    []*agg
	memoGen []int
	gen     int
	active  []bool // on the current in-place path
	work    int
	anchors map[string][]*jsonschema.Schema // $dynamicAnchor name → schemas
	resRoot []*jsonschema.Schema            // schemas a $recursiveRef may land on
	ready   bool                            // resRoot is complete
	// weighted counts, instead of evaluations, the instructions of the patterns that
	// validation may run on one value (checkPatterns), with no bound of its own.
	weighted bool
	// keywords counts each evaluation with the names and values it checks one by one
	// (keywordSize; weighKeywords), with no bound of its own.
	keywords bool
}

// limit is the most one value may cost.
func (x *complexity) limit() float64 {
	if x.weighted || x.keywords {
		return math.Inf(1)
	}
	return maxEvaluations
}

// cost is what applying s costs by itself at its value: one evaluation, that plus its
// keywords' sizes, or its pattern's instructions (nil: a subschema entered and found
// repeating).
func (x *complexity) cost(s *jsonschema.Schema) float64 {
	switch {
	case x.keywords:
		return 1 + float64(keywordSize(s))
	case !x.weighted:
		return 1
	case s == nil:
		return 0
	}
	return float64(insts(s.Pattern))
}

// keywordSize is how many names and values applying s checks one by one, each about
// as costly as an evaluation: the validator lists every missing name of required and
// dependentRequired (dependencies) in each object lacking them, and compares a value
// with every entry of enum (and with const), numbers as exact fractions.
func keywordSize(s *jsonschema.Schema) int {
	if s == nil {
		return 0
	}
	n := len(s.Required)
	if s.Enum != nil {
		for _, v := range s.Enum.Values {
			n += entrySize(v)
		}
	}
	if s.Const != nil {
		n += entrySize(*s.Const)
	}
	for _, r := range s.DependentRequired {
		n += len(r)
	}
	for _, d := range s.Dependencies {
		if r, ok := d.([]string); ok {
			n += len(r)
		}
	}
	return n
}

// weighKeywords returns what validating one value against s may cost, counting the
// names and values its keywords check (keywordSize), given evals, the evaluations
// checkComplexity found. It is not bounded at compile time, as evaluations are: one
// value costs at most the schema's size more, and ValidateArguments and ValidateOutput
// refuse a document whose values times this pass maxEvaluationWork.
func weighKeywords(c *jsonschema.Compiler, s *jsonschema.Schema, doc any, evals float64) float64 {
	x := &complexity{root: s, index: map[*jsonschema.Schema]int{}, anchors: map[string][]*jsonschema.Schema{},
		keywords: true}
	x.findAnchors(c, doc, "", 0)
	x.collect()
	most := 0
	for _, sub := range x.order {
		most = max(most, keywordSize(sub))
	}
	if most == 0 {
		return evals
	}
	// Bound by the costliest subschema at every evaluation: when even that lets the
	// largest document through, the finer analysis could change nothing (most schemas:
	// a few evaluations, a few required names).
	if bound := evals * float64(1+most); bound*MaxValues <= maxEvaluationWork {
		return bound
	}
	if _, err := x.run(); err != nil {
		return evals * float64(1+most) // the analysis gave up: no evaluation costs more
	}
	return max(evals, x.val[x.index[s]].top())
}

// entrySize is what comparing a value with the enum entry or const v costs, in
// evaluations: a number is compared as an exact fraction (slow), an array or object
// value by value (one for each of its values, nested ones included: 20,000 objects of
// 50 numbers each took minutes for 200 items when they were counted as nothing), and a
// string, boolean or null as it is, which costs about nothing (a schema with a 500-name
// enum checks ordinary results of 8,000 values).
func entrySize(v any) int {
	switch v.(type) {
	case json.Number, float64, int, int64:
		return 1
	case []any, map[string]any:
		return jsonValues(v, math.MaxInt)
	}
	return 0
}

// errTooComplex reports s as where validation grows past the bound.
type errTooComplex struct{ at *jsonschema.Schema }

func (errTooComplex) Error() string { return "too complex" }

// checkComplexity returns an error wrapping ErrTooComplex, and a JSON pointer into the
// schema near the cause, when validating one value against s could apply subschemas
// more than maxEvaluations times, and otherwise the most times it may apply them at any
// one value. c is the compiler that compiled s from doc: schemas that only a $dynamicRef
// reaches are compiled through it.
func checkComplexity(c *jsonschema.Compiler, s *jsonschema.Schema, doc any) (string, float64, error) {
	x := &complexity{root: s, index: map[*jsonschema.Schema]int{}, anchors: map[string][]*jsonschema.Schema{}}
	x.findAnchors(c, doc, "", 0)
	at, err := x.run()
	if err == nil {
		return "", x.val[x.index[s]].top(), nil
	}
	ptr := ""
	if at != nil {
		ptr = locationPtr(at)
	}
	where := "the root"
	if ptr != "" {
		where = fmt.Sprintf("%q", ptr)
	}
	return ptr, 0, fmt.Errorf("%w: validating one value could apply its subschemas more than %d times (from %s, through $ref, allOf, anyOf, oneOf and the like, each branch checked again for every reference to it); make definitions refer to each other less often", ErrTooComplex, maxEvaluations, where)
}

// findAnchors compiles every schema in doc that has a $dynamicAnchor: the validator may
// jump to any of them from a $dynamicRef, and nothing else need refer to them.
func (x *complexity) findAnchors(c *jsonschema.Compiler, v any, ptr string, depth int) {
	if depth > 10_000 {
		return
	}
	switch t := v.(type) {
	case map[string]any:
		if name, ok := t["$dynamicAnchor"].(string); ok {
			frag := (&url.URL{Fragment: ptr}).String() // "#/$defs/a%20b"
			if s, err := c.Compile(baseURL + frag); err == nil && s.DynamicAnchor == name {
				x.anchors[name] = append(x.anchors[name], s)
			}
		}
		for _, k := range sortedKeys(t) {
			x.findAnchors(c, t[k], PtrJoin(ptr, k), depth+1)
		}
	case []any:
		for i, e := range t {
			x.findAnchors(c, e, fmt.Sprintf("%s/%d", ptr, i), depth+1)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// inPlace lists the subschemas s applies to the same value, each group one
// reference: a $dynamicRef or $recursiveRef lands on one of its group, found at run time.
func (x *complexity) inPlace(s *jsonschema.Schema) [][]*jsonschema.Schema {
	var out [][]*jsonschema.Schema
	add := func(ss ...*jsonschema.Schema) {
		for _, c := range ss {
			if c != nil {
				out = append(out, []*jsonschema.Schema{c})
			}
		}
	}
	add(s.Ref, s.Not, s.If, s.Then, s.Else)
	add(s.AllOf...)
	add(s.AnyOf...)
	add(s.OneOf...)
	if r := s.RecursiveRef; r != nil {
		g := []*jsonschema.Schema{r}
		if r.RecursiveAnchor && x.ready { // the outermost one validated so far
			g = append(g, x.resRoot...)
		}
		out = append(out, g)
	}
	if d := s.DynamicRef; d != nil && d.Ref != nil {
		g := []*jsonschema.Schema{d.Ref}
		if d.Anchor != "" && d.Ref.DynamicAnchor == d.Anchor {
			g = append(g, x.anchors[d.Anchor]...)
		}
		out = append(out, g)
	}
	for _, k := range sortedKeys(s.DependentSchemas) {
		add(s.DependentSchemas[k])
	}
	for _, k := range sortedKeys(s.Dependencies) {
		if d, ok := s.Dependencies[k].(*jsonschema.Schema); ok {
			add(d)
		}
	}
	return out
}

// inPlaceAll is inPlace without the groups.
func (x *complexity) inPlaceAll(s *jsonschema.Schema) []*jsonschema.Schema {
	var out []*jsonschema.Schema
	for _, g := range x.inPlace(s) {
		out = append(out, g...)
	}
	return out
}

// nested lists the subschemas s applies to values nested in the one it is applied to.
func nested(s *jsonschema.Schema) []*jsonschema.Schema {
	var out []*jsonschema.Schema
	add := func(vs ...any) {
		for _, v := range vs {
			switch t := v.(type) {
			case *jsonschema.Schema:
				if t != nil {
					out = append(out, t)
				}
			case []*jsonschema.Schema:
				for _, c := range t {
					if c != nil {
						out = append(out, c)
					}
				}
			}
		}
	}
	for _, k := range sortedKeys(s.Properties) {
		add(s.Properties[k])
	}
	for _, k := range patterns(s) {
		add(s.PatternProperties[k])
	}
	add(s.AdditionalProperties, s.UnevaluatedProperties, s.PropertyNames, s.Items, s.AdditionalItems,
		s.PrefixItems, s.Items2020, s.Contains, s.UnevaluatedItems, s.ContentSchema)
	return out
}

// patterns lists the keys of s's patternProperties in a stable order.
func patterns(s *jsonschema.Schema) []jsonschema.Regexp {
	ks := make([]jsonschema.Regexp, 0, len(s.PatternProperties))
	for k := range s.PatternProperties {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, func(a, b jsonschema.Regexp) int { return strings.Compare(a.String(), b.String()) })
	return ks
}

// run measures the schema: it lists every subschema, children first, then works out
// what each costs, pass after pass, until recursive definitions settle. It returns the
// subschema where the cost passes the bound.
func (x *complexity) run() (*jsonschema.Schema, error) {
	if x.order == nil { // checkPatterns collects first
		x.collect()
	}
	n := len(x.order)
	x.val, x.memo, x.memoGen, x.active = make([]pair, n), make([]*agg, n), make([]int, n), make([]bool, n)
	x.markCycles()
	for round := 0; round < maxRounds; round++ {
		x.gen++
		changed := false
		for i, s := range x.order {
			a, err := x.closure(s)
			if err != nil {
				return err.(errTooComplex).at, ErrTooComplex
			}
			if v := (pair{a.e, a.bound()}); v != x.val[i] {
				x.val[i], changed = v, true
			}
		}
		// Costs only grow from pass to pass: past the bound at the root, they stay past it.
		if x.val[x.index[x.root]].top() > x.limit() {
			return x.culprit(), ErrTooComplex
		}
		if !changed {
			return nil, nil
		}
	}
	return x.culprit(), ErrTooComplex // a recursion that costs more at every level
}

// culprit is the first subschema, children first, whose cost passes the bound: where
// the growth begins.
func (x *complexity) culprit() *jsonschema.Schema {
	for i, v := range x.val {
		if v.top() > x.limit() {
			return x.order[i]
		}
	}
	return x.root
}

// collect lists every subschema reachable from the root, children first. A first walk
// finds where a $recursiveRef may land: the validator picks the outermost schema
// validated so far in a resource with "$recursiveAnchor": true, which is the root, a
// resource's own root ($id) or a reference's target.
func (x *complexity) collect() {
	seen := map[*jsonschema.Schema]bool{}
	var walk func(s *jsonschema.Schema)
	walk = func(s *jsonschema.Schema) {
		if seen[s] {
			return
		}
		seen[s] = true
		if s.ID != "" || s.RecursiveAnchor {
			x.resRoot = append(x.resRoot, s)
		}
		for _, r := range []*jsonschema.Schema{s.Ref, s.RecursiveRef} {
			if r != nil {
				x.resRoot = append(x.resRoot, r)
			}
		}
		if s.DynamicRef != nil && s.DynamicRef.Ref != nil {
			x.resRoot = append(x.resRoot, s.DynamicRef.Ref)
		}
		for _, c := range x.inPlaceAll(s) { // x.resRoot is not needed yet: its members are reached anyway
			walk(c)
		}
		for _, c := range nested(s) {
			walk(c)
		}
	}
	walk(x.root)
	x.resRoot = append(x.resRoot, x.root)
	x.ready = true

	var visit func(s *jsonschema.Schema)
	visit = func(s *jsonschema.Schema) {
		if _, seen := x.index[s]; seen {
			return
		}
		x.index[s] = -1
		for _, c := range x.inPlaceAll(s) {
			visit(c)
		}
		for _, c := range nested(s) {
			visit(c)
		}
		x.index[s] = len(x.order)
		x.order = append(x.order, s)
	}
	visit(x.root)
}

// markCycles marks the subschemas on a cycle of in-place references (Tarjan's strongly
// connected components). The validator stops such a cycle where a subschema repeats, so
// what one costs depends on the path that led to it, and it is never memoised.
func (x *complexity) markCycles() {
	n := len(x.order)
	x.cyclic = make([]bool, n)
	idx, low, on := make([]int, n), make([]int, n), make([]bool, n)
	for i := range idx {
		idx[i] = -1
	}
	var stack []int
	next := 0
	var strong func(v int)
	strong = func(v int) {
		idx[v], low[v] = next, next
		next++
		stack = append(stack, v)
		on[v] = true
		for _, c := range x.inPlaceAll(x.order[v]) {
			w := x.index[c]
			if w == v {
				x.cyclic[v] = true
			}
			if idx[w] < 0 {
				strong(w)
				low[v] = min(low[v], low[w])
			} else if on[w] {
				low[v] = min(low[v], idx[w])
			}
		}
		if low[v] == idx[v] {
			top := len(stack) - 1
			for stack[top] != v {
				top--
			}
			if len(stack)-top > 1 {
				for _, w := range stack[top:] {
					x.cyclic[w] = true
				}
			}
			for _, w := range stack[top:] {
				on[w] = false
			}
			stack = stack[:top]
		}
	}
	for v := range n {
		if idx[v] < 0 {
			strong(v)
		}
	}
}

// closure is what applying s in place costs, as the validator walks it: every
// in-place subschema on every path, a path stopping where a subschema repeats.
func (x *complexity) closure(s *jsonschema.Schema) (*agg, error) {
	i := x.index[s]
	if x.memo[i] != nil && x.memoGen[i] == x.gen {
		return x.memo[i], nil
	}
	a := x.own(s)
	x.active[i] = true
	defer func() { x.active[i] = false }()
	for _, g := range x.inPlace(s) {
		var b *agg // the most any one of the group costs
		for _, c := range g {
			if x.work++; x.work > maxAnalysisWork {
				return nil, errTooComplex{s}
			}
			cb := &agg{e: x.cost(nil)} // entered, found repeating, stopped
			if !x.active[x.index[c]] {
				var err error
				if cb, err = x.closure(c); err != nil {
					return nil, err
				}
			}
			if b == nil {
				b = cb
				continue
			}
			x.work += len(b.named) + len(cb.named)
			b = b.most(cb)
		}
		x.work += len(a.named) + len(b.named)
		a.add(b)
		if a.e > x.limit() {
			return nil, errTooComplex{s}
		}
	}
	if !x.cyclic[i] {
		x.memo[i], x.memoGen[i] = a, x.gen
	}
	return a, nil
}

// own is what s costs by itself: one evaluation, plus what the subschemas it applies
// to nested values cost, as the last pass left them.
func (x *complexity) own(s *jsonschema.Schema) *agg {
	a := &agg{e: x.cost(s)}
	if s.Bool != nil {
		return a
	}
	v := func(c *jsonschema.Schema) pair {
		if c == nil {
			return pair{}
		}
		return x.val[x.index[c]]
	}
	schemaOf := func(v any) *jsonschema.Schema {
		c, _ := v.(*jsonschema.Schema)
		return c
	}
	// Properties: each name its own subschema and the patterns it matches; any other
	// name the patterns, additionalProperties and unevaluatedProperties (which never
	// applies to a name this schema's own properties evaluate).
	a.other = v(schemaOf(s.AdditionalProperties)).plus(v(s.UnevaluatedProperties))
	pats := patterns(s)
	for _, p := range pats {
		a.other = a.other.plus(v(s.PatternProperties[p]))
	}
	x.work += len(s.Properties) * (1 + len(pats))
	if len(s.Properties) > 0 {
		a.named = make(map[string]pair, len(s.Properties))
		// Too many to try, or too long to match: every pattern matches.
		matchAll := len(s.Properties)*len(pats) > 100_000 || matchWork(s, pats) > keyMatchWork
		for _, k := range sortedKeys(s.Properties) {
			p := v(s.Properties[k])
			for _, re := range pats {
				if matchAll || matchesName(re, k) {
					p = p.plus(v(s.PatternProperties[re]))
				}
			}
			a.named[k] = p
		}
		if len(a.named) > maxNamedKeys {
			for _, p := range a.named {
				a.other = pair{max(a.other.h, p.h), max(a.other.d, p.d)}
			}
			a.named = nil
		}
	}
	a.names = v(s.PropertyNames).h
	if x.weighted { // every name is matched against every key of patternProperties
		for _, re := range pats {
			a.names += float64(insts(re))
		}
	}
	// Items: at most one of the tuple's subschemas, then items, additionalItems,
	// contains and unevaluatedItems.
	var tuple pair
	prefix := s.PrefixItems
	if t, ok := s.Items.([]*jsonschema.Schema); ok {
		prefix = t
	}
	for _, c := range prefix {
		p := v(c)
		tuple = pair{max(tuple.h, p.h), max(tuple.d, p.d)}
	}
	a.items = tuple.plus(v(schemaOf(s.Items))).plus(v(schemaOf(s.AdditionalItems))).plus(v(s.Items2020)).
		plus(v(s.Contains)).plus(v(s.UnevaluatedItems))
	a.content = v(s.ContentSchema)
	return a
}

// matchWork bounds what matching every property name of s against every pattern of pats
// costs, in name bytes times instructions.
func matchWork(s *jsonschema.Schema, pats []jsonschema.Regexp) int {
	names, progs := 0, 0
	for k := range s.Properties {
		names += len(k)
	}
	for _, re := range pats {
		progs += insts(re)
	}
	return names * progs
}
