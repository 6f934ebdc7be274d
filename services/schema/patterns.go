package schema

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"regexp/syntax"
	"runtime"
	"slices"
	"strings"
	"sync"
	"weak"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolwarden/toolwarden/services/verr"
)

// Go's regexp runs in time linear in the input, but the factor is the size of the
// pattern's program: "(?:a|b){1000}" thirty times over is 391 characters, 30,000
// instructions, and 18 s on a 50 KB string. The validator cannot be stopped, so the
// work is bounded three times: each pattern's program when compiled, each match, and
// each validation as a whole.
const (
	// maxPatternInsts bounds one pattern's program. Real patterns stay far below it:
	// zod's email pattern is 18 instructions, uuid 116, datetime 95, ipv6 967.
	maxPatternInsts = 5_000
	// maxValidationWork bounds one validation, in document bytes times the instructions
	// of the patterns one value may be checked against (see CheckSize): about 7 s at the
	// slowest measured (7 ns a step, on the 2-core development machine), and room for a
	// 16 MiB output with a uuid pattern (44 instructions) or a base64 one (19). Lower, it
	// refused real uploads and screenshots.
	maxValidationWork = 1_000_000_000
	// keyMatchWork bounds matching the property names a schema declares against its
	// patternProperties at compile time (complexity.go): a schema is compiled often.
	keyMatchWork = 4_000_000
)

// maxMatchWork bounds one match, in input bytes times instructions: the same as a
// whole validation, so a single large value (a base64 image) is checked; a test lowers it.
var maxMatchWork = maxValidationWork

// ErrTooLarge is wrapped by CheckSize's error: a document too large to check against
// its schema's patterns within maxValidationWork.
var ErrTooLarge = errors.New("schema: too large to check against the schema's patterns")

// tooLarge is ValidateArguments' field-less problem for arguments CheckSize refuses.
func tooLarge(err error) error {
	return verr.New("", "too large to check against the tool's patterns: "+
		strings.TrimPrefix(err.Error(), ErrTooLarge.Error()+": ")+"; send shorter arguments")
}

// boundedRegexp is a compiled pattern that refuses, unrun, an input whose match could
// cost more than maxMatchWork: MatchString answers false, as for a value that does not
// match, so an over-long value fails "pattern" (a long property name is matched by no
// patternProperties key and falls to additionalProperties).
type boundedRegexp struct {
	re    *regexp.Regexp
	insts int
}

func (b *boundedRegexp) MatchString(s string) bool {
	return !b.tooLong(s) && b.re.MatchString(s)
}

func (b *boundedRegexp) String() string { return b.re.String() }

func (b *boundedRegexp) tooLong(s string) bool { return len(s) > maxMatchWork/max(b.insts, 1) }

// locationPtr is the JSON pointer into the schema document of a compiled subschema:
// its Location is a URL, whose fragment escapes what is not ASCII or not allowed there
// ("my key" is "my%20key"), and problems name places by plain JSON pointers.
func locationPtr(s *jsonschema.Schema) string {
	frag, ok := strings.CutPrefix(s.Location, baseURL+"#")
	if !ok {
		return ""
	}
	if p, err := url.PathUnescape(frag); err == nil {
		return p
	}
	return frag
}

// patternInsts is the number of instructions Go's regexp compiles p to (as
// regexp.Compile does), or 0 when it cannot compile p.
func patternInsts(p string) int {
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return 0
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return 0
	}
	return len(prog.Inst)
}

// insts is the program size of a compiled pattern (0 for one that matches anything).
func insts(re jsonschema.Regexp) int {
	if b, ok := re.(*boundedRegexp); ok {
		return b.insts
	}
	return 0
}

// matchesName reports whether a patternProperties key applies to a property name, as
// far as the complexity analysis is concerned: a name too long to match counts as
// matched, so the bound stays an upper bound.
func matchesName(re jsonschema.Regexp, name string) bool {
	if b, ok := re.(*boundedRegexp); ok && b.tooLong(name) {
		return true
	}
	return re.MatchString(name)
}

