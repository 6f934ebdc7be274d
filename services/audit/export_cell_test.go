package audit

import (
	"bytes"
	"encoding/csv"
	"strings"
	"testing"
)

// A formula cannot hide from a spreadsheet that reads the export with ';' between
// fields: not behind a double quote (`;"=1+1` reads as an empty quoted string, then
// the formula) nor behind a newline (the CSV quote is mid-field in that reading, so
// the newline ends the row). Anyone can plant such text: a denied GET of
// /audit/%3B%22=1+1%3B is recorded with the decoded path as its target.
func TestTextCellQuotesAndNewlines(t *testing.T) {
	t.Parallel()
	hostile := []string{
		`/audit/;"=1+1;`,
		"/audit/x\n=1+1;",
		"/audit/x\r\n=1+1",
		"/audit/x\r+1",
		`"=1+1`,
		`" "@SUM(1)`,
		"x;\"\n-2",
		"x\n\"'y",
		"=1+1",
		"a;=1+1; @SUM(2);'x",
	}
	for _, v := range hostile {
		cell := textCell(v)
		var buf bytes.Buffer
		w := csv.NewWriter(&buf)
		if err := w.Write([]string{"1", "x", cell, "y"}); err != nil {
			t.Fatal(err)
		}
		w.Write([]string{cell}) // a cell at the start of a row too
		w.Flush()
		out := buf.String()

		// The ';' reading: each line (a newline ends the row) split at ';'.
		for _, line := range strings.FieldsFunc(out, func(r rune) bool { return r == '\n' || r == '\r' }) {
			r := csv.NewReader(strings.NewReader(line))
			r.Comma, r.LazyQuotes, r.FieldsPerRecord = ';', true, -1
			fields, err := r.Read()
			if err != nil {
				t.Errorf("%q: reading %q with ';': %v", v, line, err)
			}
			for _, f := range fields {
				if formulaField(f) {
					t.Errorf("%q: exported as %q, the ';' reading has the field %q", v, out, f)
				}
			}
			// Stricter: every ';' a boundary, quotes or not.
			for _, f := range strings.Split(line, ";") {
				if formulaField(f) {
					t.Errorf("%q: exported as %q, the ';' split has the field %q", v, out, f)
				}
			}
		}
		// The ',' reading gives the cell back, and the cell gives v back.
		r := csv.NewReader(strings.NewReader(out))
		r.FieldsPerRecord = -1
		recs, err := r.ReadAll()
		want := strings.ReplaceAll(cell, "\r\n", "\n") // as encoding/csv reads a quoted field
		if err != nil || len(recs) != 2 || recs[0][2] != want || recs[1][0] != want {
			t.Errorf("%q: ',' reading of %q: %q, %v", v, out, recs, err)
		}
		if back := unguard(cell); back != v {
			t.Errorf("%q: cell %q gives back %q", v, cell, back)
		}
	}
}

// formulaField: a spreadsheet would take field (leading spaces, tabs and quotes
// skipped) as a formula.
func formulaField(f string) bool {
	t := strings.TrimLeft(f, " \t\"")
	return t != "" && strings.ContainsRune("=+-@", rune(t[0]))
}

// unguard removes the apostrophe at the start of cell and after each ';' and line break.
func unguard(cell string) string {
	var b strings.Builder
	start := true
	for i := 0; i < len(cell); i++ {
		c := cell[i]
		if start && c == '\'' {
			start = false
			continue
		}
		start = c == ';' || c == '\n' || c == '\r'
		b.WriteByte(c)
	}
	return b.String()
}
