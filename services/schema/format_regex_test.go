package schema

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"
)

// Validating under format "regex" (asserted in draft-07) compiles no value: a caller's
// "\pL{1000}" repeated cost Go's regexp about 470 KB and a few milliseconds each, so a
// megabyte of them took nearly a minute. What no regexp dialect accepts is refused.
func TestFormatRegexValuesNotCompiled(t *testing.T) {
	s, err := CompileSchema(json.RawMessage(`{"$schema":"http://json-schema.org/draft-07/schema#",
		"type":"array","items":{"type":"string","format":"regex"}}`))
	if err != nil {
		t.Fatal(err)
	}
	args := []any{strings.Repeat(`\pL{1000}`, 200), strings.Repeat(`(?i)[^\pL\pN]{999}`, 100)}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err = ValidateArguments(s, args)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatalf("got %v, want the values accepted", err)
	}
	// Compiling them allocates about 140 MB; checking them, a few kilobytes.
	if n := after.TotalAlloc - before.TotalAlloc; n > 4<<20 {
		t.Errorf("validating allocated %d bytes, want no regexp compiled", n)
	}

	for _, v := range []string{"(", ")", "a(b", "(a))(", `a\`, "[a", `[a\]`} {
		if err := ValidateArguments(s, []any{v}); err == nil || !strings.Contains(err.Error(), "is not valid regex") {
			t.Errorf("%q: got %v, want it refused as not valid regex", v, err)
		}
	}
	// Lookaround and other ECMA-262 syntax Go cannot run, and each dialect's reading of
	// a leading "]" in a class, pass, as such patterns do in a schema (lenientRegexp).
	for _, v := range []string{"", "^[a-z]+$", `^(?!\.)[a-z]+$`, `(?<=a)b`, `(a)\1`, "[^]", "[]", "[]a]", "[(]", `\(`,
		`\Q(\E`, `(?<name>x)`, `[\]]`, `\p{L}+`} {
		if err := ValidateArguments(s, []any{v}); err != nil {
			t.Errorf("%q: got %v, want it accepted", v, err)
		}
	}
}

// A schema's own patterns are still compiled, and bounded, while it compiles: the
// engine changes only once compileDoc is done.
func TestFormatRegexLeavesPatternsCompiled(t *testing.T) {
	t.Parallel()
	s, err := CompileSchema(json.RawMessage(`{"$schema":"http://json-schema.org/draft-07/schema#",
		"type":"object","properties":{"p":{"type":"string","format":"regex","pattern":"^[a-z(]+$"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := ValidateArguments(s, json.RawMessage(`{"p":"abc("}`)); err == nil || !strings.Contains(err.Error(), "is not valid regex") {
		t.Errorf("got %v, want format regex to refuse it", err)
	}
	if err := ValidateArguments(s, json.RawMessage(`{"p":"A"}`)); err == nil || !strings.Contains(err.Error(), "does not match pattern") {
		t.Errorf("got %v, want the pattern to refuse it", err)
	}
	if _, ok := s.Properties["p"].Pattern.(*boundedRegexp); !ok {
		t.Errorf("the pattern is %T, want it compiled (boundedRegexp)", s.Properties["p"].Pattern)
	}
}
