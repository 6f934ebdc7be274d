package textcheck

import (
	"strings"
	"testing"
)

func TestReadable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s     string
		allow Allow
		want  string // "" or a part of the refusal
	}{
		{"Zoë 李 🙂", 0, ""},
		{"a\tb", 0, "U+0009"},
		{"a\tb", AllowTab, ""},
		{"a\nb", AllowTab, "U+000A"},
		{"a\nb\r\nc", AllowNewlines, ""},
		{"a\rb", AllowNewlines, "U+000D"},
		{"a\x1b[31m", AllowTab | AllowNewlines | AllowJoiners, "control character U+001B"},
		{"a\u202eb", AllowJoiners, "invisible format character U+202E"},
		{"a\u200bb", AllowJoiners, "U+200B"},
		{"a\u2028b", AllowNewlines, "U+2028"},
		{"می\u200cخواهد", 0, "U+200C"},
		{"می\u200cخواهد 👩\u200d💻", AllowJoiners, ""},
		{"a\x00b", AllowTab, "NUL"},
		{"a\xffb", AllowTab, "UTF-8"},
	} {
		got := Readable(tc.s, "a name", tc.allow)
		if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("Readable(%q, %b) = %q, want %q", tc.s, tc.allow, got, tc.want)
		}
	}
}
