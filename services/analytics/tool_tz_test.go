package analytics_test

import (
	"context"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/analytics"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// A session whose time zone is east of UTC (services/db does not set one) reads a
// period's first whole day from its rollup too. The days are compared as dates: the
// period's bounds, sent untyped, take the date column's type. Compared as timestamps,
// a day would begin at midnight in Tokyo, nine hours before the period's start, and be
// read call by call. Here the rolled days' calls are gone (as retention would take
// them), so a day read from its calls counts none.
func TestRolledDaysInAnotherTimeZone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := dbtest.NewURL(t)
	pool, err := db.NewPool(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	// The database's own setting, as an operator's may be: a new session starts in it.
	if _, err := pool.Exec(ctx, `DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET timezone = %L', current_database(), 'Asia/Tokyo'); END $$`); err != nil {
		t.Fatal(err)
	}
	pool.Close()
	if pool, err = db.NewPool(ctx, url); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var tz string
	if err := pool.QueryRow(ctx, `SHOW timezone`).Scan(&tz); err != nil || tz != "Asia/Tokyo" {
		t.Fatalf("session time zone %q (%v), want Asia/Tokyo", tz, err)
	}
	w := world{t: t, ctx: ctx, pool: pool}
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	const days = 3
	tool := w.tool(w.server("s"), "t", now.Add(-90*24*time.Hour))
	from := now.Truncate(24 * time.Hour).Add(-days * 24 * time.Hour)
	for i := range days {
		w.calls(tool, "alice", from.Add(time.Duration(i)*24*time.Hour+time.Hour), 2, 1, 5)
	}
	if _, err := analytics.New(pool).RollUp(ctx, now); err != nil {
		t.Fatal(err)
	}
	w.exec(`DELETE FROM tool_usage_logs`)
	to := from.Add(days * 24 * time.Hour)

	sp, err := analytics.ToolSpans(ctx, pool, tool, []time.Time{from, to})
	if err != nil {
		t.Fatal(err)
	}
	if sp[0].Calls != 2*days || sp[0].Errors != days {
		t.Errorf("tool page: %d calls, %d failed; want %d, %d (every day from its rollup)", sp[0].Calls, sp[0].Errors, 2*days, days)
	}
	r, err := analytics.New(pool).Report(ctx, analytics.Period{From: from, To: to}, now)
	if err != nil {
		t.Fatal(err)
	}
	if r.Total.Calls != 2*days {
		t.Errorf("report: %d calls, want %d (every day from its rollup)", r.Total.Calls, 2*days)
	}
}
