package schema

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"regexp/syntax"
	"runtime"
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
