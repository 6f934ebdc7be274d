package router

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/toolwarden/toolwarden/services/verr"
)

// Names of one object equal but for case (strings.EqualFold), at any depth, are found
// in what is sent, and named by their JSON pointer: a server matching names ignoring
// case would bind the one the schema did not check.
func TestSameNames(t *testing.T) {
	t.Parallel()
	var big, bigDup strings.Builder
	big.WriteString("{")
	for i := range 40 {
		fmt.Fprintf(&big, `"k%d":%d,`, i, i)
	}
	bigDup.WriteString(big.String() + `"K7":0}`)
	big.WriteString(`"z":0}`)
	for _, tc := range []struct{ args, want string }{
		{`{"sql":"SELECT 1","ſql":"DROP TABLE users"}`, "/ſql"},
		{`{"sql":"SELECT 1","SQL":"DROP TABLE users"}`, "/SQL"},
		{`{"opts":{"path":"ok","PATH":"/etc/passwd"},"sql":"SELECT 1"}`, "/opts/PATH"},
		{`{"opts":{"path":"ok","path":"/etc/passwd"}}`, "/opts/path"},
		{`{"a":[{"k":1},{"x":1,"k":1,"\u212a":2}]}`, "/a/1/\u212a"}, // Kelvin sign
		{`{"o":{"s":1,"\u0053":2}}`, "/o/S"},                        // an escaped name
		{`{"\ud801\udc00":1,"𐐨":2}`, "/𐐨"},                          // Deseret, outside the BMP
		{`{"o":{"a/b~":1,"A/B~":2}}`, "/o/A~1B~0"},
		{`{"a":1,"b":2,"c":3,"d":4,"e":5,"A":6}`, "/A"},
		{bigDup.String(), "/K7"},
		{`{"sql":"x","sq":"y","nested":{"sql":1},"other":{"SQL":2},"list":[{"a":1},{"A":1}]}`, ""},
		{`{"a":"{\"x\":1,\"X\":2}","b":"\\","c":[1,2.5e3,true,null,"]}"]}`, ""},
		{`{"ß":1,"ss":2,"SS":3}`, "/SS"}, // ß is not a simple fold of ss; SS is of ss
		{`{"ß":1,"ss":2}`, ""},
		{big.String(), ""},
		{`{"only":{"one":{"name":[]}}}`, ""},
		{`{}`, ""},
	} {
		p := sameNames([]byte(tc.args))
		got := ""
		if p != nil {
			got = p.fields().Fields[0].Field
		}
		if got != tc.want {
			t.Errorf("%s: got %q (%v), want %q", tc.args, got, p, tc.want)
		}
	}
}

// foldRune puts runes in one class exactly when strings.EqualFold does.
func TestFoldRuneIsEqualFold(t *testing.T) {
	t.Parallel()
	for r := rune(0); r <= 0x1ffff; r++ {
		f := foldRune(r)
		if foldRune(f) != f || !strings.EqualFold(string(r), string(f)) {
			t.Fatalf("foldRune(%U) = %U", r, f)
		}
	}
}

// Strings that are not UTF-8 text are refused where they are: json.Unmarshal reads them
// as U+FFFD, so the schema checks a string other than the one the server gets.
func TestParseArgumentsText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ args, want string }{
		{"{\"m\":\"a\xC0\xAFb\"}", "/m"}, // an overlong "/"
		{`{"m":"\ud800"}`, "/m"},
		{`{"m":"\udc00x"}`, "/m"},
		{`{"m":"\ud800\u0041"}`, "/m"},
		{`{"m":"\uD83D\uD83D\uDE00"}`, "/m"},
		{`{"o":{"list":["ok","\ud83d"]}}`, "/o/list/1"},
		{"{\"o\":{\"p\":\"\xed\xa0\x80\"}}", "/o/p"}, // a surrogate in UTF-8
		{"{\"k\xff\":1}", "/k\ufffd"},
		{`{"m":"\ud83d\ude00","n":"\\ud800","o":"é😀","p":"\u00e9"}`, ""},
		{` {"m": "plain"} `, ""},
	} {
		_, err := parseArguments(json.RawMessage(tc.args))
		got := ""
		var re *Error
		if errors.As(err, &re) {
			if re.Code != CodeInvalidArguments {
				t.Errorf("%q: code %s", tc.args, re.Code)
			}
			got = re.Details.([]verr.Field)[0].Field
		} else if err != nil {
			t.Errorf("%q: %v", tc.args, err)
		}
		if got != tc.want {
			t.Errorf("%q: refused at %q (%v), want %q", tc.args, got, err, tc.want)
		}
	}
}

// The walk never runs past malformed input, whatever it is given.
func TestArgsWalkMalformed(t *testing.T) {
	t.Parallel()
	for _, s := range []string{`{`, `{"a"`, `{"a":`, `[}`, `{"a":1,"b`, `"\u12`, `"\`, `{"a" 1}`, `{1:2}`, ``, `[1,`} {
		for _, w := range []argsWalk{{d: []byte(s), fold: true}, {d: []byte(s), text: true}} {
			if p := w.value(); p == nil || p.message != "is not valid JSON" {
				t.Errorf("%q: got %v", s, p)
			}
		}
	}
	if !utf8.ValidString(`{}`) || sameNames([]byte(`{}`)) != nil {
		t.Fatal("{}")
	}
}

// caseVariants is an object of the first n spellings of name by letter case, each a
// name of its own (name has at least log2(n) letters).
func caseVariants(name string, n int) []byte {
	var b strings.Builder
	b.WriteString("{")
	for v := range n {
		if v > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"`)
		for i, c := range name {
			if v&(1<<i) != 0 {
				c -= 'a' - 'A'
			}
			b.WriteRune(c)
		}
		b.WriteString(`":0`)
	}
	b.WriteString("}")
	return []byte(b.String())
}

// Many names of one fold are answered by the first repeat, in the order written, and at
// a cost that grows with their number, not its square (2^17 spellings of one name fit
// in a body; compared pairwise they held a core for seconds): BenchmarkSameNamesVariants.
func TestSameNamesManyVariants(t *testing.T) {
	t.Parallel()
	p := sameNames(caseVariants("abcdefghijklmnop", 1<<12))
	if p == nil || len(p.segments) != 1 || p.segments[0] != "Abcdefghijklmnop" || !strings.Contains(p.message, `"abcdefghijklmnop" again`) {
		t.Fatalf("4,096 spellings of one name: %+v, want the second named as the first again", p)
	}
}

func BenchmarkSameNamesVariants(b *testing.B) {
	raw := caseVariants("abcdefghijklmnopq", 1<<16)
	b.ReportAllocs()
	for b.Loop() {
		if sameNames(raw) == nil {
			b.Fatal("no repeat found")
		}
	}
}
