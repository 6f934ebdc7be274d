package analytics_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/analytics"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// Days without rollups (a migration truncated them, the job failing) are read from
// their calls, grouped by day, tool, person and latency bucket: a year of them is
// millions of rows. A report adds them up as they arrive, holding its groups (tools,
// people, days), not the rows: here 30,000 rows into 140 groups. Collected first, each
// row took its own allocations (the tool's and person's names, its bucket), so the
// report's allocations grew with the rows. Not parallel: it counts the process's
// allocations.
func TestReportStreamsDaysWithoutRollups(t *testing.T) {
	ctx := context.Background()
	w := world{t: t, ctx: ctx, pool: dbtest.New(t)}
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	const tools, people, days = 10, 100, 30
	srv := w.server("many")
	w.exec(`INSERT INTO mcp_tools (id, server_id, name, definition, definition_hash, status, created_at)
		SELECT gen_random_uuid(), $1, 'tool' || g, '{}', 'h', 'enabled', $2 FROM generate_series(1, $3::int) g`,
		srv, now.Add(-90*24*time.Hour), tools)
	from := now.Truncate(24 * time.Hour).Add(-(days - 1) * 24 * time.Hour)
	// A call of each tool by each person each day: a row of its own for each.
	w.exec(`INSERT INTO tool_usage_logs (tool_id, actor, source, used_at, duration_ms, success)
		SELECT t.id, 'person' || p, 'api', $1::timestamptz + d * interval '1 day', 5, p % 10 <> 0
		FROM mcp_tools t, generate_series(1, $2::int) p, generate_series(0, $3::int - 1) d`, from, people, days)
	w.exec(`VACUUM ANALYZE tool_usage_logs`)
	svc := analytics.New(w.pool)
	p := analytics.Period{From: from, To: now}
	if _, err := svc.Report(ctx, p, now); err != nil { // warm: the pool's connections, the driver's statement cache
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r, err := svc.Report(ctx, p, now)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	const rows = tools * people * days
	if r.Total.Calls != rows || r.Total.Errors != rows/10 || r.ToolCount != tools || r.UserCount != people || len(r.Days) != days {
		t.Fatalf("report: total %+v, %d tools, %d people, %d days", r.Total, r.ToolCount, r.UserCount, len(r.Days))
	}
	mallocs, bytes := after.Mallocs-before.Mallocs, after.TotalAlloc-before.TotalAlloc
	t.Logf("a report over %d rows without rollups: %d allocations, %d bytes", rows, mallocs, bytes)
	if mallocs > rows/4 {
		t.Errorf("a report over %d rows without rollups made %d allocations, want fewer than %d: the rows are collected", rows, mallocs, rows/4)
	}
}