// checkPatterns refuses a schema with a pattern whose program passes maxPatternInsts,
// with a pointer to it, and otherwise returns what its patterns cost (CheckSize): 0 when
// it has none. It runs after checkComplexity, which bounds the analysis it repeats.
func checkPatterns(c *jsonschema.Compiler, s *jsonschema.Schema, doc any) (string, float64, error) {
	x := &complexity{root: s, index: map[*jsonschema.Schema]int{}, anchors: map[string][]*jsonschema.Schema{},
		weighted: true}
	x.findAnchors(c, doc, "", 0)
	x.collect()
	found := false
	for _, sub := range x.order {
		at := locationPtr(sub)
		check := func(re jsonschema.Regexp, ptr string) error {
			if n := insts(re); n > maxPatternInsts {
				return fmt.Errorf("%w: the pattern at %q compiles to %d regexp instructions, over the %d allowed (matching costs the input's length times that); simplify it (fewer or smaller counted repeats such as {1000})", ErrTooComplex, ptr, n, maxPatternInsts)
			} else if n > 0 {
				found = true
			}
			return nil
		}
		if sub.Pattern != nil {
			if err := check(sub.Pattern, at+"/pattern"); err != nil {
				return at + "/pattern", 0, err
			}
		}
		for _, re := range patterns(sub) {
			ptr := PtrJoin(at, "patternProperties", re.String())
			if err := check(re, ptr); err != nil {
				return ptr, 0, err
			}
		}
	}
	if !found {
		return "", 0, nil
	}
	load := float64(maxEvaluations) * maxPatternInsts // if the analysis gives up: the most it can be
	if _, err := x.run(); err == nil {
		load = x.val[x.index[s]].top()
	}
	return "", load, nil
}

// facts is what compiling a schema found that validating against it needs: what
// validating one value may cost (load, the instructions of the patterns applied to it,
// each counted as often as the validator may apply it there; evals, the evaluations of
// subschemas: checkComplexity), and secret, the top-level properties whose values its
// problems do not quote.
type facts struct {
	load, evals float64
	secret      map[string]bool
}

// known holds the facts of the compiled schemas that need them (compileDoc). Entries go
// when their schema is collected.
var known sync.Map // weak.Pointer[jsonschema.Schema] → facts

func remember(s *jsonschema.Schema, c facts) {
	k := weak.Make(s)
	known.Store(k, c)
	runtime.AddCleanup(s, func(k weak.Pointer[jsonschema.Schema]) { known.Delete(k) }, k)
}

func factsOf(s *jsonschema.Schema) facts {
	if s == nil {
		return facts{}
	}
	v, ok := known.Load(weak.Make(s))
	if !ok {
		return facts{}
	}
	return v.(facts)
}

// CheckSize returns an error wrapping ErrTooLarge when validating a document of n bytes
// against s could cost more than maxValidationWork regexp steps. Each byte of the
// document is in at most one string or property name, and matching it costs at most the
// instructions of the patterns applied to that value, so n times the most any one value's
// patterns cost bounds the work: a bound, not the cost, which is usually far less.
func CheckSize(s *jsonschema.Schema, n int) error {
	load := factsOf(s).load
	if float64(n)*load <= maxValidationWork {
		return nil
	}
	return fmt.Errorf("%w: %d bytes, checked against patterns of up to %.0f instructions a value, could take %.2g regexp steps, more than the %.0g allowed",
		ErrTooLarge, n, load, float64(n)*load, float64(maxValidationWork))
}

// hasUnsupportedPattern reports whether a decoded schema document (either form) holds,
// under a key "pattern" or as a name under "patternProperties", a string Go's regexp
// cannot compile. It may answer true for a string that is not a pattern (a property
// named "pattern"): it only decides whether selectingPatterns is worth running.
func hasUnsupportedPattern(v any) bool {
	bad := func(p any) bool {
		s, ok := p.(string)
		if !ok {
			return false
		}
		_, err := regexp.Compile(s)
		return err != nil
	}
	return unsupportedIn(v, 0, bad)
}

