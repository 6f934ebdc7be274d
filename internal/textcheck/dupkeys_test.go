package textcheck

import "testing"

func TestDuplicateKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in    string
		ptr   string
		found bool
	}{
		{`{"a":1,"b":2}`, "", false},
		{`{"a":1,"a":2}`, "/a", true},
		{`{"a":1,"\u0061":2}`, "/a", true},
		{`{"a":{"x":1},"b":{"x":2}}`, "", false},
		{`{"steps":[{"tool":"t","arguments":{"path":"/x","path":"/etc"}}]}`, "/steps/0/arguments/path", true},
		{`{"steps":[{"tool":"t"},{"tool":"u","tool":"v"}]}`, "/steps/1/tool", true},
		{`[{"a":1},{"a":1}]`, "", false},
		{`[1,[2,{"k/~":1,"k/~":2}]]`, "/1/1/k~1~0", true},
		{`{"a":[1,2,3],"b":{"c":{"d":[{"e":1,"e":1}]}}}`, "/b/c/d/0/e", true},
		{`{"a":1,"A":2}`, "", false},
		{`{"a":1,"a":`, "/a", true}, // found before the document breaks off
		{`not json`, "", false},
		{`{"a":{},"a":[]}`, "/a", true},
		{`{"x":{"a":1},"a":2}`, "", false},
		{`{"a":"\ud800","k":1,"k":2}`, "/k", true},       // a lone surrogate, as encoding/json reads it
		{"{\"a\":\"\xff\",\"k\":1,\"k\":2}", "/k", true}, // invalid UTF-8 likewise
	} {
		ptr, found := DuplicateKey([]byte(tc.in))
		if ptr != tc.ptr || found != tc.found {
			t.Errorf("DuplicateKey(%s) = %q %v, want %q %v", tc.in, ptr, found, tc.ptr, tc.found)
		}
	}
}

func FuzzDuplicateKey(f *testing.F) {
	for _, s := range []string{`{"a":1,"a":2}`, `[{"a":[{"b":1}]}]`, `{"a":{"a":{"a":1}}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		DuplicateKey(raw) // must not panic
	})
}
