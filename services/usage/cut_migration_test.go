package usage_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/usage"
)

// Migration 61 drops the requests and responses an older release stored cut as one
// string (its first 8 KB of text, where a value under a secret-named key could not be
// masked when shown), and leaves the others as they are.
func TestMigrationDropsOldCutStrings(t *testing.T) {
	t.Parallel()
	f := newFixture(t, dbtest.New(t))
	tool := f.tool()
	old := `{"structured_content":{"db_password":"opensesame","note":"` + strings.Repeat("x", 8000)
	oldCut, _ := json.Marshal(old) // as usage.Cap stored it
	kept := json.RawMessage(`{"content":[{"type":"text","text":"fine"}]}`)
	f.insert(
		usage.Entry{ToolID: tool, UsedAt: time.Now().Add(-time.Hour), Success: true, Request: json.RawMessage(`{"q":1}`), Response: oldCut},
		usage.Entry{ToolID: tool, UsedAt: time.Now().Add(-time.Minute), Success: true, Request: oldCut, Response: kept},
	)
	dbtest.RunMigration(t, f.pool, "000061_usage_cut_strings.up.sql")
	rows, err := f.pool.Query(f.ctx, `SELECT request::text, response::text FROM tool_usage_logs WHERE tool_id = $1 ORDER BY used_at`, tool)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got [][2]string
	for rows.Next() {
		var req, resp string
		if err := rows.Scan(&req, &resp); err != nil {
			t.Fatal(err)
		}
		got = append(got, [2]string{req, resp})
	}
	if len(got) != 2 {
		t.Fatalf("%d rows", len(got))
	}
	for i, r := range got {
		if strings.Contains(r[0]+r[1], "opensesame") {
			t.Errorf("row %d still holds the old cut text: %.120s | %.120s", i, r[0], r[1])
		}
	}
	if got[0][0] != `{"q":1}` || got[1][1] != string(kept) {
		t.Errorf("JSON that was not cut changed: %s, %s", got[0][0], got[1][1])
	}
	if !strings.Contains(got[0][1], "not kept") || !strings.Contains(got[1][0], "not kept") {
		t.Errorf("the dropped texts are not noted: %s, %s", got[0][1], got[1][0])
	}
}
