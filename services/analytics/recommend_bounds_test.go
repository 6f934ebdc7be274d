package analytics_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/analytics"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/usage"
)

// A report over many failing tools recommends a look at the MaxRecommendations failing
// most, as the other kinds are bounded, and says how many fail: 150 failing tools made
// 150 recommendations.
func TestFailingRecommendationsAreBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := world{t: t, ctx: ctx, pool: dbtest.New(t)}
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	srv := w.server("alpha")
	const tools = 150
	rate := map[string]float64{}
	for i := range tools {
		name := fmt.Sprintf("alpha__t%03d", i)
		id := w.tool(srv, name[len("alpha__"):], now.Add(-48*time.Hour))
		fail := 3 + i%8 // 3 to 10 of 10 calls: all above FailingRate
		w.calls(id, "bob", now.Add(-time.Hour), 10, fail, 5)
		rate[name] = float64(fail) / 10
	}
	r, err := analytics.New(w.pool).Report(ctx, analytics.LastDays(now, 7), now)
	if err != nil {
		t.Fatal(err)
	}
	if r.FailingCount != tools {
		t.Errorf("failing count %d, want %d", r.FailingCount, tools)
	}
	var got []analytics.Recommendation
	for _, rec := range r.Recommendations {
		if rec.Kind == "failing" {
			got = append(got, rec)
		}
	}
	if len(got) != analytics.MaxRecommendations {
		t.Fatalf("%d failing recommendations, want %d", len(got), analytics.MaxRecommendations)
	}
	// The highest error rates, highest first: none left out fails more than the last kept.
	kept := map[string]bool{}
	for i, rec := range got {
		kept[rec.Tool] = true
		if i > 0 && rate[rec.Tool] > rate[got[i-1].Tool] {
			t.Errorf("%s (%.1f) after %s (%.1f)", rec.Tool, rate[rec.Tool], got[i-1].Tool, rate[got[i-1].Tool])
		}
	}
	last := rate[got[len(got)-1].Tool]
	for name, v := range rate {
		if !kept[name] && v > last {
			t.Errorf("%s fails %.1f of its calls and is left out; %s (%.1f) is kept", name, v, got[len(got)-1].Tool, last)
		}
	}
}

// An enabled tool whose last call that ran is old and whose newer calls were all
// refused (never run) is found unused without reading those refused calls: migration
// 67's index holds the calls that ran only. On (tool_id, used_at DESC) every refused
// call of the last UnusedFor was read and dropped by the filter, per tool.
func TestUnusedSkipsRefusedCalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, log := dbtest.TracedPool(t)
	w := world{t: t, ctx: ctx, pool: pool}
	now := time.Now().UTC().Truncate(time.Second)
	srv := w.server("alpha")
	idle := w.tool(srv, "idle", now.Add(-90*24*time.Hour))
	busy := w.tool(srv, "busy", now.Add(-90*24*time.Hour))
	w.calls(idle, "bob", now.Add(-40*24*time.Hour), 5, 0, 3)
	w.calls(busy, "bob", now.Add(-time.Hour), 50, 0, 3)
	refused := make([]usage.Entry, 5000)
	for i := range refused {
		refused[i] = usage.Entry{ToolID: idle, Actor: "bob", Source: "api", UsedAt: now.Add(-time.Duration(i) * time.Minute),
			ErrorCode: "invalid_arguments"}
	}
	if err := usage.Insert(ctx, pool, refused); err != nil {
		t.Fatal(err)
	}
	w.exec(`ANALYZE tool_usage_logs`)
	log.Reset()
	r, err := analytics.New(pool).Report(ctx, analytics.LastDays(now, 7), now)
	if err != nil {
		t.Fatal(err)
	}
	var unused []string
	for _, rec := range r.Recommendations {
		if rec.Kind == "unused" {
			unused = append(unused, rec.Tool)
		}
	}
	if len(unused) != 1 || unused[0] != "alpha__idle" {
		t.Errorf("unused: %v, want alpha__idle", unused)
	}
	var q *pgx.TraceQueryStartData
	queries := log.All()
	for i := range queries {
		if strings.HasPrefix(strings.TrimSpace(queries[i].SQL), "/* analytics.unused */") {
			q = &queries[i]
		}
	}
	if q == nil {
		t.Fatal("the unused-tools query was not run")
	}
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		read, plan := explainAs(t, pool, mode, q.SQL, q.Args)
		if !strings.Contains(plan, "tool_usage_logs_tool_ran_idx") || read > 100 {
			t.Errorf("%s: read %d rows of tool_usage_logs, on tool_usage_logs_tool_ran_idx or not (want it, and a few rows):\n%s", mode, read, plan)
		}
	}
}

// explainAs runs sql, prepared, under EXPLAIN (ANALYZE, FORMAT JSON) with plan_cache_mode
// mode (a plan for the arguments, or the generic one a statement pgx prepared comes to
// use), returning the rows its scans read from tool_usage_logs and the plan.
func explainAs(t *testing.T, pool *pgxpool.Pool, mode, sql string, args []any) (int64, string) {
	t.Helper()
	ctx := context.Background()
	params := make([]string, len(args))
	for i, a := range args {
		switch a := a.(type) {
		case string:
			params[i] = "'" + strings.ReplaceAll(a, "'", "''") + "'"
		case time.Time:
			params[i] = "'" + a.UTC().Format(time.RFC3339Nano) + "'::timestamptz"
		default:
			t.Fatalf("explain: an argument of type %T", a)
		}
	}
	var out []byte
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT set_config('plan_cache_mode', $1, true)`, mode); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `PREPARE explained AS `+sql); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE explained(`+strings.Join(params, ", ")+`)`).Scan(&out); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DEALLOCATE explained`)
		return err
	})
	if err != nil {
		t.Fatalf("explain %s (%s): %v", sql, mode, err)
	}
	return testkit.RowsRead(t, out)["tool_usage_logs"], string(out)
}
