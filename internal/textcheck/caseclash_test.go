package textcheck

import (
	"encoding/json"
	"testing"
)

func TestCaseClash(t *testing.T) {
	type step struct {
		Tool      string          `json:"tool"`
		Arguments json.RawMessage `json:"arguments"`
	}
	type body struct {
		Name  string            `json:"name"`
		Steps []step            `json:"steps"`
		Env   map[string]string `json:"env"`
		Plain int
	}
	for _, c := range []struct {
		raw, ptr string
	}{
		{`{"name":"a","Name":"b"}`, "/name"},
		{`{"NAME":"a","name":"b"}`, "/name"},
		{`{"steps":[{"tool":"a"},{"tool":"b","TOOL":"c"}]}`, "/steps/1/tool"},
		{`{"plain":1,"Plain":2}`, "/plain"},
		{"{\"steps\":[{\"tool\":\"a\",\"\u017fteps\":1}],\"\u017fteps\":[]}", "/\u017fteps"}, // "ſ" folds to "s"
		// Keys kept exactly: maps and raw arguments.
		{`{"env":{"HOME":"x","home":"y"}}`, ""},
		{`{"steps":[{"tool":"a","arguments":{"Name":1,"name":2}}]}`, ""},
		{`{"name":"a","other":"b","Other":"c"}`, ""}, // not a field: ignored by the decoder
		{`not json`, ""},
	} {
		ptr, bad := CaseClash([]byte(c.raw), &body{})
		if bad != (c.ptr != "") || ptr != c.ptr {
			t.Errorf("%s: got %q %v, want %q", c.raw, ptr, bad, c.ptr)
		}
	}
}