func unsupportedIn(v any, depth int, bad func(any) bool) bool {
	if depth > maxDepth {
		return false // compileDoc refuses the document (checkShape)
	}
	check := func(k string, c any) bool {
		switch k {
		case "pattern":
			if bad(c) {
				return true
			}
		case "patternProperties":
			switch t := c.(type) {
			case *Object:
				if slices.ContainsFunc(t.keys, func(k string) bool { return bad(k) }) {
					return true
				}
			case map[string]any:
				for k := range t {
					if bad(k) {
						return true
					}
				}
			}
		}
		return unsupportedIn(c, depth+1, bad)
	}
	switch t := v.(type) {
	case *Object:
		for _, k := range t.keys {
			if check(k, t.m[k]) {
				return true
			}
		}
	case map[string]any:
		for k, c := range t {
			if check(k, c) {
				return true
			}
		}
	case []any:
		for _, c := range t {
			if unsupportedIn(c, depth+1, bad) {
				return true
			}
		}
	}
	return false
}

// selectingPatterns lists, as JSON pointers into the schema, the patterns Go's regexp
// cannot run (compiled as matching anything: lenientRegexp) whose result could make a
// value fail. Matching anything is harmless where a pattern only adds a requirement (the
// keyword is skipped and only the server checks it), so the rule is: a pattern that
// validation reaches from the root through not, the "if" of if/then/else, oneOf or
// contains (whose maxContains counts matches) may invert or select, and so may every
// unsupported patternProperties name (it picks the properties its subschema applies to).
// Every other keyword only combines requirements (allOf, anyOf, then, else,
// dependentSchemas, properties, items...), where matching more never refuses more. A
// $dynamicRef or $recursiveRef under such a keyword lands at run time: then every
// unsupported pattern counts.
func selectingPatterns(root *jsonschema.Schema) []string {
	type visit struct {
		s   *jsonschema.Schema
		sel bool // reached through a keyword that inverts or selects
	}
	seen := map[visit]bool{}
	found := map[string]bool{}
	var all []string // every unsupported pattern reached, for a dynamic reference
	dynamic := false
	stack := []visit{{root, false}}
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if v.s == nil || seen[v] {
			continue
		}
		seen[v] = true
		s := v.s
		if _, ok := s.Pattern.(anything); ok {
			ptr := PtrJoin(locationPtr(s), "pattern")
			all = append(all, ptr)
			if v.sel {
				found[ptr] = true
			}
		}
		for re := range s.PatternProperties {
			if _, ok := re.(anything); ok {
				found[PtrJoin(locationPtr(s), "patternProperties", re.String())] = true
			}
		}
		if v.sel && (s.DynamicRef != nil || s.RecursiveRef != nil) {
			dynamic = true
		}
		push := func(sel bool, ss ...*jsonschema.Schema) {
			for _, c := range ss {
				if c != nil {
					stack = append(stack, visit{c, v.sel || sel})
				}
			}
		}
		push(true, s.Not, s.If, s.Contains)
		push(true, s.OneOf...)
		push(false, combining(s)...)
	}
	if dynamic {
		for _, p := range all {
			found[p] = true
		}
	}
	return sortedKeys(found)
}

// combining lists the subschemas s applies that only add requirements (selectingPatterns).
func combining(s *jsonschema.Schema) []*jsonschema.Schema {
	out := []*jsonschema.Schema{s.Ref, s.Then, s.Else, s.RecursiveRef}
	if s.DynamicRef != nil {
		out = append(out, s.DynamicRef.Ref)
	}
	out = append(out, s.AllOf...)
	out = append(out, s.AnyOf...)
	for _, k := range sortedKeys(s.DependentSchemas) {
		out = append(out, s.DependentSchemas[k])
	}
	for _, k := range sortedKeys(s.Dependencies) {
		if d, ok := s.Dependencies[k].(*jsonschema.Schema); ok {
			out = append(out, d)
		}
	}
	for _, c := range nested(s) {
		if c != s.Contains {
			out = append(out, c)
		}
	}
	return out
}
