package audit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// An export of a search whose words are in few entries (found at once, the usual case
// for a person's or a tool's name) writes every match, over several batches too, and
// records its end: it panicked on its first batch (a 500, and an export started and
// never finished in the log).
func TestExportOfAFewMatchesSearch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	seedBrowse(t, pool)
	const many = 250 // past the first batch (100)
	for i := range many {
		if err := appendOne(pool, audit.Entry{Actor: audit.System, Action: "tool.call", TargetType: "tool",
			TargetID: fmt.Sprint(i), TargetName: "lumen__probe"}); err != nil {
			t.Fatal(err)
		}
	}
	l := audit.NewLog(pool)
	defer l.Close()
	auditor := audit.Actor{Kind: audit.ActorUser, ID: aliceID, Name: "auditor"}
	for _, tc := range []struct {
		q    string
		want int
	}{{"everything", 3}, {"lumen__probe", many}} {
		for _, format := range []string{audit.FormatJSONL, audit.FormatCSV} {
			var buf bytes.Buffer
			if err := l.Export(ctx, auditor, audit.Filter{Q: tc.q}, format, &buf); err != nil {
				t.Fatalf("export %s of q=%s: %v", format, tc.q, err)
			}
			// Each export's own entries hold its q: the earlier ones match the later exports.
			lines, exports := strings.Count(buf.String(), "\n"), strings.Count(buf.String(), "audit.export")
			if format == audit.FormatCSV {
				lines-- // the header
			}
			if lines -= exports; lines != tc.want {
				t.Errorf("export %s of q=%s: %d entries, want %d", format, tc.q, lines, tc.want)
			}
			p, err := l.List(ctx, audit.Filter{Action: "audit.export.finished", Limit: 1})
			if err != nil || len(p.Items) != 1 {
				t.Fatalf("the export's end: %v, %d entries", err, len(p.Items))
			}
			var payload map[string]any
			if err := json.Unmarshal(p.Items[0].Payload, &payload); err != nil || payload["rows"] != float64(tc.want+exports) {
				t.Errorf("export %s of q=%s: finished with %v (%v), want rows %d", format, tc.q, payload, err, tc.want)
			}
		}
	}
}
