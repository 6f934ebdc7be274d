package router

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/schema"
	"github.com/toolwarden/toolwarden/services/tools"
)

// Output too large for the validator is reported as too large to check, as CheckSize's
// refusal is, not as a mismatch the tool should send less of; rows no schema keyword
// looks into are not counted at all.
func TestCheckOutputTooManyValues(t *testing.T) {
	t.Parallel()
	out, err := schema.CompileSchema(json.RawMessage(`{"type":"object","properties":{"rows":{"type":"array"},"ids":{"type":"array","items":{"type":"integer"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	e := &entry{t: tools.Target{Item: tools.Item{Row: tools.Row{Server: "s", Name: "query"}}}, output: out}
	many := "[" + strings.TrimSuffix(strings.Repeat("[1,2,3,4,5,6,7,8,9,10],", 30_000), ",") + "]"
	if err := checkOutput(e, false, json.RawMessage(`{"rows":`+many+`}`)); err != nil {
		t.Fatalf("30,000 unconstrained rows: %.300v", err)
	}
	for _, doc := range []string{`{"ids":` + strings.ReplaceAll(many[1:len(many)-1], "],[", ",") + `}`, `{"ids":[1e999999]}`} {
		err := checkOutput(e, false, json.RawMessage(doc))
		var re *Error
		if !errors.As(err, &re) || re.Code != CodeUpstream || !strings.Contains(re.Message, "does not match its output schema: it is too large to check against the schema (") ||
			strings.Contains(re.Message, "send fewer") {
			t.Fatalf("got %.300v, want upstream_error saying the content is too large to check", err)
		}
	}
}
