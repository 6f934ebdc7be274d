package schema

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// enumOfObjects is a schema whose array items must equal one of n objects of keys numbers.
func enumOfObjects(n, keys int) string {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{"r":{"type":"array","items":{"enum":[`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("{")
		for k := range keys {
			fmt.Fprintf(&b, `"a%d":%d,`, k, k)
		}
		fmt.Fprintf(&b, `"id":%d}`, i)
	}
	b.WriteString(`]}}}}`)
	return b.String()
}

// An enum's objects cost a comparison for each value in them: 200 items against 20,000
// such entries took 114 s when they were counted as nothing.
func TestEnumEntriesWeighed(t *testing.T) {
	s, err := CompileSchema([]byte(enumOfObjects(150, 50)))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := factsOf(s).evals, float64(150*52); got < want {
		t.Fatalf("evaluations at one value = %v, want at least %v (each entry's values counted)", got, want)
	}
	var doc strings.Builder
	doc.WriteString(`{"r":[`)
	for i := range 1000 {
		if i > 0 {
			doc.WriteString(",")
		}
		doc.WriteString(`{"a0":0,"a1":1,"a2":2,"a3":3,"id":-1}`)
	}
	doc.WriteString(`]}`)
	if err := ValidateOutput(s, []byte(doc.String())); !errors.Is(err, ErrUnchecked) {
		t.Fatalf("ValidateOutput = %v, want ErrUnchecked", err)
	}
	c, err := CompileSchema([]byte(`{"properties":{"a":{"const":{"x":[` + strings.Repeat("1,", 39) + `1]}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := factsOf(c).evals; got < 42 {
		t.Fatalf("const of 42 values: evaluations = %v, want at least 42", got)
	}
}

func TestHostileShapesRefused(t *testing.T) {
	var strs strings.Builder
	strs.WriteString(`{"type":"object","properties":{"m":{"enum":[`)
	for i := range maxEnumValues + 1 {
		if i > 0 {
			strs.WriteString(",")
		}
		fmt.Fprintf(&strs, `"v%d"`, i)
	}
	strs.WriteString(`]}}}`)
	var props strings.Builder
	props.WriteString(`{"type":"object","properties":{`)
	for i := range maxSchemaNodes {
		if i > 0 {
			props.WriteString(",")
		}
		fmt.Fprintf(&props, `"p%d":true`, i)
	}
	props.WriteString(`}}`)
	deep := `{"type":"object","properties":{"a":` + strings.Repeat(`{"items":`, 3000) + `{}` + strings.Repeat(`}`, 3000) + `}}`
	for name, raw := range map[string]string{
		"objects enum": enumOfObjects(20_000, 50),
		"strings enum": strs.String(),
		"properties":   props.String(),
		"deep":         deep,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := CompileSchema([]byte(raw)); !errors.Is(err, ErrTooComplex) {
				t.Fatalf("CompileSchema = %.200v, want ErrTooComplex", err)
			}
			if name == "deep" {
				return // Decode refuses it first: input_schema_invalid
			}
			fs := ValidateTool(Tool{Name: "x", Description: "a tool that does something useful here", InputSchema: []byte(raw)})
			if _, ok := find(fs, "schema_too_complex", ""); !ok {
				t.Fatalf("no schema_too_complex finding: %v", fs)
			}
		})
	}
	// Just under the caps compiles.
	if _, err := CompileSchema([]byte(`{"enum":[` + strings.Repeat(`"a",`, maxEnumValues-2) + `"b"]}`)); err != nil {
		t.Fatal(err)
	}
}

func TestSelectingPatterns(t *testing.T) {
	for _, c := range []struct {
		schema string
		want   []string // pattern_unsupported_selecting paths
	}{
		{`{"type":"object","properties":{"n":{"type":"string","pattern":"^(?=.*x)"}}}`, nil},
		{`{"type":"object","properties":{"n":{"anyOf":[{"pattern":"^(?=.*x)"},{"type":"integer"}]}}}`, nil},
		{`{"type":"object","properties":{"n":{"type":"string","not":{"pattern":"^(?=.*\\.\\.)"}}}}`,
			[]string{"/inputSchema/properties/n/not/pattern"}},
		{`{"type":"object","properties":{"id":{"oneOf":[{"type":"string","pattern":"^(?=[0-9])[0-9a-f]+$"},{"type":"string","pattern":"^[a-z]+$"}]}}}`,
			[]string{"/inputSchema/properties/id/oneOf/0/pattern"}},
		{`{"type":"object","properties":{"c":{"type":"integer"}},"patternProperties":{"^(?!internal_)":{"type":"string"}}}`,
			[]string{"/inputSchema/patternProperties/^(?!internal_)"}},
		{`{"type":"object","properties":{"a":{"if":{"$ref":"#/$defs/p"},"then":{"minLength":3}}},"$defs":{"p":{"pattern":"(?<=a)b"}}}`,
			[]string{"/inputSchema/$defs/p/pattern"}},
	} {
		fs := ValidateTool(Tool{Name: "x", Description: "a tool that does something useful here", InputSchema: []byte(c.schema)})
		var got []string
		for _, f := range fs {
			if f.Code == "pattern_unsupported_selecting" {
				if f.Severity != SeverityError {
					t.Errorf("%s: severity %v", c.schema, f.Severity)
				}
				got = append(got, f.Path)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: findings at %q, want %q", c.schema, got, c.want)
		}
	}
}

// A value longer than the quoted cut is left out, not cut: the router masks configured
// secrets in messages, and the part of one before the cut would escape it.
func TestLongValueNotQuotedInPart(t *testing.T) {
	s, err := CompileSchema([]byte(`{"type":"object","properties":{"p":{"type":"string","pattern":"^[0-9]+$"},"e":{"enum":["a","b"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	const secret = "SECRETVALUE1234567890"
	for name, args := range map[string]string{
		"pattern": `{"p":"` + strings.Repeat("x", 90) + secret + `"}`,
		"enum":    `{"e":"` + strings.Repeat("x", 50) + secret + `"}`,
	} {
		err := ValidateArguments(s, []byte(args))
		if err == nil || strings.Contains(err.Error(), "SECRETV") {
			t.Errorf("%s: %v, want an error quoting no part of the long value", name, err)
		}
	}
	err = ValidateArguments(s, []byte(`{"p":"abc","e":"c"}`))
	if msg := fmt.Sprint(err); !strings.Contains(msg, "'abc'") || !strings.Contains(msg, `got "c"`) {
		t.Errorf("short values are quoted: %v", msg)
	}
}
