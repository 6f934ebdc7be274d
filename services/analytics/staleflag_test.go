package analytics_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/analytics"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// markedDays is the rolled days marked stale, oldest first.
func markedDays(t *testing.T, w world) []time.Time {
	t.Helper()
	rows, err := w.pool.Query(w.ctx, `SELECT day FROM usage_daily_done WHERE stale ORDER BY day`)
	if err != nil {
		t.Fatal(err)
	}
	days, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
	if err != nil {
		t.Fatal(err)
	}
	for i := range days {
		days[i] = days[i].UTC()
	}
	return days
}

// Deleting a server (as the application's role does it) marks exactly the rolled days
// its tools were called on stale, and the hourly job rolls those again and unmarks them.
// Rolling a day, which deletes and writes its rows, leaves it unmarked.
func TestDeletedServerMarksItsDays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := dbtest.NewURL(t)
	app := dbtest.AppPool(t, url)
	w := world{t: t, ctx: ctx, pool: app}
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	today := now.Truncate(24 * time.Hour)
	gone, kept := w.server("gone"), w.server("kept")
	old, keep := w.tool(gone, "old", now.Add(-90*24*time.Hour)), w.tool(kept, "keep", now.Add(-90*24*time.Hour))
	var olds []time.Time
	for i := 40; i >= 1; i-- {
		d := today.Add(-time.Duration(i) * 24 * time.Hour)
		w.calls(keep, "alice", d.Add(time.Hour), 1, 0, 5)
		if i%10 == 0 {
			w.calls(old, "carl", d.Add(time.Hour), 2, 1, 5)
			olds = append(olds, d)
		}
	}
	svc := analytics.New(app)
	if n, err := svc.RollUp(ctx, now); err != nil || n != 40 {
		t.Fatalf("rolled %d days (%v), want 40", n, err)
	}
	// A late record rolls yesterday again: its own delete must not leave it marked.
	w.calls(keep, "alice", today.Add(-24*time.Hour+2*time.Hour), 1, 0, 5)
	if n, err := svc.RollUp(ctx, now); err != nil || n != 1 {
		t.Fatalf("a late record rolled %d days again (%v), want 1", n, err)
	}
	if m := markedDays(t, w); len(m) != 0 {
		t.Fatalf("days marked stale after rolling them: %v", m)
	}
	w.exec(`DELETE FROM mcp_servers WHERE id = $1`, gone)
	if m := markedDays(t, w); !slices.Equal(m, olds) {
		t.Fatalf("days marked stale after the delete: %v, want the deleted tool's %v", m, olds)
	}
	if n := testkit.Count(t, app, staleDays); n != len(olds) {
		t.Fatalf("%d days whose rollups disagree, want %d", n, len(olds))
	}
	if n, err := svc.RollUp(ctx, now); err != nil || n != len(olds) {
		t.Fatalf("the job rolled %d days (%v), want the %d marked", n, err, len(olds))
	}
	if m := markedDays(t, w); len(m) != 0 {
		t.Fatalf("days still marked after the job: %v", m)
	}
	if n := testkit.Count(t, app, staleDays); n != 0 {
		t.Fatalf("%d days whose rollups disagree after the job", n)
	}
	if n := testkit.Count(t, app, `SELECT count(*) FROM usage_daily_actors WHERE actor = 'carl'`); n != 0 {
		t.Fatalf("carl's rollups: %d, want none: he only called the deleted server's tool", n)
	}
	if n, err := svc.RollUp(ctx, now); err != nil || n != 0 {
		t.Fatalf("a second job rolled %d days (%v), want 0", n, err)
	}
}

