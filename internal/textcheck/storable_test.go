package textcheck

import (
	"encoding/json"
	"testing"
)

// StorableJSON replaces the \u0000 escape only: an escaped backslash followed by
// "u0000" is text, kept as it is.
func TestStorableJSON(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`{"a":"x\u0000y"}`:            `{"a":"x\ufffdy"}`,
		`{"a":"x\\u0000y"}`:           `{"a":"x\\u0000y"}`,
		`{"a":"\\\u0000","\u0000":1}`: `{"a":"\\\ufffd","\ufffd":1}`,
		`{"a":"plain"}`:               `{"a":"plain"}`,
	} {
		got := StorableJSON([]byte(in))
		if string(got) != want || !json.Valid(got) {
			t.Errorf("StorableJSON(%s) = %s, want %s", in, got, want)
		}
	}
}
