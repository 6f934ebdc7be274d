package analytics_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/analytics"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// staleDays counts the rolled days whose per-tool and per-person rollups disagree (what
// usage_daily_done.stale marks, rollup.go's movedSQL): the days a report would read from
// the calls.
const staleDays = `SELECT count(*) FROM usage_daily_done d
	WHERE (SELECT coalesce(sum(calls), 0) FROM usage_daily_tools t WHERE t.day = d.day)
		<> (SELECT coalesce(sum(calls), 0) FROM usage_daily_actors a WHERE a.day = d.day)`

// A server deleted makes every day its tools were called on stale; the first reports
// after it roll those days again before reading, so they and the reports after them
// read the rollups, not a year of calls, until the hourly job comes round.
func TestReportRollsStaleDaysAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := world{t: t, ctx: ctx, pool: dbtest.New(t)}
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	gone, kept := w.server("gone"), w.server("kept")
	old, keep := w.tool(gone, "old", now.Add(-90*24*time.Hour)), w.tool(kept, "keep", now.Add(-90*24*time.Hour))
	const days = 6
	for i := 1; i <= days; i++ {
		d := now.Add(-time.Duration(i) * 24 * time.Hour)
		w.calls(old, "carl", d, 3, 1, 5)
		w.calls(old, "alice", d, 1, 0, 5)
		w.calls(keep, "alice", d, 2, 1, 5)
	}
	svc := analytics.New(w.pool)
	if _, err := svc.RollUp(ctx, now); err != nil {
		t.Fatal(err)
	}
	w.exec(`DELETE FROM mcp_servers WHERE id = $1`, gone)
	if n := testkit.Count(t, w.pool, staleDays); n != days {
		t.Fatalf("%d stale days after the delete, want %d", n, days)
	}
	// Reports at once: each is right, whichever rolled the days.
	reports, errs := make([]*analytics.Report, 4), make([]error, 4)
	var wg sync.WaitGroup
	for i := range reports {
		wg.Go(func() { reports[i], errs[i] = svc.Report(ctx, analytics.LastDays(now, 30), now) })
	}
	wg.Wait()
	for i, r := range reports {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if r.Total.Calls != 2*days || r.Total.Errors != days || len(r.Tools) != 1 || r.Tools[0].Key != keep ||
			len(r.Servers) != 1 || r.Servers[0].Key != kept || r.Servers[0].Calls != 2*days {
			t.Fatalf("report %d: total %+v, tools %+v, servers %+v", i, r.Total, r.Tools, r.Servers)
		}
		if len(r.Users) != 1 || r.Users[0].Name != "alice" || r.Users[0].Calls != 2*days || r.Users[0].Errors != days {
			t.Fatalf("report %d: users %+v, want alice's calls of keep only", i, r.Users)
		}
	}
	if n := testkit.Count(t, w.pool, staleDays); n != 0 {
		t.Fatalf("%d days still stale after the reports, want 0 (each report read them from the calls)", n)
	}
	if n := testkit.Count(t, w.pool, `SELECT count(*) FROM usage_daily_actors WHERE actor = 'carl'`); n != 0 {
		t.Fatalf("carl's rollups: %d, want none: he only called the deleted server's tool", n)
	}
	if n, err := svc.RollUp(ctx, now); err != nil || n != 0 {
		t.Fatalf("the job rolled %d days after the reports (%v), want 0", n, err)
	}
}

// staleWorld is days of calls of a tool of a server then deleted, rolled up before:
// every one of the days is stale. It returns the days.
func staleWorld(t *testing.T, w world, now time.Time, days int) []time.Time {
	t.Helper()
	gone, kept := w.server("gone"), w.server("kept")
	old, keep := w.tool(gone, "old", now.Add(-90*24*time.Hour)), w.tool(kept, "keep", now.Add(-90*24*time.Hour))
	var out []time.Time
	for i := days; i >= 1; i-- {
		d := now.Truncate(24 * time.Hour).Add(-time.Duration(i) * 24 * time.Hour)
		w.calls(old, "carl", d, 1, 0, 5)
		w.calls(keep, "alice", d, 1, 0, 5)
		out = append(out, d)
	}
	if _, err := analytics.New(w.pool).RollUp(w.ctx, now); err != nil {
		t.Fatal(err)
	}
	w.exec(`DELETE FROM mcp_servers WHERE id = $1`, gone)
	if n := testkit.Count(t, w.pool, staleDays); n != days {
		t.Fatalf("%d stale days after the delete, want %d", n, days)
	}
	return out
}

