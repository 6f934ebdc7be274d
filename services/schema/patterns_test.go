package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/verr"
)

// progSize is the number of instructions Go's regexp runs a pattern as.
func progSize(t *testing.T, p string) int {
	t.Helper()
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		t.Fatal(err)
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		t.Fatal(err)
	}
	return len(prog.Inst)
}

// A pattern Go compiles to a huge program costs its length times the input's on every
// match (18 s for a 50 KB string): such a schema is refused when compiled.
func TestHugePatternRefused(t *testing.T) {
	t.Parallel()
	p := strings.Repeat("(?:a|b){1000}", 30) + "x"
	raw := fmt.Sprintf(`{"type":"object","properties":{"s":{"allOf":[{"pattern":%q},{"pattern":%q}]}}}`, p, p)
	_, err := CompileSchema(json.RawMessage(raw))
	if !errors.Is(err, ErrTooComplex) {
		t.Fatalf("got %v, want an error wrapping ErrTooComplex", err)
	}
	if !strings.Contains(err.Error(), `"/properties/s/allOf/`) || !strings.Contains(err.Error(), "instructions") {
		t.Errorf("error %q does not name the pattern's place and why", err)
	}
	tool := cleanTool()
	tool.InputSchema = json.RawMessage(raw)
	if _, ok := find(ValidateTool(tool), "schema_too_complex", ""); !ok {
		t.Errorf("ValidateTool: no schema_too_complex finding in %v", ValidateTool(tool))
	}
	// The same under patternProperties, whose keys are patterns too.
	raw = fmt.Sprintf(`{"type":"object","patternProperties":{%q:{"type":"string"}}}`, p)
	if _, err := CompileSchema(json.RawMessage(raw)); !errors.Is(err, ErrTooComplex) {
		t.Fatalf("patternProperties: got %v, want an error wrapping ErrTooComplex", err)
	}
}

// Patterns real servers use compile to a few hundred instructions at most.
func TestRealPatternsCompile(t *testing.T) {
	t.Parallel()
	for name, p := range map[string]string{
		"uuid":     `^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}|00000000-0000-0000-0000-000000000000|ffffffff-ffff-ffff-ffff-ffffffffffff)$`,
		"datetime": `^(?:(?:\d\d[2468][048]|\d\d[13579][26]|\d\d0[48]|[02468][048]00|[13579][26]00)-02-29|\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\d|30)|(?:02)-(?:0[1-9]|1\d|2[0-8])))T(?:(?:[01]\d|2[0-3]):[0-5]\d(?::[0-5]\d(?:\.\d+)?)?(?:Z))$`,
		"ipv6":     `^(([0-9a-fA-F]{1,4}:){7,7}[0-9a-fA-F]{1,4}|([0-9a-fA-F]{1,4}:){1,7}:|([0-9a-fA-F]{1,4}:){1,6}:[0-9a-fA-F]{1,4}|([0-9a-fA-F]{1,4}:){1,5}(:[0-9a-fA-F]{1,4}){1,2}|([0-9a-fA-F]{1,4}:){1,4}(:[0-9a-fA-F]{1,4}){1,3}|([0-9a-fA-F]{1,4}:){1,3}(:[0-9a-fA-F]{1,4}){1,4}|([0-9a-fA-F]{1,4}:){1,2}(:[0-9a-fA-F]{1,4}){1,5}|[0-9a-fA-F]{1,4}:((:[0-9a-fA-F]{1,4}){1,6})|:((:[0-9a-fA-F]{1,4}){1,7}|:)|fe80:(:[0-9a-fA-F]{0,4}){0,4}%[0-9a-zA-Z]{1,}|::(ffff(:0{1,4}){0,1}:){0,1}((25[0-5]|(2[0-4]|1{0,1}[0-9]){0,1}[0-9])\.){3,3}(25[0-5]|(2[0-4]|1{0,1}[0-9]){0,1}[0-9])|([0-9a-fA-F]{1,4}:){1,4}:((25[0-5]|(2[0-4]|1{0,1}[0-9]){0,1}[0-9])\.){3,3}(25[0-5]|(2[0-4]|1{0,1}[0-9]){0,1}[0-9]))$`,
		"email":    `^[A-Za-z0-9_'+\-\.]*[A-Za-z0-9_+-]@([A-Za-z0-9][A-Za-z0-9\-]*\.)+[A-Za-z]{2,}$`,
	} {
		raw, _ := json.Marshal(map[string]any{"type": "object", "properties": map[string]any{"v": map[string]any{"type": "string", "pattern": p}}})
		if _, err := CompileSchema(raw); err != nil {
			t.Errorf("%s (%d instructions): %v", name, progSize(t, p), err)
		}
	}
}

