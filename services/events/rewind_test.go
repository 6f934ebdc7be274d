package events_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/events"
)

// watched records what a watch is handed.
type watched struct {
	mu  sync.Mutex
	evs []events.Event
}

func (w *watched) add(ev events.Event) { w.mu.Lock(); w.evs = append(w.evs, ev); w.mu.Unlock() }

func (w *watched) all() []events.Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]events.Event(nil), w.evs...)
}

func (w *watched) last() events.Event {
	evs := w.all()
	if len(evs) == 0 {
		return events.Event{}
	}
	return evs[len(evs)-1]
}

// resets counts the Reset events among what the watch was handed, and the ID of the last.
func (w *watched) resets() (n int, id int64) {
	for _, ev := range w.all() {
		if ev.Kind == events.Reset {
			n, id = n+1, ev.ID
		}
	}
	return n, id
}

// loseNewest makes the database look as if it came back without its newest commits:
// the events after keep are gone and the sequence hands their ids out again.
func loseNewest(t *testing.T, pool *pgxpool.Pool, keep int64) {
	t.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `DELETE FROM events WHERE id > $1`, keep); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `SELECT setval('events_id_seq', $1)`, keep); err != nil {
		t.Fatal(err)
	}
}

// followed is a bus with a Local, a watch, a Memo holding a value and a subscription,
// all on topic "w", after five events delivered to each; last is the newest id.
func followed(t *testing.T) (pool *pgxpool.Pool, local *events.Local, bus *events.Bus, w *watched, m *events.Memo[int], sub *events.Subscription, last int64) {
	t.Helper()
	pool = dbtest.New(t)
	local = events.NewLocal(pool)
	bus, stop := startBus(t, pool, &events.BusOptions{Local: local})
	t.Cleanup(stop)
	w = &watched{}
	t.Cleanup(bus.Watch(w.add, "w").Close)
	m = &events.Memo[int]{}
	m.Watch(bus, []string{"w"})
	sub = bus.Subscribe("w")
	t.Cleanup(sub.Close)
	for range 5 {
		last = publish(t, local, "w", "k", nil)
	}
	for range 5 {
		receive(t, sub)
	}
	if got := w.last().ID; got != last {
		t.Fatalf("watched up to %d, want %d", got, last)
	}
	if _, err := m.Get(func() (int, error) { return 1, nil }); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Kept(); !ok {
		t.Fatal("the memo kept nothing")
	}
	return pool, local, bus, w, m, sub, last
}

// startedOver checks that the bus started over from keep: one Reset to the watch, the
// memo cleared, the subscription dropped.
func startedOver(t *testing.T, w *watched, m *events.Memo[int], sub *events.Subscription, keep int64) {
	t.Helper()
	startedOverWithin(t, w, m, sub, keep, keep)
}

// startedOverWithin is startedOver with the Reset at an id from lost (the newest id the
// database kept) to newest: a catch-up of the listener's still reading when the commits
// went finds the loss itself, before the check the test makes.
func startedOverWithin(t *testing.T, w *watched, m *events.Memo[int], sub *events.Subscription, lost, newest int64) {
	t.Helper()
	if n, id := w.resets(); n != 1 || id < lost || id > newest {
		t.Fatalf("the watch was handed %d resets (the last at %d), want one from %d to %d", n, id, lost, newest)
	}
	if _, ok := m.Kept(); ok {
		t.Fatal("the memo still keeps its value after the bus started over")
	}
	select {
	case ev, ok := <-sub.C:
		if ok {
			t.Fatalf("the subscription got event %d (%s), want it dropped", ev.ID, ev.Kind)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the subscription was not dropped")
	}
	if !sub.Dropped() {
		t.Fatal("the subscription was closed but does not report it was dropped")
	}
}

// When the database comes back without its newest commits (a crash within an
// asynchronous commit's window, a failover, a restore), it hands their ids out again.
// The bus notices as it reconnects: watches are reset (a Memo is cleared),
// subscriptions dropped, and the events committed anew are delivered, not skipped
// until the ids pass the newest the bus had seen.
func TestBusStartsOverWhenIDsWentBackOnReconnect(t *testing.T) {
	t.Parallel()
	pool, local, bus, w, m, sub, last := followed(t)
	keep := last - 3
	loseNewest(t, pool, keep)

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
	startedOver(t, w, m, sub, keep)

	again := bus.Subscribe("w")
	defer again.Close()
	// Another replica's event (by NOTIFY), then one of this process's (Local).
	other := publish(t, pool, "w", "k", nil)
	if other > last {
		t.Fatalf("the new event has id %d; the test wants one the bus had seen (at most %d)", other, last)
	}
	if ev := receive(t, again); ev.ID != other {
		t.Fatalf("got event %d, want %d", ev.ID, other)
	}
	mine := publish(t, local, "w", "k", nil)
	if got := w.last().ID; got != mine {
		t.Fatalf("watched up to %d when the commit of %d returned", got, mine)
	}
	if ev := receive(t, again); ev.ID != mine {
		t.Fatalf("got event %d, want %d", ev.ID, mine)
	}
	if n, _ := w.resets(); n != 1 {
		t.Fatalf("%d resets, want one", n)
	}
}

// While the listener keeps its connection (the ids set back under it), the first commit
// after is noticed by its notification, whose id does not follow the last one heard: the
// watches start over (the router must not keep a tool an admin just disabled), and the
// commits after are delivered by the time they return. (A commit's own return does not
// wait for the check: it would cost a query after every commit on calls' paths.)
func TestLocalCommitResetsWatchesWhenIDsWentBack(t *testing.T) {
	t.Parallel()
	pool, local, _, w, m, sub, last := followed(t)
	loseNewest(t, pool, last-3)
	id := publish(t, local, "w", "k", nil)
	if id > last {
		t.Fatalf("the new event has id %d; the test wants one the bus had seen (at most %d)", id, last)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if n, _ := w.resets(); n > 0 || time.Now().After(deadline) {
			break
		}
	}
	// The bus starts over from the newest id, which is this event's (or from the loss,
	// found by a catch-up still reading).
	startedOverWithin(t, w, m, sub, last-3, id)
	next := publish(t, local, "w", "k", nil)
	if got := w.last().ID; got != next {
		t.Fatalf("watched up to %d when the commit of %d returned", got, next)
	}
}

// The same for events a bus publishes itself (PublishBatch): Deliver, finding their ids
// at or below the last it delivered, checks whether the ids went back.
func TestDeliverResetsWatchesWhenIDsWentBack(t *testing.T) {
	t.Parallel()
	pool, _, bus, w, m, sub, last := followed(t)
	loseNewest(t, pool, last-3)
	deliver := func() int64 {
		t.Helper()
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
		id, err := events.LatestID(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	id := deliver()
	if id > last {
		t.Fatalf("the new event has id %d; the test wants one the bus had seen (at most %d)", id, last)
	}
	startedOverWithin(t, w, m, sub, last-3, id)
	next := deliver()
	if got := w.last().ID; got != next {
		t.Fatalf("watched up to %d when the delivery of %d returned", got, next)
	}
}
