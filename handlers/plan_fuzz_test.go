package handlers

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// FuzzPlanText: whatever plan JSON a person pastes into /executions/new (the API's
// body takes the same shape), reading it answers — never panics — with a plan or an
// error that says what is wrong; a plan read comes back the same after a round trip.
func FuzzPlanText(f *testing.F) {
	for _, s := range []string{
		`{"steps":[{"tool":"fs__write_file","arguments":{"path":"/tmp/x","content":"hi"}}]}`,
		`{"steps":[{"tool":"a__b"}],"rollback":[{"tool":"a__c","arguments":{},"undoes":0}]}`,
		`{"steps":[]}`, `{"steps":[{"tool":5}]}`, `{"plan":{}}`, `{"steps":[{"tool":"x"}]} trailing`, ``, `[`, `{"steps":[{"tool":"x","arguments":"nope"}]}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		req, perr := parsePlanText(text)
		if perr != nil {
			if strings.TrimSpace(perr.Message) == "" {
				t.Fatalf("%q: an error that says nothing", text)
			}
			return
		}
		raw, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("%q: the plan read does not encode: %v", text, err)
		}
		again, perr := parsePlanText(string(raw))
		if perr != nil {
			t.Fatalf("%q: the plan read (%s) does not read back: %s", text, raw, perr.Message)
		}
		a, _ := json.Marshal(again)
		if !reflect.DeepEqual(raw, a) {
			t.Fatalf("%q: %s read back as %s", text, raw, a)
		}
	})
}
