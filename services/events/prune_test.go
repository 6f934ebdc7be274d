package events_test

import (
	"context"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/events"
)

// A prune reads the events published since the last one, not every kept execution event
// before them, and still deletes every old event of other topics in the end.
func TestPruneReadsOnlyNewEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	conn, err := pool.Acquire(ctx) // one backend, so its table statistics can be flushed
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	cutoff := time.Now().Add(-7 * 24 * time.Hour)
	seed := func(n, everyCalls int) {
		t.Helper()
		if _, err := conn.Exec(ctx, `INSERT INTO events (id, topic, kind, payload, created_at)
			SELECT nextval('events_id_seq'), CASE WHEN g % $2 = 1 THEN 'calls' ELSE 'execution:e1' END, 'k', '{}', now() - interval '30 days'
			FROM generate_series(1, $1::int) AS g`, n, everyCalls); err != nil {
			t.Fatal(err)
		}
	}
	count := func(topic string) (n int64) {
		t.Helper()
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM events WHERE topic = $1`, topic).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	rowsRead := func() (n int64) {
		t.Helper()
		if _, err := conn.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
			t.Fatal(err)
		}
		if err := conn.QueryRow(ctx, `SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)
			FROM pg_stat_user_tables WHERE relname = 'events'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	prune := func() int64 {
		t.Helper()
		n, err := events.Prune(ctx, conn, cutoff, "execution:")
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	seed(25_000, 500) // 50 calls events among a long execution history
	if n := prune(); n != 50 {
		t.Fatalf("first prune deleted %d, want the 50 old calls events", n)
	}
	// Statistics as autovacuum keeps them: without, a table this small is sorted whole.
	if _, err := conn.Exec(ctx, `ANALYZE events`); err != nil {
		t.Fatal(err)
	}
	seed(100, 10) // 10 more
	before := rowsRead()
	if n := prune(); n != 10 {
		t.Fatalf("second prune deleted %d, want the 10 new old calls events", n)
	}
	if read := rowsRead() - before; read > 300 {
		t.Errorf("second prune read %d rows of events, want about the 100 new ones (not the 25,000 kept)", read)
	}
	if calls, kept := count("calls"), count("execution:e1"); calls != 0 || kept != 25_000-50+100-10 {
		t.Errorf("left %d calls and %d execution events, want 0 and %d", calls, kept, 25_000-50+100-10)
	}

	// An old event behind recent ones is deleted; once they age, they go too.
	if _, err := conn.Exec(ctx, `INSERT INTO events (id, topic, kind, payload)
		SELECT nextval('events_id_seq'), 'calls', 'k', '{}' FROM generate_series(1, 2000)`); err != nil {
		t.Fatal(err)
	}
	seed(3, 2) // calls, execution, calls: the newest is kept as such
	var behind int64
	if err := conn.QueryRow(ctx, `SELECT max(id) - 2 FROM events`).Scan(&behind); err != nil {
		t.Fatal(err)
	}
	if n := prune(); n != 1 {
		t.Fatalf("prune deleted %d behind recent events, want the old calls one", n)
	}
	if through, err := events.PrunedThrough(ctx, conn); err != nil || through != behind {
		t.Fatalf("pruned through %d (%v), want %d", through, err, behind)
	}
	if _, err := conn.Exec(ctx, `UPDATE events SET created_at = now() - interval '30 days' WHERE created_at > $1`, cutoff); err != nil {
		t.Fatal(err)
	}
	seed(1, 2) // a newer newest, so the last old calls event can go
	if n := prune(); n != 2000+1 {
		t.Fatalf("prune deleted %d once the recent events aged, want them and the old calls event after them", n)
	}
	if calls := count("calls"); calls != 1 {
		t.Errorf("left %d calls events, want only the newest", calls)
	}
}
