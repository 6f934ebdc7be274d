package handlers

import (
	"strings"
	"testing"
)

// A pasted plan whose keys differ only in case ("tool", then "Tool") is refused, as the
// API refuses it: the decoder would run the last while a person reads the first.
func TestPlanTextRefusesKeysDifferingInCase(t *testing.T) {
	t.Parallel()
	for _, text := range []string{
		`{"steps":[{"tool":"fs__read_file","arguments":{"path":"/tmp/r"},"Tool":"fs__delete_file","Arguments":{"path":"/srv"}}]}`,
		`{"steps":[{"tool":"fs__read_file"}],"STEPS":[{"tool":"fs__delete_file"}]}`,
	} {
		req, perr := parsePlanText(text)
		if perr == nil || !strings.Contains(perr.Message, "differs only in case") {
			t.Errorf("%s: got %+v %v, want it refused", text, req, perr)
		}
	}
	// Arguments are the tool's: names differing in case are two arguments.
	if _, perr := parsePlanText(`{"steps":[{"tool":"fs__read_file","arguments":{"path":"a","Path":"b"}}]}`); perr != nil {
		t.Errorf("arguments differing in case: %v, want them taken", perr.Message)
	}
}
