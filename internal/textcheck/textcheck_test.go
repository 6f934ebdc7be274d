package textcheck

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// JSON names the first string that is not text, with its JSON pointer.
func TestJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, ptr, why string
		found        bool
	}{
		{`{"a":"fine","b":[1,true,null,{"c":"ok"}]}`, "", "", false},
		{`{"a":"caf\u00e9 \ud83d\ude00"}`, "", "", false}, // escapes, a surrogate pair
		{`{"a":"x\u0000y"}`, "/a", WhyNUL, true},
		{`{"steps":[{"arguments":{"m":"\u0000"}}]}`, "/steps/0/arguments/m", WhyNUL, true},
		{`{"a":"\ud800"}`, "/a", WhySurrogate, true},
		{`{"a":"\ud800\u0041"}`, "/a", WhySurrogate, true},
		{`{"a":"\udc00"}`, "/a", WhySurrogate, true},
		{"{\"a\":\"\xff\"}", "/a", WhyNotUTF8, true},
		{"[\"ok\",\"\xc3\"]", "/1", WhyNotUTF8, true},
		{`{"k\u0000":1}`, "/k", "its name " + WhyNUL, true},
		{`{"a/b~c":"\u0000"}`, "/a~1b~0c", WhyNUL, true},
		{`"\u0000"`, "", WhyNUL, true},
		{`{"a":"\\u0000"}`, "", "", false}, // an escaped backslash: the text \u0000, not a NUL
		{`{"a":`, "", "", false},           // not JSON: the handler's to say
		{`{"a":"x\u0000`, "/a", WhyNUL, true},
		{strings.Repeat("[", 20000) + `"\u0000"` + strings.Repeat("]", 20000), "", "", false},
	} {
		ptr, why, found := JSON([]byte(tc.in))
		if found != tc.found || ptr != tc.ptr || why != tc.why {
			t.Errorf("%.60q: got %q %q %v, want %q %q %v", tc.in, ptr, why, found, tc.ptr, tc.why, tc.found)
		}
	}
}

// FuzzJSON: whatever the input, the scan ends, and for valid JSON it finds a bad
// string exactly when decoding shows one (a NUL or U+FFFD standing for bad input).
func FuzzJSON(f *testing.F) {
	for _, s := range []string{`{"a":"b"}`, `{"a":"\u0000"}`, `["\ud800"]`, "{\"\xff\":1}", `{"a":[1,{"b":"\\u0000"}]}`, `"\ud83d\ude00"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		ptr, why, found := JSON(raw)
		if found && (why == "" || !utf8.ValidString(ptr) || strings.ContainsRune(ptr, 0)) {
			t.Fatalf("found with why %q at %q", why, ptr)
		}
		var v any
		if json.Unmarshal(raw, &v) != nil {
			return
		}
		bad := false
		var walk func(any)
		walk = func(x any) {
			switch x := x.(type) {
			case string:
				bad = bad || strings.ContainsRune(x, 0)
			case []any:
				for _, y := range x {
					walk(y)
				}
			case map[string]any:
				for k, y := range x {
					bad = bad || strings.ContainsRune(k, 0)
					walk(y)
				}
			}
		}
		walk(v)
		if bad && !found {
			t.Fatalf("%q decodes to a NUL, but the scan found nothing", raw)
		}
		if found && why == WhyNUL && !bad {
			t.Fatalf("%q: the scan found a NUL at %q that decoding does not show", raw, ptr)
		}
	})
}

// Clip cuts at a character's start and marks what it cut; short text stays as it is.
func TestClip(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly", 7, "exactly"},
		{"abcdef", 3, "abc…"},
		{"caféx", 4, "caf…"}, // é is two bytes: not cut in half
		{"ééé", 1, "…"},
	} {
		if got := Clip(tc.s, tc.n, "…"); got != tc.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}
