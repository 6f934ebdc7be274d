package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolwarden/toolwarden/services/verr"
)

// repeated is a JSON array of n copies of item.
func repeated(item string, n int) string {
	return "[" + strings.TrimSuffix(strings.Repeat(item+",", n), ",") + "]"
}

// refusedAt asserts that err is a *verr.Error whose first problem is at field and
// says want.
func refusedAt(t *testing.T, err error, field, want string) {
	t.Helper()
	var ve *verr.Error
	if !errors.As(err, &ve) || len(ve.Fields) == 0 {
		t.Fatalf("got %v, want a problem at %q saying %q", err, field, want)
	}
	if f := ve.Fields[0]; f.Field != field || !strings.Contains(f.Message, want) {
		t.Fatalf("got %d problems, the first %+v, want a problem at %q saying %q", len(ve.Fields), f, field, want)
	}
}

// The validator turns every number into an exact fraction: 1e999999 is a million-digit
// integer, about 16 ms of CPU each time it is looked at. Such numbers are refused before
// validation, in arguments (raw or decoded) and in schemas.
func TestHugeNumbersRefused(t *testing.T) {
	t.Parallel()
	s, err := CompileSchema(json.RawMessage(`{"type":"object","properties":{"ids":{"type":"array","items":{"type":"integer"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	long := "1" + strings.Repeat("0", 150)
	for _, tc := range []struct{ args, field, want string }{
		{`{"ids":` + repeated("1e999999", 3) + `}`, "/ids/0", "exponent"},
		{`{"ids":[1, 1E+999999]}`, "/ids/1", "exponent"},
		{`{"ids":[1e-999999]}`, "/ids/0", "exponent"}, // ParseFloat reads it as 0, without error
		{`{"ids":[1e000000000000000000000000999]}`, "/ids/0", "exponent"},
		{`{"ids":[` + long + `]}`, "/ids/0", "characters"},
	} {
		refusedAt(t, ValidateArguments(s, json.RawMessage(tc.args)), tc.field, tc.want)
	}
	// Decoded arguments (configured values) too.
	err = ValidateArguments(s, map[string]any{"ids": []any{json.Number("1"), json.Number("1e999999")}})
	refusedAt(t, err, "/ids/1", "exponent")
	// Ordinary numbers, float64's extremes included, are checked as before.
	if err := ValidateArguments(s, json.RawMessage(`{"ids":[0,-1,1e308,1E+2,12345678901234567890123]}`)); err != nil {
		t.Fatalf("ordinary numbers: %v", err)
	}
	if err := ValidateArguments(s, json.RawMessage(`{"ids":[5e-324]}`)); err == nil || strings.Contains(err.Error(), "exponent") {
		t.Fatalf("5e-324: got %v, want the schema's own type error", err)
	}

	// A schema holding such a number is refused wherever it is, with its place.
	for _, tc := range []struct{ schema, ptr string }{
		{`{"type":"object","properties":{"n":{"type":"integer","enum":[1,1e999999]}}}`, "/properties/n/enum/1"},
		{`{"type":"object","properties":{"n":{"const":1e999999}}}`, "/properties/n/const"},
		{`{"type":"object","properties":{"n":{"minimum":1e-999999}}}`, "/properties/n/minimum"},
		{`{"type":"object","properties":{"n":{"multipleOf":1e-999999}}}`, "/properties/n/multipleOf"},
		{`{"type":"object","properties":{"n":{"maxLength":1e999999}}}`, "/properties/n/maxLength"},
		{`{"type":"object","properties":{"n":{"default":` + long + `}}}`, "/properties/n/default"},
	} {
		_, err := CompileSchema(json.RawMessage(tc.schema))
		if !errors.Is(err, ErrTooComplex) || !strings.Contains(err.Error(), fmt.Sprintf("%q", tc.ptr)) {
			t.Errorf("%s: got %v, want an error wrapping ErrTooComplex naming %q", tc.schema, err, tc.ptr)
			continue
		}
		tool := cleanTool()
		tool.InputSchema = json.RawMessage(tc.schema)
		if _, ok := find(ValidateTool(tool), "schema_too_complex", "/inputSchema"+tc.ptr); !ok {
			t.Errorf("%s: ValidateTool: no schema_too_complex finding at %q in %v", tc.schema, tc.ptr, ValidateTool(tool))
		}
	}
}

// Eleven definitions that each apply the next twice stay under maxEvaluations for one
// value (about 6,000), but a few thousand items cost millions: refused, unrun, by the
// number of values times what one may cost.
func TestManyEvaluationsRefused(t *testing.T) {
	t.Parallel()
	defs := []string{}
	for i := range 11 {
		defs = append(defs, fmt.Sprintf(`"d%d":{"allOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]}`, i, i+1, i+1))
	}
	defs = append(defs, `"d11":{"type":"integer"}`)
	s, err := CompileSchema(json.RawMessage(`{"type":"object","$defs":{` + strings.Join(defs, ",") +
		`},"properties":{"a":{"type":"array","items":{"$ref":"#/$defs/d0"}}}}`))
	if err != nil {
		t.Fatalf("the schema is within maxEvaluations for one value: %v", err)
	}
	if err := ValidateArguments(s, json.RawMessage(`{"a":[0,1,2]}`)); err != nil {
		t.Fatalf("a few items: %v", err)
	}
	refusedAt(t, ValidateArguments(s, json.RawMessage(`{"a":`+repeated("0", 1000)+`}`)), "", "evaluations")
}

// The validator allocates a whole error for every value that fails: a document of
// millions of values is refused by its count before it is checked.
func TestTooManyValuesRefused(t *testing.T) {
	t.Parallel()
	s, err := CompileSchema(json.RawMessage(`{"type":"object","properties":{"ids":{"type":"array","items":{"type":"string"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	n := MaxValues + 1
	err = ValidateArguments(s, json.RawMessage(`{"ids":`+repeated("0", n)+`}`))
	refusedAt(t, err, "", fmt.Sprintf("check %d JSON values of the document; at most %d", n+2, MaxValues))
	ids := make([]any, n)
	for i := range ids {
		ids[i] = json.Number("0")
	}
	refusedAt(t, ValidateArguments(s, map[string]any{"ids": ids}), "", "JSON values")
}

// Ordinary large documents (60,000 rows in 3 MiB; 99,000 small objects) are checked as before.
func TestLargeOrdinaryDocumentValidates(t *testing.T) {
	t.Parallel()
	s, err := CompileSchema(json.RawMessage(`{"type":"object","properties":{"rows":{"type":"array","items":
		{"type":"object","properties":{"id":{"type":"integer","minimum":0},"name":{"type":"string"}},"required":["id"]}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString(`{"rows":[`)
	const rows = 60_000 // 180,000 values
	for i := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%d,"name":"row number %d of the table"}`, i, i)
	}
	b.WriteString(`]}`)
	if err := ValidateArguments(s, json.RawMessage(b.String())); err != nil {
		t.Fatalf("%d bytes: %v", b.Len(), err)
	}
	big := `{"rows":` + repeated(`{"id":1}`, 99_000) + `}`
	if err := ValidateArguments(s, json.RawMessage(big)); err != nil {
		t.Fatalf("%d bytes: %v", len(big), err)
	}
}

// rowsOutput is a database tool's result: rows arrays of cols numbers, each (with its
// rows, its own array and the root) a JSON value, 330,002 for 30,000 rows of 10.
func rowsOutput(rows, cols int, cell string) string {
	return `{"rows":` + repeated(repeated(cell, cols), rows) + `}`
}

// The validator never looks inside an array whose schema applies nothing to its items:
// such values are neither counted nor their numbers scanned. Values a schema does
// reach are bounded as before.
func TestUnreachedValuesNotCounted(t *testing.T) {
	t.Parallel()
	unchecked, err := CompileSchema(json.RawMessage(`{"type":"object","properties":{"rows":{"type":"array"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	checked, err := CompileSchema(json.RawMessage(`{"type":"object","properties":{"rows":{"type":"array","items":{"type":"array","items":{"type":"integer"}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	rows := rowsOutput(30_000, 10, "12345")
	if err := ValidateArguments(unchecked, json.RawMessage(rows)); err != nil {
		t.Fatalf("30,000 rows under an unconstrained array: %.300v", err)
	}
	if err := CheckValues(unchecked, []byte(rows)); err != nil {
		t.Fatalf("CheckValues, 30,000 rows under an unconstrained array: %v", err)
	}
	refusedAt(t, ValidateArguments(checked, json.RawMessage(rows)), "", "check 330002 JSON values of the document; at most 250000")

	// A property no schema names, under additionalProperties absent, is not looked at either.
	if err := ValidateArguments(checked, json.RawMessage(`{"rows":[],"extra":`+repeated("1", MaxValues+1)+`}`)); err != nil {
		t.Fatalf("an unnamed property: %.300v", err)
	}
	// Reached through $ref and allOf, prefixItems, additionalProperties: counted.
	for _, sch := range []string{
		`{"$defs":{"r":{"items":{"type":"integer"}}},"properties":{"rows":{"allOf":[{"$ref":"#/$defs/r"}]}}}`,
		`{"properties":{"rows":{"prefixItems":[{"type":"integer"}],"items":{"type":"integer"}}}}`,
		`{"additionalProperties":{"items":{"type":"integer"}}}`,
		`{"properties":{"rows":{"uniqueItems":true}}}`,                                             // compares whole items
		`{"properties":{"rows":{"$dynamicRef":"#/$defs/d"}},"$defs":{"d":{"$dynamicAnchor":"d"}}}`, // not modelled: counted
	} {
		s, err := CompileSchema(json.RawMessage(sch))
		if err != nil {
			t.Fatalf("%s: %v", sch, err)
		}
		refusedAt(t, ValidateArguments(s, json.RawMessage(`{"rows":`+repeated("1", MaxValues+1)+`}`)), "", "JSON values")
	}

	// Huge numbers: accepted where no keyword looks at them, refused where one does.
	huge := `{"rows":[[1,1e999999]]}`
	if err := ValidateArguments(unchecked, json.RawMessage(huge)); err != nil {
		t.Fatalf("a huge number in an unchecked array: %v", err)
	}
	if err := ValidateArguments(unchecked, map[string]any{"rows": []any{json.Number("1e999999")}}); err != nil {
		t.Fatalf("a decoded huge number in an unchecked array: %v", err)
	}
	refusedAt(t, ValidateArguments(checked, json.RawMessage(huge)), "/rows/0/1", "exponent")
	refusedAt(t, ValidateArguments(checked, map[string]any{"rows": []any{[]any{json.Number("1e999999")}}}), "/rows/0/0", "exponent")

	// The evaluations bound counts reached values only: the costly schema applies to "a".
	defs := []string{}
	for i := range 11 {
		defs = append(defs, fmt.Sprintf(`"d%d":{"allOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]}`, i, i+1, i+1))
	}
	defs = append(defs, `"d11":{"type":"integer"}`)
	costly, err := CompileSchema(json.RawMessage(`{"type":"object","$defs":{` + strings.Join(defs, ",") +
		`},"properties":{"a":{"$ref":"#/$defs/d0"},"rows":{"type":"array"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := ValidateArguments(costly, json.RawMessage(`{"a":1,"rows":`+repeated("0", 5000)+`}`)); err != nil {
		t.Fatalf("5,000 unchecked items beside a costly value: %.300v", err)
	}
}

// CheckValues refuses what ValidateArguments refuses unchecked, wrapping ErrUnchecked and
// without asking the sender to send fewer (output is not sent by the caller).
func TestCheckValues(t *testing.T) {
	t.Parallel()
	s, err := CompileSchema(json.RawMessage(`{"type":"object","properties":{"ids":{"type":"array","items":{"type":"integer"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ doc, want string }{
		{`{"ids":` + repeated("0", MaxValues+1) + `}`, "check 250003 JSON values of the document"},
		{`{"ids":[1,1e999999]}`, `the value at "/ids/1" is a number with the exponent 999999`},
	} {
		err := CheckValues(s, []byte(tc.doc))
		if !errors.Is(err, ErrUnchecked) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "send fewer") {
			t.Errorf("got %.300v, want an error wrapping ErrUnchecked saying %q", err, tc.want)
		}
	}
	for _, doc := range []string{`{"ids":[1,2]}`, `{"ids":["x"]}`, `not JSON`} {
		if err := CheckValues(s, []byte(doc)); err != nil {
			t.Errorf("%s: got %v, want nil (checked, or refused, by ValidateArguments)", doc, err)
		}
	}
}

// ValidateOutput says what CheckValues and ValidateArguments say together, reading the
// content once: unchecked content wraps ErrUnchecked, content that does not match names
// its field, and matching content passes.
func TestValidateOutput(t *testing.T) {
	t.Parallel()
	s, err := CompileSchema(json.RawMessage(`{"type":"object","properties":{"ids":{"type":"array","items":{"type":"integer"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range []string{`{"ids":` + repeated("0", MaxValues+1) + `}`, `{"ids":[1,1e999999]}`} {
		err := ValidateOutput(s, []byte(doc))
		if !errors.Is(err, ErrUnchecked) || err.Error() != CheckValues(s, []byte(doc)).Error() {
			t.Errorf("%.60s: got %.300v, want CheckValues' error", doc, err)
		}
	}
	var ve *verr.Error
	if err := ValidateOutput(s, []byte(`{"ids":[1,"x"]}`)); !errors.As(err, &ve) || len(ve.Fields) != 1 || ve.Fields[0].Field != "/ids/1" {
		t.Errorf(`{"ids":[1,"x"]}: got %v, want a problem at /ids/1`, err)
	}
	if err := ValidateOutput(s, []byte(`not JSON`)); !errors.As(err, &ve) || errors.Is(err, ErrUnchecked) {
		t.Errorf("not JSON: got %v, want a *verr.Error", err)
	}
	if err := ValidateOutput(s, []byte(`{"ids":[1,2]}`)); err != nil {
		t.Errorf("matching content: got %v", err)
	}
}

// propertyNames checks every key of an object, so the values under one are counted:
// millions of keys would each be a validation (and an error when they fail).
func TestPropertyNamesCounted(t *testing.T) {
	t.Parallel()
	s, err := CompileSchema(json.RawMessage(`{"type":"object","propertyNames":{"pattern":"^[a-z]+$"}}`))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("{")
	for i := range MaxValues + 1 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"A%d":0`, i)
	}
	b.WriteString("}")
	refusedAt(t, ValidateArguments(s, json.RawMessage(b.String())), "", "JSON values")
}

// CheckValues is ValidateOutput's refusal of a document it does not check, or nil (also
// for raw that is not JSON): the tests' view of scan.unchecked.
func CheckValues(s *jsonschema.Schema, raw []byte) error {
	sc, _, err := scanBytes(s, raw)
	if err != nil {
		return nil
	}
	return sc.unchecked(s)
}
