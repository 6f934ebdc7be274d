package events_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/events"
)

// commitUnheard commits n events on topic "w" without a notification, as another
// replica's commits look to a bus whose listener has not heard them (yet).
func commitUnheard(t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	testkit.Exec(t, pool, `INSERT INTO events (id, topic, kind, payload)
		SELECT nextval('events_id_seq'), 'w', 'new', '{}'::json FROM generate_series(1, $1)`, n)
}

// The database lost its newest commits, and new ones took their ids again, up to and
// past the last one the bus delivered, before the bus looked: the newest id alone no
// longer tells. The bus reconnecting notices that its last event is another one now.
func TestBusStartsOverWhenLostIDsWereTakenAgainBeforeReconnect(t *testing.T) {
	t.Parallel()
	pool, _, bus, w, m, sub, last := followed(t)
	keep := last - 3
	loseNewest(t, pool, keep)
	commitUnheard(t, pool, 5) // keep+1 .. last+2

	_, before := bus.Listening()
	if n := testkit.Count(t, pool, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()
		  AND (query LIKE 'LISTEN %' OR query LIKE '%events.listen.ping%')`); n != 1 {
		t.Fatalf("ended %d listeners, want the bus's", n)
	}
	testkit.WaitFor(t, 30*time.Second, func() bool {
		on, since := bus.Listening()
		return on && since.After(before)
	}, "the bus never listened again")
	testkit.WaitFor(t, 10*time.Second, func() bool { n, _ := w.resets(); return n > 0 }, "the bus never started over")
	// A catch-up of the listener's may still have been reading when the newest commits
	// went: it then finds the loss itself, before the new commits (a Reset at keep),
	// else the reconnect finds the ids taken again (at keep+5). Either way, once.
	startedOverWithin(t, w, m, sub, keep, keep+5)
}

// The same noticed by a commit of this process (Local): the catch-up after it finds
// the last event delivered replaced, and the watches have started over by the time
// the commit returns.
func TestLocalCommitResetsWatchesWhenLostIDsWereTakenAgain(t *testing.T) {
	t.Parallel()
	pool, local, _, w, m, sub, last := followed(t)
	loseNewest(t, pool, last-3)
	commitUnheard(t, pool, 3) // keep+1 .. last: the same ids, other events
	id := publish(t, local, "w", "k", nil)
	if id != last+1 {
		t.Fatalf("the new event has id %d, want %d", id, last+1)
	}
	startedOverWithin(t, w, m, sub, last-3, id)
}

// And by Published.Deliver: events whose ids follow the last one delivered, but not
// that event (it was lost, its id taken again), are not handed out as if they did.
func TestDeliverResetsWatchesWhenLostIDsWereTakenAgain(t *testing.T) {
	t.Parallel()
	pool, _, bus, w, m, sub, last := followed(t)
	loseNewest(t, pool, last-3)
	commitUnheard(t, pool, 3)
	ctx := t.Context()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, err := bus.PublishBatch(ctx, tx, []events.Draft{{Topic: "w", Kind: "k"}})
	if err != nil {
		t.Fatal(err)
	}
	err = tx.Commit(ctx)
	p.Deliver(err)
	if err != nil {
		t.Fatal(err)
	}
	startedOverWithin(t, w, m, sub, last-3, last+1)
}

// The last event delivered pruned while the bus was behind is not a lost one: the bus
// goes on without a Reset and delivers what followed.
func TestPrunedLastEventIsNoReset(t *testing.T) {
	t.Parallel()
	pool, local, _, w, _, sub, last := followed(t)
	commitUnheard(t, pool, 1) // last+1, the newest, which pruning keeps
	if _, err := events.Prune(context.Background(), pool, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if n := testkit.Count(t, pool, `SELECT count(*) FROM events WHERE id = $1`, last); n != 0 {
		t.Fatalf("event %d was not pruned", last)
	}
	id := publish(t, local, "w", "k", nil)
	if n, _ := w.resets(); n != 0 {
		t.Fatalf("%d resets after pruning, want none", n)
	}
	var got []int64
	for _, ev := range w.all() {
		if ev.ID > last {
			got = append(got, ev.ID)
		}
	}
	if len(got) != 2 || got[0] != last+1 || got[1] != id {
		t.Fatalf("watched %v after %d, want [%d %d]", got, last, last+1, id)
	}
	if ev := receive(t, sub); ev.ID != last+1 {
		t.Fatalf("the subscription got %d, want %d", ev.ID, last+1)
	}
}
