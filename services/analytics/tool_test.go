package analytics_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/analytics"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// A day made stale by another tool's deletion still has this tool's rollup row right:
// the tool page reads it from there. Here the rolled days' calls are gone (as
// retention would take them), so a stale day read from its calls counted nothing.
func TestToolSpansReadStaleDaysFromRollups(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := world{t: t, ctx: ctx, pool: dbtest.New(t)}
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	days := staleWorld(t, w, now, 5) // keep: one call of alice a day; old, of a server now deleted: one of carl
	var keep string
	if err := w.pool.QueryRow(ctx, `SELECT id::text FROM mcp_tools WHERE name = 'keep'`).Scan(&keep); err != nil {
		t.Fatal(err)
	}
	w.exec(`DELETE FROM tool_usage_logs WHERE used_at < $1`, now.Truncate(24*time.Hour))
	from, to := days[0], days[len(days)-1].Add(24*time.Hour)
	edges := []time.Time{from}
	for _, d := range days {
		edges = append(edges, d.Add(24*time.Hour))
	}
	for name, edges := range map[string][]time.Time{"one span": {from, to}, "a span a day": edges} {
		sp, err := analytics.ToolSpans(ctx, w.pool, keep, edges)
		if err != nil {
			t.Fatal(err)
		}
		var calls int64
		for i, s := range sp {
			calls += s.Calls
			if s.Calls > 0 && (s.P50MS == nil || s.AvgMS == nil) {
				t.Errorf("%s: span %d: %d calls and no latency", name, i, s.Calls)
			}
		}
		if calls != int64(len(days)) {
			t.Errorf("%s: %d calls of keep, want %d (its rollup rows, stale days or not): %+v", name, calls, len(days), sp)
		}
	}
}

// The tool page reads its own tool's rollups: not every tool's and person's of each day
// of the period, which telling stale days apart added up on every view (10,000 tools,
// 30 days: 300,000 rows twice a view).
func TestToolSpansReadOneToolsRollups(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := world{t: t, ctx: ctx, pool: dbtest.New(t)}
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	const tools, days = 200, 30
	srv := w.server("many")
	w.exec(`INSERT INTO mcp_tools (id, server_id, name, definition, definition_hash, status, created_at)
		SELECT gen_random_uuid(), $1, 'tool' || g, '{}', 'h', 'enabled', $2 FROM generate_series(1, $3::int) g`,
		srv, now.Add(-90*24*time.Hour), tools)
	// A call of every tool by its own person each day.
	from := now.Truncate(24 * time.Hour).Add(-days * 24 * time.Hour)
	w.exec(`INSERT INTO tool_usage_logs (tool_id, actor, source, used_at, duration_ms, success)
		SELECT t.id, 'user' || t.name, 'api', $1::timestamptz + d * interval '1 day' + interval '1 hour', 5, true
		FROM mcp_tools t, generate_series(0, $2::int - 1) d`, from, days)
	if _, err := analytics.New(w.pool).RollUp(ctx, now); err != nil {
		t.Fatal(err)
	}
	if n := testkit.Count(t, w.pool, `SELECT count(*) FROM usage_daily_tools`); n != tools*days {
		t.Fatalf("%d tool rollup rows, want %d", n, tools*days)
	}
	w.exec(`ANALYZE usage_daily_tools`)
	w.exec(`ANALYZE usage_daily_actors`)
	w.exec(`ANALYZE usage_daily_done`)
	var one string
	if err := w.pool.QueryRow(ctx, `SELECT id::text FROM mcp_tools WHERE name = 'tool1'`).Scan(&one); err != nil {
		t.Fatal(err)
	}
	q := &explaining{t: t, pool: w.pool, read: map[string]int64{}}
	sp, err := analytics.ToolSpans(ctx, q, one, []time.Time{from, from.Add(days * 24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if sp[0].Calls != days {
		t.Fatalf("%d calls, want %d", sp[0].Calls, days)
	}
	// Its own rows, one a day, and none of another tool's or any person's.
	if r := q.read["usage_daily_tools"]; r > days {
		t.Errorf("read %d rows of usage_daily_tools, want at most %d (tool1's): %v", r, days, q.read)
	}
	if r := q.read["usage_daily_actors"]; r != 0 {
		t.Errorf("read %d rows of usage_daily_actors, want none: %v", r, q.read)
	}
}

// explaining runs each query under EXPLAIN (ANALYZE) first, adding up the rows its
// scans read from each table (those they returned and those their filters removed),
// then runs it for its rows.
type explaining struct {
	t    *testing.T
	pool *pgxpool.Pool
	read map[string]int64
}

func (e *explaining) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	var out []byte
	if err := e.pool.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) `+sql, args...).Scan(&out); err != nil {
		e.t.Fatalf("explain %s: %v", sql, err)
	}
	for rel, n := range testkit.RowsRead(e.t, out) {
		e.read[rel] += n
	}
	return e.pool.Query(ctx, sql, args...)
}
