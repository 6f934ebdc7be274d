package usage_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/usage"
)

// ranIndex is migration 67's index of the calls that ran.
const ranIndex = "tool_usage_logs_tool_ran_idx"

// explainModes runs sql under EXPLAIN (ANALYZE, FORMAT JSON) with a plan for its
// arguments and with a generic one (as a statement pgx prepared comes to use after five
// runs), returning each plan and the rows its scans read from tool_usage_logs.
func explainModes(t *testing.T, pool *pgxpool.Pool, sql string, args []any) map[string]struct {
	read int64
	plan string
} {
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
	out := map[string]struct {
		read int64
		plan string
	}{}
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT set_config('plan_cache_mode', $1, true)`, mode); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `PREPARE explained AS `+sql); err != nil {
				return fmt.Errorf("prepare: %w", err)
			}
			var js []byte
			if err := tx.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE explained(`+strings.Join(params, ", ")+`)`).Scan(&js); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `DEALLOCATE explained`); err != nil {
				return err
			}
			out[mode] = struct {
				read int64
				plan string
			}{testkit.RowsRead(t, js)["tool_usage_logs"], string(js)}
			return nil
		})
		if err != nil {
			t.Fatalf("explain %s (%s): %v", sql, mode, err)
		}
	}
	return out
}

// The newest call of a tool that ran (Summary's LastUsed, of a short period and of a
// long one read from the rollups) is found on migration 67's index of the calls that
// ran, not by walking the tool's refused calls newer than it (2 M of them on one tool
// made every Usage tab view 300 ms): with thousands refused, its plans read a few rows.
func TestSummaryLastUsedSkipsRefusedCalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, rec := dbtest.TracedPool(t)
	f := newFixture(t, pool)
	busy, other := f.tool(), f.tool()
	now := time.Now().Truncate(time.Microsecond)
	ran := now.Add(-3 * time.Hour)
	var entries []usage.Entry
	for i := range 5 {
		entries = append(entries, usage.Entry{ToolID: busy, UsedAt: ran.Add(-time.Duration(i) * time.Minute), DurationMS: ms(3), Success: true})
	}
	for i := range 200 {
		entries = append(entries, usage.Entry{ToolID: other, UsedAt: now.Add(-time.Duration(i) * time.Minute), DurationMS: ms(3), Success: true})
	}
	// Newer than every call of busy that ran: refused, never run (no duration).
	for i := range 5000 {
		entries = append(entries, usage.Entry{ToolID: busy, UsedAt: now.Add(-time.Duration(i) * 2 * time.Second), Success: false, ErrorCode: "invalid_arguments"})
	}
	f.insert(entries...)
	if _, err := pool.Exec(ctx, `ANALYZE tool_usage_logs`); err != nil {
		t.Fatal(err)
	}
	rec.Reset()
	for _, span := range []time.Duration{24 * time.Hour, 30 * 24 * time.Hour} {
		s, err := usage.Summary(ctx, pool, busy, now.Add(-span), now.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if s.LastUsed == nil || !s.LastUsed.Equal(ran) || s.Calls != 5 {
			t.Errorf("%s: last used %v, %d calls; want %v, 5", span, s.LastUsed, s.Calls, ran)
		}
	}
	queries := slices.DeleteFunc(rec.All(), func(q pgx.TraceQueryStartData) bool {
		return !strings.HasPrefix(strings.TrimSpace(q.SQL), "/* usage.Summary")
	})
	if len(queries) != 2 {
		t.Fatalf("recorded %d usage.Summary queries, want 2 (a day's, and the last call's of a month's)", len(queries))
	}
	for _, q := range queries {
		tag := q.SQL[:strings.Index(q.SQL, "*/")+2]
		for mode, e := range explainModes(t, pool, q.SQL, q.Args) {
			if !strings.Contains(e.plan, ranIndex) || e.read > 100 {
				t.Errorf("%s (%s): read %d rows of tool_usage_logs, on %s or not (want it, and a few rows):\n%s",
					strings.TrimSpace(tag), mode, e.read, ranIndex, e.plan)
			}
		}
	}
}