// A match whose cost (input length times program size) is over the budget is not
// run: it fails, as a value the pattern refuses would.
func TestPatternMatchBudget(t *testing.T) {
	// Not parallel: it lowers the budget, so that running the pattern to prove it
	// would match stays quick.
	defer func(w int) { maxMatchWork = w }(maxMatchWork)
	maxMatchWork = 4_000_000
	p := `^(?:a|b){500}(?:a|b)*$`
	long := strings.Repeat("ab", 2_500_000/progSize(t, p)+1) // over 5,000,000 steps
	if !regexp.MustCompile(p).MatchString(long) {
		t.Fatal("the pattern should match the long string when run")
	}
	re, err := lenientRegexp(p)
	if err != nil {
		t.Fatal(err)
	}
	if re.String() != p {
		t.Errorf("String: got %q, want %q", re.String(), p)
	}
	if re.MatchString(long) {
		t.Errorf("a %d-character string was matched against a %d-instruction program; want it refused unrun", len(long), progSize(t, p))
	}
	if !re.MatchString(strings.Repeat("ab", 300)) {
		t.Error("a short matching string was refused")
	}
	// Through validation: the value is refused as not matching, with the pattern quoted.
	s, err := CompileSchema(json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"s":{"type":"string","pattern":%q}}}`, p)))
	if err != nil {
		t.Fatal(err)
	}
	err = ValidateArguments(s, map[string]any{"s": long})
	var ve *verr.Error
	if !errors.As(err, &ve) || ve.For("/s") == "" || !strings.Contains(ve.For("/s"), "(?:a|b){500}") {
		t.Errorf("got %v, want /s refused for not matching the pattern", err)
	}
	if err := ValidateArguments(s, map[string]any{"s": strings.Repeat("ab", 300)}); err != nil {
		t.Errorf("a matching value: %v", err)
	}
}

// The whole of one validation is bounded too: the document's length times what the
// patterns one value may be checked against cost, each as often as references apply it.
func TestValidationWorkBudget(t *testing.T) {
	t.Parallel()
	p := `^x(?:a|b){1000}`
	ref := `{"$ref":"#/$defs/p"}`
	raw := fmt.Sprintf(`{"type":"array","items":{"allOf":[%s,%s,%s,%s]},"$defs":{"p":{"type":"string","pattern":%q}}}`,
		ref, ref, ref, ref, p)
	s, err := CompileSchema(json.RawMessage(raw))
	if err != nil {
		t.Fatal(err)
	}
	n := progSize(t, p)
	// Under the budget counting the pattern once, over it counting the four references.
	items := make([]string, 500_000_000/n/100+1)
	for i := range items {
		items[i] = strings.Repeat("y", 97)
	}
	doc, _ := json.Marshal(items)
	if len(doc)*n > 1_000_000_000 || len(doc)*n*4 <= 1_000_000_000 {
		t.Fatalf("the document's %d bytes do not sit between the bounds", len(doc))
	}
	err = ValidateArguments(s, json.RawMessage(doc))
	var ve *verr.Error
	if !errors.As(err, &ve) || len(ve.Fields) != 1 || ve.Fields[0].Field != "" || !strings.Contains(ve.Fields[0].Message, "too large to check") {
		t.Fatalf("got %.300v, want one field-less error saying the arguments are too large to check", err)
	}
	if err := CheckSize(s, len(doc)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("CheckSize: got %v, want ErrTooLarge", err)
	}
	// A small document is validated as before.
	err = ValidateArguments(s, json.RawMessage(`["yy"]`))
	if !errors.As(err, &ve) || ve.For("/0") == "" {
		t.Errorf("small document: got %v, want /0 refused by the pattern", err)
	}
	if err := CheckSize(s, 100); err != nil {
		t.Errorf("CheckSize of 100 bytes: %v", err)
	}
}

// Large values that cheap patterns check (a base64 upload, a data URL) are checked, not
// refused for their length: the budget of one match is that of a whole validation.
func TestLargeValuesCheapPatterns(t *testing.T) {
	t.Parallel()
	s, err := CompileSchema(json.RawMessage(`{"type":"object","properties":{
		"data":{"type":"string","pattern":"^([0-9a-zA-Z+/]{4})*(([0-9a-zA-Z+/]{2}==)|([0-9a-zA-Z+/]{3}=))?$"},
		"url":{"type":"string","pattern":"^data:image/png;base64,"},
		"id":{"type":"string","pattern":"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	b64 := strings.Repeat("QUJD", 3<<20/4) // 3 MiB of base64
	args := map[string]any{"data": b64, "url": "data:image/png;base64," + b64, "id": "6f1b1f0e-0000-4000-8000-00000000000a"}
	if err := ValidateArguments(s, args); err != nil {
		t.Errorf("3 MiB of base64 against cheap patterns: %.300v", err)
	}
}
