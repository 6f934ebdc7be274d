package handlers

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/events"
)

// A step waiting for its tool to be callable again is announced as a tool.failed event
// without a call (executions' waitTransient): the log says it waits, as a warning, not
// that the tool failed.
func TestExecutionLogLineOfAWait(t *testing.T) {
	line := func(p events.CallFailed) (string, string) {
		raw, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		l := executionLogLine(events.Event{Kind: string(events.ToolFailed), Payload: raw})
		return l.Text, l.Level
	}
	text, level := line(events.CallFailed{Call: events.Call{Tool: "mt__note"}, Code: "tool_disabled",
		Message: "waiting since 2026-12-07T08:00:00Z for mt__note to be callable again (at most 10m0s): mt__note is disabled"})
	if level != "warn" || !strings.HasPrefix(text, "mt__note cannot be called now: waiting since ") {
		t.Errorf("a wait: %s %q, want a warning that it waits", level, text)
	}
	text, level = line(events.CallFailed{Call: events.Call{CallID: "c1", Tool: "mt__note"}, Code: "tool_disabled", Message: "disabled"})
	if level != "error" || text != "mt__note failed (tool_disabled): disabled" {
		t.Errorf("a refused call: %s %q, want it failed", level, text)
	}
}
