package events_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/events"
)

// explaining runs each query under EXPLAIN (ANALYZE) first, with a plan for its
// arguments and with a generic one (as a statement pgx prepared may come to use), and
// keeps the most rows either plan's scans of events read (returned and removed by their
// filters); then it runs the query for its rows.
type explaining struct {
	*pgxpool.Pool
	t    *testing.T
	read int64
	plan string
}

func (e *explaining) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	e.read, e.plan = 0, ""
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		read, plan := e.explain(ctx, mode, sql, args)
		if read >= e.read {
			e.read, e.plan = read, mode+": "+plan
		}
	}
	return e.Pool.Query(ctx, sql, args...)
}

func (e *explaining) explain(ctx context.Context, mode, sql string, args []any) (read int64, plan string) {
	conn, err := e.Pool.Acquire(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT set_config('plan_cache_mode', $1, true)`, mode); err != nil {
		e.t.Fatal(err)
	}
	// A statement EXPLAIN plans with its arguments is planned for them whatever the
	// mode: a prepared one is planned as set.
	if _, err := tx.Exec(ctx, `PREPARE explained AS `+sql); err != nil {
		e.t.Fatalf("prepare %s: %v", sql, err)
	}
	defer func() { _ = tx.Rollback(ctx); _, _ = conn.Exec(ctx, `DEALLOCATE explained`) }()
	// EXPLAIN EXECUTE takes no parameters: the arguments are written out.
	params := make([]string, len(args))
	for i, a := range args {
		switch a := a.(type) {
		case int, int64:
			params[i] = fmt.Sprint(a)
		case string:
			params[i] = "'" + strings.ReplaceAll(a, "'", "''") + "'"
		case []string:
			quoted := make([]string, len(a))
			for j, s := range a {
				quoted[j] = "'" + strings.ReplaceAll(s, "'", "''") + "'"
			}
			params[i] = "ARRAY[" + strings.Join(quoted, ", ") + "]::text[]"
		default:
			e.t.Fatalf("explain: an argument of type %T", a)
		}
	}
	var out []byte
	if err := tx.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE explained(`+strings.Join(params, ", ")+`)`).Scan(&out); err != nil {
		e.t.Fatalf("explain %s: %v", sql, err)
	}
	return testkit.RowsRead(e.t, out)["events"], string(out)
}

func ids(evs []events.Event) []int64 {
	out := make([]int64, len(evs))
	for i, ev := range evs {
		out[i] = ev.ID
	}
	return out
}

// A replay of topics whose events all lie before the cursor reads about the events it
// returns, not every event after the cursor: the primary key walked from the cursor and
// filtered by topic read the rest of the table for a page on such topics.
func TestSinceReadsItsTopicsOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	// 10,000 servers events among the first 20,000, then 80,000 calls events, then a few
	// of an execution.
	if _, err := pool.Exec(ctx, `INSERT INTO events (id, topic, kind, payload)
		SELECT nextval('events_id_seq'), CASE WHEN g <= 20000 AND g % 2 = 0 THEN 'servers' ELSE 'calls' END, 'k', '{}'
		FROM generate_series(1, 100000) AS g`); err != nil {
		t.Fatal(err)
	}
	var execIDs []int64
	for range 5 {
		execIDs = append(execIDs, publish(t, pool, "execution:abc", "k", nil))
	}
	if _, err := pool.Exec(ctx, `ANALYZE events`); err != nil { // statistics as autovacuum keeps them
		t.Fatal(err)
	}
	var cursor int64 // past every servers event
	if err := pool.QueryRow(ctx, `SELECT max(id) + 10 FROM events WHERE topic = 'servers'`).Scan(&cursor); err != nil {
		t.Fatal(err)
	}
	q := &explaining{Pool: pool, t: t}
	evs, err := events.Since(ctx, q, cursor, []string{"servers", "execution:abc"}, 1001)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(evs), execIDs) {
		t.Fatalf("Since from %d: got %v, want the execution's %v", cursor, ids(evs), execIDs)
	}
	if q.read > 100 {
		t.Errorf("Since read %d rows of events to return %d, want about those:\n%.3000s", q.read, len(evs), q.plan)
	}

	// From before the servers events: the oldest 1,001 of both topics merged, reading at
	// most that many of each.
	evs, err = events.Since(ctx, q, 0, []string{"execution:abc", "servers", "execution:abc"}, 1001)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1001 || evs[0].Topic != "servers" || !slices.IsSortedFunc(evs, func(a, b events.Event) int { return int(a.ID - b.ID) }) {
		t.Fatalf("Since from 0: got %d events starting with %+v, want the first 1,001 servers ones in order", len(evs), evs[0])
	}
	if q.read > 2*1001 {
		t.Errorf("Since from 0 read %d rows of events, want at most 1,001 of each topic:\n%.3000s", q.read, q.plan)
	}
	// Once the servers events run out, the execution's follow in order.
	evs, err = events.Since(ctx, q, cursor-13, []string{"servers", "execution:abc"}, 4) // the last two servers events
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 4 || evs[0].Topic != "servers" || evs[1].Topic != "servers" || !slices.Equal(ids(evs[2:]), execIDs[:2]) {
		t.Fatalf("Since across both topics: got %v", ids(evs))
	}
	// No topics is every topic, as the bus reads them.
	evs, err = events.Since(ctx, pool, execIDs[2], nil, 10)
	if err != nil || !slices.Equal(ids(evs), execIDs[3:]) {
		t.Fatalf("Since on every topic: got %v (%v), want %v", ids(evs), err, execIDs[3:])
	}
}

// A replay of the sessions events about one person reads theirs, not every sign-in of
// everyone after the cursor (the payload is json, parsed for each row read).
func TestSinceAboutReadsThePersonsEventsOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	mine := publish(t, pool, events.SessionsTopic, string(events.UserChanged), events.Session{UserID: "u-ann", Username: "ann"})
	if _, err := pool.Exec(ctx, `INSERT INTO events (id, topic, kind, payload)
		SELECT nextval('events_id_seq'), CASE WHEN g % 10 = 0 THEN 'calls' ELSE 'sessions' END, 'session.started',
			json_build_object('user_id', 'u-' || (g % 500), 'username', 'someone')
		FROM generate_series(1, 30000) AS g`); err != nil {
		t.Fatal(err)
	}
	// Another topic's event naming ann is not about her session.
	publish(t, pool, "calls", "k", events.Session{UserID: "u-ann"})
	var want []int64
	for range 3 {
		want = append(want, publish(t, pool, events.SessionsTopic, string(events.SessionEnded), events.Session{UserID: "u-ann", Username: "ann"}))
	}
	if _, err := pool.Exec(ctx, `ANALYZE events`); err != nil {
		t.Fatal(err)
	}
	q := &explaining{Pool: pool, t: t}
	evs, err := events.SinceAbout(ctx, q, mine, "u-ann", 1001)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(evs), want) {
		t.Fatalf("SinceAbout ann after %d: got %v, want %v", mine, ids(evs), want)
	}
	if q.read > 20 {
		t.Errorf("SinceAbout read %d rows of events to return %d, want about those:\n%.3000s", q.read, len(evs), q.plan)
	}
	evs, err = events.SinceAbout(ctx, q, 0, "u-ann", 2)
	if err != nil || !slices.Equal(ids(evs), []int64{mine, want[0]}) {
		t.Fatalf("SinceAbout ann from 0, 2: got %v (%v), want %v", ids(evs), err, []int64{mine, want[0]})
	}
}