// While the job (or another report) holds the rollups' lock, a report does not queue for
// it holding a connection: it reads the stale days from their calls, right all the same,
// and a later report rolls them.
func TestReportDoesNotWaitForRoll(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := world{t: t, ctx: ctx, pool: dbtest.New(t)}
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	days := staleWorld(t, w, now, 4)
	held, err := w.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Rollback(ctx) }()
	if _, err := held.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('analytics.rollup', 0))`); err != nil {
		t.Fatal(err)
	}
	svc := analytics.New(w.pool)
	done := make(chan error, 1)
	go func() {
		r, err := svc.Report(ctx, analytics.LastDays(now, 30), now)
		if err == nil && (r.Total.Calls != int64(len(days)) || len(r.Users) != 1 || r.Users[0].Name != "alice") {
			t.Errorf("report while the lock is held: total %+v, users %+v", r.Total, r.Users)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the report waited for the rollups' lock")
	}
	if n := testkit.Count(t, w.pool, staleDays); n != len(days) {
		t.Fatalf("%d stale days while the lock was held, want %d untouched", n, len(days))
	}
	_ = held.Rollback(ctx)
	if _, err := svc.Report(ctx, analytics.LastDays(now, 30), now); err != nil {
		t.Fatal(err)
	}
	if n := testkit.Count(t, w.pool, staleDays); n != 0 {
		t.Fatalf("%d days still stale after a report with the lock free", n)
	}
}

// Reports that find the same stale days at once roll them once: the lock's holder rolls
// them, and the others read them from their calls or find them rolled.
func TestRollAgainOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := world{t: t, ctx: ctx, pool: dbtest.New(t)}
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	days := staleWorld(t, w, now, 6)
	svc := analytics.New(w.pool)
	rolled, errs := make([]int, 4), make([]error, 4)
	var wg sync.WaitGroup
	for i := range rolled {
		wg.Go(func() { rolled[i], errs[i] = svc.RollAgain(ctx, days) })
	}
	wg.Wait()
	sum := 0
	for i := range rolled {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		sum += rolled[i]
	}
	if sum != len(days) {
		t.Fatalf("rolled %v days between them, want %d in all", rolled, len(days))
	}
	if n := testkit.Count(t, w.pool, staleDays); n != 0 {
		t.Fatalf("%d days still stale", n)
	}
}

// A report rolls at most MaxRollAgain stale days, the newest, and reads the rest from
// their calls; the next report rolls those.
func TestReportRollsBoundedDays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := world{t: t, ctx: ctx, pool: dbtest.New(t)}
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	days := staleWorld(t, w, now, analytics.MaxRollAgain+2)
	svc := analytics.New(w.pool)
	for i, left := range []int{2, 0} {
		r, err := svc.Report(ctx, analytics.LastDays(now, 60), now)
		if err != nil {
			t.Fatal(err)
		}
		if r.Total.Calls != int64(len(days)) || len(r.Users) != 1 || r.Users[0].Name != "alice" || r.Users[0].Calls != int64(len(days)) {
			t.Fatalf("report %d: total %+v, users %+v", i, r.Total, r.Users)
		}
		if n := testkit.Count(t, w.pool, staleDays); n != left {
			t.Fatalf("after report %d: %d days stale, want %d", i, n, left)
		}
		if n := testkit.Count(t, w.pool, staleDays+` AND d.day >= $1`, days[2]); n != 0 {
			t.Fatalf("after report %d: %d of the newest days stale", i, n)
		}
	}
}
