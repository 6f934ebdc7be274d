package handlers

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/views"
)

// payloadChanges reads the three shapes of change the audit payloads record.
func TestPayloadChanges(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, payload string
		changes       []views.AuditChange
		diff          []string // "+ line" / "- line" of the diff's changed lines
	}{
		{name: "role change", payload: `{"username":"dave","from":"tool_user","to":"auditor"}`,
			changes: []views.AuditChange{{Field: "value", Before: "tool_user", After: "auditor"}}},
		{name: "server edit", payload: `{"changes":{"url":{"from":"http://a","to":"http://b"},"enabled":{"from":true,"to":false},"secrets_changed":["headers/Authorization"]}}`,
			changes: []views.AuditChange{{Field: "enabled", Before: "true", After: "false"},
				{Field: "secrets_changed", After: `["headers/Authorization"]`}, {Field: "url", Before: "http://a", After: "http://b"}}},
		{name: "settings before and after", payload: `{"before":{"risk":"low","tags":["a"]},"after":{"risk":"high","tags":["a"]}}`,
			diff: []string{`-   "risk": "low",`, `+   "risk": "high",`}},
		{name: "nothing", payload: `{"status":403}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m map[string]json.RawMessage
			if err := json.Unmarshal([]byte(tc.payload), &m); err != nil {
				t.Fatal(err)
			}
			changes, diff := payloadChanges(m)
			if len(changes) != len(tc.changes) {
				t.Fatalf("changes: got %+v, want %+v", changes, tc.changes)
			}
			for i := range changes {
				if changes[i] != tc.changes[i] {
					t.Errorf("change %d: got %+v, want %+v", i, changes[i], tc.changes[i])
				}
			}
			var got []string
			for _, l := range diff {
				switch l.Op {
				case views.ToolDiffAdded:
					got = append(got, "+ "+l.Text)
				case views.ToolDiffRemoved:
					got = append(got, "- "+l.Text)
				}
			}
			if strings.Join(got, "\n") != strings.Join(tc.diff, "\n") {
				t.Errorf("diff: got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.diff, "\n"))
			}
		})
	}
}
