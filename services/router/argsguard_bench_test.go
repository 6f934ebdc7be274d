package router

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// benchArgs are arguments of the sizes calls have: one parameter, a nested handful, and
// a large document (a 40-name object, lists of objects, long text).
func benchArgs() map[string]string {
	var large strings.Builder
	large.WriteString(`{"title":"` + strings.Repeat("lorem ipsum ", 100) + `","rows":[`)
	for i := range 20 {
		if i > 0 {
			large.WriteString(",")
		}
		large.WriteString(`{"id":1,"name":"row","tags":["a","b"],"Value":2.5,"ok":true}`)
	}
	large.WriteString(`],"fields":{`)
	for i := range 40 {
		if i > 0 {
			large.WriteString(",")
		}
		large.WriteString(`"field_` + string(rune('a'+i%26)) + string(rune('a'+i/26)) + `":"v"`)
	}
	large.WriteString("}}")
	return map[string]string{
		"small":  `{"message":"hi"}`,
		"nested": `{"sql":"SELECT * FROM t WHERE id = $1","opts":{"path":"reports/q1","limit":10,"flags":["x","y"]},"params":[1,"two",{"three":3}]}`,
		"large":  large.String(),
	}
}

// BenchmarkArgumentGuards measures what the checks of arguments as read (UTF-8,
// surrogates) and as sent (names equal but for case) add to a call, against the
// Unmarshal and Marshal every call already does (baseline).
func BenchmarkArgumentGuards(b *testing.B) {
	for _, name := range []string{"small", "nested", "large"} {
		raw := []byte(benchArgs()[name])
		b.Run(name+"/baseline", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var m map[string]json.RawMessage
				_ = json.Unmarshal(raw, &m)
				_, _ = json.Marshal(m)
			}
		})
		b.Run(name+"/text", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := parseArguments(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/textscan", func(b *testing.B) { // what text adds to json.Unmarshal when all is well
			for b.Loop() {
				if !utf8.Valid(raw) || maySurrogate(raw) {
					b.Fatal("not text")
				}
			}
		})
		b.Run(name+"/names", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if p := sameNames(raw); p != nil {
					b.Fatal(p)
				}
			}
		})
	}
}
