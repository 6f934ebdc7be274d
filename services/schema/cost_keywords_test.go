package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// names is a JSON array of n distinct property names.
func names(n int) string {
	ns := make([]string, n)
	for i := range ns {
		ns[i] = fmt.Sprintf(`"n%d"`, i)
	}
	return "[" + strings.Join(ns, ",") + "]"
}

// The validator lists every missing name of required (and dependentRequired) for every
// object that lacks them, and compares a value with every entry of enum: the work and
// memory grow with the keyword's size as well as with the document, so both count
// toward the evaluations a document may cost, and a document that costs too much is
// refused unchecked rather than validated.
func TestKeywordSizesCounted(t *testing.T) {
	t.Parallel()
	empties := repeated("{}", 5000)
	for _, sch := range []string{
		`{"type":"object","properties":{"r":{"type":"array","items":{"type":"object","required":` + names(2000) + `}}}}`,
		`{"type":"object","properties":{"r":{"type":"array","items":{"type":"object","dependentRequired":{"a":` + names(2000) + `}}}}}`,
	} {
		s, err := CompileSchema(json.RawMessage(sch))
		if err != nil {
			t.Fatal(err)
		}
		doc := `{"r":` + empties + `}`
		if strings.Contains(sch, "dependentRequired") {
			doc = `{"r":` + strings.ReplaceAll(empties, "{}", `{"a":1}`) + `}`
		}
		err = ValidateOutput(s, []byte(doc))
		if !errors.Is(err, ErrUnchecked) || !strings.Contains(err.Error(), "evaluations") {
			t.Errorf("%.60s…: got %.300v, want the output refused unchecked as too many evaluations", sch, err)
		}
	}

	// A numeric enum: every value not in it is compared, as exact fractions, with each entry.
	ints := make([]string, 200)
	for i := range ints {
		ints[i] = fmt.Sprint(i)
	}
	s, err := CompileSchema(json.RawMessage(`{"type":"object","properties":{"r":{"type":"array","items":{"enum":[` + strings.Join(ints, ",") + `]}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	refusedAt(t, ValidateArguments(s, json.RawMessage(`{"r":`+repeated("1000", 30_000)+`}`)), "", "evaluations")
}

// Ordinary schemas, with enums of a few dozen strings and required lists of tens of
// names, still check ordinary documents, large ones included.
func TestKeywordSizesOrdinary(t *testing.T) {
	t.Parallel()
	colours := make([]string, 40)
	for i := range colours {
		colours[i] = fmt.Sprintf(`"c%d"`, i)
	}
	s, err := CompileSchema(json.RawMessage(`{"type":"object","required":` + names(20) + `,"properties":{"rows":{"type":"array","items":{"type":"object","required":` +
		names(20) + `,"properties":{"colour":{"enum":[` + strings.Join(colours, ",") + `]}}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	row := `{"colour":"c39"`
	for i := range 20 {
		row += fmt.Sprintf(`,"n%d":%d`, i, i)
	}
	row += "}"
	rows := repeated(row, 2000)
	top := strings.TrimSuffix(strings.TrimPrefix(row, `{"colour":"c39",`), "}")
	doc := `{` + top + `,"rows":` + rows + `}`
	if err := ValidateArguments(s, json.RawMessage(doc)); err != nil {
		t.Fatalf("2,000 ordinary rows: %.300v", err)
	}
	if err := ValidateOutput(s, []byte(doc)); err != nil {
		t.Fatalf("2,000 ordinary rows as output: %.300v", err)
	}
	bad := strings.Replace(doc, `"colour":"c39"`, `"colour":"mauve"`, 1)
	if err := ValidateArguments(s, json.RawMessage(bad)); err == nil || !strings.Contains(err.Error(), "/rows/0/colour") {
		t.Fatalf("a colour not in the enum: got %.300v, want a problem at /rows/0/colour", err)
	}
}

// A long enum of names (time zones) is compared as it is, costing about nothing: 2,000
// events against a 500-name enum are checked, not refused as too costly.
func TestLongStringEnumOrdinary(t *testing.T) {
	t.Parallel()
	zones := make([]string, 500)
	for i := range zones {
		zones[i] = fmt.Sprintf(`"Zone/%d"`, i)
	}
	s, err := CompileSchema(json.RawMessage(`{"type":"object","properties":{"events":{"type":"array","items":{"type":"object",` +
		`"properties":{"tz":{"enum":[` + strings.Join(zones, ",") + `]},"at":{"type":"string"},"n":{"type":"integer"},"ok":{"type":"boolean"},"what":{"type":"string"}}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	doc := `{"events":` + repeated(`{"tz":"Zone/499","at":"2026-12-05T10:00:00Z","n":1,"ok":true,"what":"x"}`, 2000) + `}`
	if err := ValidateOutput(s, []byte(doc)); err != nil {
		t.Fatalf("2,000 events against a 500-name enum: %.300v", err)
	}
}
