package planner_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/planner"
)

// Any prompt gives either a plan of JSON-object arguments or a NotUnderstood whose
// fragment is the prompt's text at its offset; never a panic.
func FuzzRules(f *testing.F) {
	for _, s := range []string{
		`call fs__write_file path=/tmp/x content="hi" then read_file.x {"a":[1]} rollback: undo: 'x\u12`,
		"a=b\n c=\"d\\",
		"run run run",
		"tagger__tag tags=[ note=nul level=1.5e choice=, then ;",
		"fs__read_file limit=1e999 and then, ; \n then",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, prompt string) {
		plan, err := planner.NewRules().Plan(context.Background(), prompt, catalog)
		if err != nil {
			nu, ok := planner.NotUnderstoodIn(err)
			if !ok {
				t.Fatalf("got %v, want a NotUnderstood", err)
			}
			if nu.Offset > len(prompt) || nu.Offset >= 0 && !strings.HasPrefix(prompt[nu.Offset:], nu.Fragment) {
				t.Fatalf("got fragment %q at %d, want the prompt's text there", nu.Fragment, nu.Offset)
			}
			return
		}
		if len(plan.Steps) == 0 {
			t.Fatal("got no steps and no error, want one of them")
		}
		for _, s := range append(plan.Steps, plan.Rollback...) {
			var m map[string]json.RawMessage
			if json.Unmarshal(s.Arguments, &m) != nil || m == nil {
				t.Fatalf("got arguments %s, want a JSON object", s.Arguments)
			}
		}
	})
}