// Over 400 rolled days the job rolls again the days marked stale and looks at no other
// day's rollups: a day whose rollups disagree without a deletion that marked it (the
// people's rollup altered here by hand) is one the job no longer finds, where adding up
// every day's rollups, every hour, found it.
func TestRollUpChecksOnlyMarkedDays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := world{t: t, ctx: ctx, pool: dbtest.New(t)}
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	today := now.Truncate(24 * time.Hour)
	const days = 400
	gone, kept := w.server("gone"), w.server("kept")
	old, keep := w.tool(gone, "old", now.Add(-500*24*time.Hour)), w.tool(kept, "keep", now.Add(-500*24*time.Hour))
	w.exec(`INSERT INTO tool_usage_logs (tool_id, actor, source, used_at, duration_ms, success)
		SELECT $1, 'alice', 'api', $2::timestamptz - g * interval '1 day' + interval '1 hour', 5, true FROM generate_series(1, $3::int) g`,
		keep, today, days)
	var olds []time.Time
	for _, ago := range []int{390, 250, 100} {
		d := today.Add(-time.Duration(ago) * 24 * time.Hour)
		w.calls(old, "carl", d.Add(2*time.Hour), 1, 0, 5)
		olds = append(olds, d)
	}
	svc := analytics.New(w.pool)
	if n, err := svc.RollUp(ctx, now); err != nil || n != days {
		t.Fatalf("rolled %d days (%v), want %d", n, err, days)
	}
	altered := today.Add(-300 * 24 * time.Hour)
	w.exec(`UPDATE usage_daily_actors SET calls = calls + 1 WHERE day = $1`, altered)
	w.exec(`DELETE FROM mcp_servers WHERE id = $1`, gone)
	w.exec(`UPDATE usage_daily_done SET rolled_at = '2000-01-01'`)
	w.exec(`ANALYZE usage_daily_done`)

	// The job's query reads no rollup row: the marked days come from their flag.
	q := &explaining{t: t, pool: w.pool, read: map[string]int64{}}
	moved, err := analytics.MovedDays(ctx, q, today.Add(-3*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for i := range moved {
		moved[i] = moved[i].UTC()
	}
	if r := q.read["usage_daily_tools"] + q.read["usage_daily_actors"]; r != 0 {
		t.Errorf("the job's query read %d rollup rows, want none: %v", r, q.read)
	}
	if !slices.Equal(moved, olds) {
		t.Fatalf("days to roll again: %v, want the marked %v", moved, olds)
	}

	if n, err := svc.RollUp(ctx, now); err != nil || n != len(olds) {
		t.Fatalf("the job rolled %d days (%v), want the %d marked", n, err, len(olds))
	}
	rows, err := w.pool.Query(ctx, `SELECT day FROM usage_daily_done WHERE rolled_at > '2000-01-01' ORDER BY day`)
	if err != nil {
		t.Fatal(err)
	}
	rolled, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
	if err != nil {
		t.Fatal(err)
	}
	for i := range rolled {
		rolled[i] = rolled[i].UTC()
	}
	if !slices.Equal(rolled, olds) {
		t.Fatalf("the job rolled %v, want only the marked %v", rolled, olds)
	}
}

// Migration 59 marks the days already stale when it runs (found by adding up both
// rollups of each day once), so an upgrade loses none of them.
func TestMigrationMarksStaleDays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := world{t: t, ctx: ctx, pool: dbtest.New(t)}
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	today := now.Truncate(24 * time.Hour)
	gone, kept := w.server("gone"), w.server("kept")
	old, keep := w.tool(gone, "old", now.Add(-90*24*time.Hour)), w.tool(kept, "keep", now.Add(-90*24*time.Hour))
	var olds []time.Time
	for i := 20; i >= 1; i-- {
		d := today.Add(-time.Duration(i) * 24 * time.Hour)
		w.calls(keep, "alice", d.Add(time.Hour), 1, 0, 5)
		if i%5 == 0 {
			w.calls(old, "carl", d.Add(time.Hour), 1, 0, 5)
			olds = append(olds, d)
		}
	}
	svc := analytics.New(w.pool)
	if _, err := svc.RollUp(ctx, now); err != nil {
		t.Fatal(err)
	}
	// Before the migration: the server deleted, nothing marks its days.
	dbtest.RunMigration(t, w.pool, "000059_rollups_stale_days.down.sql")
	w.exec(`DELETE FROM mcp_servers WHERE id = $1`, gone)
	dbtest.RunMigration(t, w.pool, "000059_rollups_stale_days.up.sql")
	if m := markedDays(t, w); !slices.Equal(m, olds) {
		t.Fatalf("days marked stale by the migration: %v, want %v", m, olds)
	}
	if n, err := svc.RollUp(ctx, now); err != nil || n != len(olds) {
		t.Fatalf("the job rolled %d days (%v), want the %d marked", n, err, len(olds))
	}
	if n := testkit.Count(t, w.pool, staleDays); n != 0 {
		t.Fatalf("%d days whose rollups disagree after the job", n)
	}
}
