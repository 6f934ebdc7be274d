package events_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/events"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func startBus(t *testing.T, pool *pgxpool.Pool, opts *events.BusOptions) (*events.Bus, func()) {
	t.Helper()
	bus := events.NewBus(pool, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = bus.Run(ctx); close(done) }()
	select {
	case <-bus.Ready():
	case <-time.After(30 * time.Second):
		t.Fatal("bus never became ready")
	}
	return bus, func() { cancel(); <-done }
}

func publish(t *testing.T, q db.TxBeginner, topic, kind string, payload any) int64 {
	t.Helper()
	var id int64
	err := db.WithTx(context.Background(), q, func(tx pgx.Tx) error {
		var err error
		id, err = events.Publish(context.Background(), tx, topic, kind, payload)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func receive(t *testing.T, s *events.Subscription) events.Event {
	t.Helper()
	select {
	case ev, ok := <-s.C:
		if !ok {
			t.Fatal("subscription closed")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
	}
	return events.Event{}
}

func TestPublishSinceAndFanOut(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	bus, stop := startBus(t, pool, nil)
	defer stop()
	ctx := context.Background()

	a := bus.Subscribe("a")
	defer a.Close()
	all := bus.Subscribe()
	defer all.Close()

	id1 := publish(t, pool, "a", "thing.created", map[string]string{"name": "one"})
	id2 := publish(t, pool, "b", "thing.created", map[string]string{"name": "two"})
	id3 := publish(t, pool, "a", "thing.deleted", map[string]string{"name": "one"})

	for _, want := range []int64{id1, id3} {
		if ev := receive(t, a); ev.ID != want || ev.Topic != "a" {
			t.Fatalf("topic a: got event %d on %q, want %d", ev.ID, ev.Topic, want)
		}
	}
	for _, want := range []int64{id1, id2, id3} {
		if ev := receive(t, all); ev.ID != want {
			t.Fatalf("all topics: got event %d, want %d", ev.ID, want)
		}
	}
	var p struct{ Name string }
	evs, err := events.Since(ctx, pool, id1, []string{"a"}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].ID != id3 || evs[0].Decode(&p) != nil || p.Name != "one" {
		t.Fatalf("Since(%d, a): got %+v, want only event %d", id1, evs, id3)
	}
	if latest, _ := events.LatestID(ctx, pool); latest != id3 {
		t.Fatalf("LatestID: got %d, want %d", latest, id3)
	}
}

func TestRolledBackEventIsNeverDelivered(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	bus, stop := startBus(t, pool, nil)
	defer stop()
	s := bus.Subscribe("r")
	defer s.Close()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := events.Publish(ctx, tx, "r", "ghost", nil); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	id := publish(t, pool, "r", "real", nil)
	if ev := receive(t, s); ev.ID != id || ev.Kind != "real" {
		t.Fatalf("got %s (%d), want only the committed event %d", ev.Kind, ev.ID, id)
	}
}

func TestSlowSubscriberIsDropped(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	bus, stop := startBus(t, pool, &events.BusOptions{Buffer: 2})
	defer stop()
	slow := bus.Subscribe("x")
	fast := bus.Subscribe("x")
	// One event at a time, each read by the fast subscriber before the next is
	// published: it never has more than one queued, while the slow one fills up.
	for i := range 5 {
		id := publish(t, pool, "x", "tick", map[string]int{"i": i})
		if got := receive(t, fast).ID; got != id {
			t.Fatalf("fast subscriber: got event %d, want %d", got, id)
		}
	}
	if fast.Dropped() {
		t.Fatal("the subscriber that kept up was dropped")
	}
	// The slow one, never read, was dropped: its channel drains then closes.
	deadline := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-slow.C:
			if !ok {
				if !slow.Dropped() {
					t.Fatal("channel closed but Dropped() is false")
				}
				return
			}
		case <-deadline:
			t.Fatal("slow subscriber was not dropped")
		}
	}
}

func TestIDsFollowCommitOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	// tx1 draws its id first and commits last; tx2 must wait for it (journal lock), so
	// a reader that saw tx2's id can never later find tx1's smaller id appear.
	tx1, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id1, err := events.Publish(ctx, tx1, "t", "first", nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan int64)
	go func() {
		var id int64
		_ = db.WithTx(ctx, pool, func(tx pgx.Tx) error {
			id, err = events.Publish(ctx, tx, "t", "second", nil)
			return err
		})
		done <- id
	}()
	select {
	case id := <-done:
		t.Fatalf("second publish (id %d) committed while the first transaction was open", id)
	case <-time.After(200 * time.Millisecond):
	}
	if err := tx1.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if id2 := <-done; id2 <= id1 {
		t.Fatalf("got ids %d then %d, want increasing in commit order", id1, id2)
	}
}

// A batch is delivered in the order it was drafted, after one NOTIFY.
func TestPublishBatchKeepsOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	bus, stop := startBus(t, pool, nil)
	defer stop()
	sub := bus.Subscribe("calls")
	defer sub.Close()
	var drafts []events.Draft
	for i := range 30 {
		drafts = append(drafts, events.Draft{Topic: "calls", Kind: "k", Payload: map[string]int{"i": i}})
	}
	if err := db.WithTx(ctx, pool, func(tx pgx.Tx) error { _, err := events.PublishBatch(ctx, tx, drafts); return err }); err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		select {
		case ev := <-sub.C:
			var p struct{ I int }
			if err := ev.Decode(&p); err != nil || p.I != i {
				t.Fatalf("event %d: got %s (%v), want i=%d", i, ev.Payload, err, i)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("event %d never arrived", i)
		}
	}
}

// Events a bus publishes itself reach its subscribers from memory and other replicas'
// through NOTIFY; either way each arrives once and in id order, also when another
// transaction's events (announced or not) come between, and never when rolled back.
func TestLocalPublishDeliveredOnceInOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	local, stopLocal := startBus(t, pool, nil)
	defer stopLocal()
	other, stopOther := startBus(t, pool, nil)
	defer stopOther()
	subs := []*events.Subscription{local.Subscribe("t"), other.Subscribe("t")}
	defer subs[0].Close()
	defer subs[1].Close()
	next := 0
	want := []int{}
	draft := func() events.Draft {
		want = append(want, next)
		next++
		return events.Draft{Topic: "t", Kind: "k", Payload: map[string]int{"i": next - 1}}
	}
	publishLocal := func(rollback bool) {
		t.Helper()
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n := len(want)
		p, err := local.PublishBatch(ctx, tx, []events.Draft{draft(), draft(), draft()})
		if err != nil {
			t.Fatal(err)
		}
		if rollback {
			want = want[:n]
			err = tx.Rollback(ctx)
			if err == nil {
				err = errors.New("rolled back")
			}
		} else {
			err = tx.Commit(ctx)
		}
		p.Deliver(err)
	}
	for i := range 20 {
		publishLocal(false)
		switch i % 4 {
		case 1: // another transaction, announced
			d := draft()
			publish(t, pool, d.Topic, d.Kind, d.Payload)
		case 2: // another transaction whose NOTIFY this bus never gets: Deliver must read it
			d := draft()
			raw, _ := json.Marshal(d.Payload)
			if _, err := pool.Exec(ctx, `INSERT INTO events (id, topic, kind, payload) VALUES (nextval('events_id_seq'), 't', 'k', $1)`, raw); err != nil {
				t.Fatal(err)
			}
		case 3:
			publishLocal(true)
		}
	}
	end := draft()
	publish(t, pool, end.Topic, end.Kind, end.Payload)
	for s, sub := range subs {
		var lastID int64
		for _, w := range want {
			ev := receive(t, sub)
			var p struct{ I int }
			if err := ev.Decode(&p); err != nil || p.I != w || ev.ID <= lastID {
				t.Fatalf("bus %d: got event %d %s (%v), want i=%d after id %d", s, ev.ID, ev.Payload, err, w, lastID)
			}
			lastID = ev.ID
		}
	}
}

// A watch on every bus of a Local has seen an event by the time the transaction that
// published it, begun on the Local, returns from committing; one that rolled back never.
func TestWatchSeesCommitsBeforeTheyReturn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	local := events.NewLocal(pool)
	var buses []*events.Bus
	for range 2 {
		bus, stop := startBus(t, pool, &events.BusOptions{Local: local})
		defer stop()
		buses = append(buses, bus)
	}
	var mu sync.Mutex
	seen := map[int]int64{} // bus → last event id watched
	for i, bus := range buses {
		w := bus.Watch(func(ev events.Event) { mu.Lock(); seen[i] = ev.ID; mu.Unlock() }, "w")
		defer w.Close()
	}
	for range 20 {
		id := publish(t, local, "w", "k", nil)
		var batch []events.Event
		if err := db.WithTx(ctx, local, func(tx pgx.Tx) error {
			var err error
			batch, err = events.PublishBatch(ctx, tx, []events.Draft{{Topic: "x", Kind: "k"}, {Topic: "w", Kind: "k"}})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		for i := range buses {
			if seen[i] != batch[1].ID {
				t.Fatalf("bus %d: watched up to %d when the commits of %d and %d returned", i, seen[i], id, batch[1].ID)
			}
		}
		mu.Unlock()
	}
	rolledBack := errors.New("rolled back")
	if err := db.WithTx(ctx, local, func(tx pgx.Tx) error {
		_, err := events.Publish(ctx, tx, "w", "k", nil)
		return errors.Join(err, rolledBack)
	}); !errors.Is(err, rolledBack) {
		t.Fatal(err)
	}
	last := publish(t, local, "w", "k", nil)
	mu.Lock()
	defer mu.Unlock()
	if seen[0] != last || seen[1] != last {
		t.Fatalf("after a rollback: watched %v, want %d on both", seen, last)
	}
}

// Prune deletes old events in batches, but never those of kept topics nor the newest.
func TestPrune(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	// 10,500 old events on "calls" (more than one batch), old ones of an execution, a
	// recent one, and an old one that is the newest of all.
	if _, err := pool.Exec(ctx, `INSERT INTO events (id, topic, kind, payload, created_at)
		SELECT nextval('events_id_seq'), CASE WHEN n % 100 = 0 THEN 'execution:e1' ELSE 'calls' END, 'k', '{}', now() - interval '30 days'
		FROM generate_series(1, 10500) AS n`); err != nil {
		t.Fatal(err)
	}
	recent := publish(t, pool, "calls", "k", nil)
	if _, err := pool.Exec(ctx, `INSERT INTO events (id, topic, kind, payload, created_at)
		VALUES (nextval('events_id_seq'), 'calls', 'k', '{}', now() - interval '30 days')`); err != nil {
		t.Fatal(err)
	}
	if through, err := events.PrunedThrough(ctx, pool); err != nil || through != 0 {
		t.Fatalf("pruned through %d (%v) before any prune, want 0", through, err)
	}
	var newestOld int64 // the newest event the prune deletes: the last old calls one before the recent
	if err := pool.QueryRow(ctx, `SELECT max(id) FROM events WHERE topic = 'calls' AND id < $1`, recent).Scan(&newestOld); err != nil {
		t.Fatal(err)
	}
	n, err := events.Prune(ctx, pool, time.Now().Add(-7*24*time.Hour), "execution:")
	if err != nil {
		t.Fatal(err)
	}
	if n != 10500-105 {
		t.Errorf("pruned %d, want %d (the old calls events)", n, 10500-105)
	}
	// Recorded, and kept by a prune that deletes nothing: a page behind it must reload.
	for range 2 {
		if through, err := events.PrunedThrough(ctx, pool); err != nil || through != newestOld {
			t.Fatalf("pruned through %d (%v), want %d", through, err, newestOld)
		}
		if n, err := events.Prune(ctx, pool, time.Now().Add(-7*24*time.Hour), "execution:"); err != nil || n != 0 {
			t.Fatalf("a second prune deleted %d (%v), want nothing", n, err)
		}
	}
	var left []string
	rows, err := pool.Query(ctx, `SELECT topic || CASE WHEN id = $1 THEN ' recent' WHEN id = (SELECT max(id) FROM events) THEN ' newest' ELSE '' END
		FROM events ORDER BY id`, recent)
	if err != nil {
		t.Fatal(err)
	}
	if left, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	if len(left) != 105+2 || left[0] != "execution:e1" || left[105] != "calls recent" || left[106] != "calls newest" {
		t.Fatalf("left %d events (%v … %v), want the execution's 105, the recent one and the newest", len(left), left[:min(3, len(left))], left[max(0, len(left)-3):])
	}
}

// TestSubscribeSampled: events of a sampled topic are held (the newest keep) instead of
// sent on C, and handed over only in id order with what C carries.
func TestSubscribeSampled(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	bus, stop := startBus(t, pool, nil)
	defer stop()

	s := bus.SubscribeSampled([]string{"s", "c"}, []string{"s"}, 4)
	defer s.Close()
	all := bus.Subscribe() // delivered after s for each event: tells when s has seen one
	defer all.Close()

	var ids []int64
	for _, topic := range []string{"s", "s", "c", "s", "s", "s"} {
		ids = append(ids, publish(t, pool, topic, "k", nil))
	}
	for ev := receive(t, all); ev.ID != ids[5]; ev = receive(t, all) {
	}
	if evs, ok := s.TakeSampled(0); ok || evs != nil {
		t.Fatalf("TakeSampled before C's event was received = %v, %v; want nothing, false", evs, ok)
	}
	c := receive(t, s)
	if c.ID != ids[2] {
		t.Fatalf("C carried %d, want only the event of topic c (%d)", c.ID, ids[2])
	}
	idsOf := func(evs []events.Event) []int64 {
		out := []int64{}
		for _, ev := range evs {
			out = append(out, ev.ID)
		}
		return out
	}
	// ids[0] fell out (keep 4); ids[1] came before C's event.
	if got := idsOf(s.TakeSampledBefore(c.ID)); !slices.Equal(got, ids[1:2]) {
		t.Fatalf("TakeSampledBefore(%d) = %v, want %v", c.ID, got, ids[1:2])
	}
	evs, ok := s.TakeSampled(c.ID)
	if got := idsOf(evs); !ok || !slices.Equal(got, ids[3:]) {
		t.Fatalf("TakeSampled = %v, %v; want %v, true", got, ok, ids[3:])
	}
	if evs, ok := s.TakeSampled(c.ID); !ok || len(evs) != 0 {
		t.Fatalf("a second TakeSampled = %v, %v; want nothing, true", evs, ok)
	}
}

// An event committed while the listener reconnects is delivered when it is back, also
// when no event had reached the bus before (the first listen skips history; a
// reconnect must not).
func TestEventsDuringAReconnectAreDelivered(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	bus, stop := startBus(t, pool, nil)
	defer stop()
	all := bus.Subscribe()
	defer all.Close()
	ctx := context.Background()
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE 'LISTEN %'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("ended %d listeners (%v), want the bus's", n, err)
	}
	id := publish(t, pool, "a", "thing.created", map[string]string{"name": "while away"})
	if ev := receive(t, all); ev.ID != id {
		t.Fatalf("got event %d, want %d", ev.ID, id)
	}
}

// An event whose notification never came (a listening connection left half-open by a
// failover hears nothing) is read once the bus has been quiet for a while.
func TestQuietBusReadsWhatItMissed(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	bus, stop := startBus(t, pool, &events.BusOptions{Quiet: 100 * time.Millisecond})
	defer stop()
	all := bus.Subscribe()
	defer all.Close()
	var id int64
	if err := pool.QueryRow(context.Background(), `INSERT INTO events (id, topic, kind, payload)
		VALUES (nextval('events_id_seq'), 'a', 'thing.created', '{}') RETURNING id`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if ev := receive(t, all); ev.ID != id {
		t.Fatalf("got event %d, want %d", ev.ID, id)
	}
}

// Tail is the end of a topic's log up to an event, oldest first, with the count of the
// older ones: the newest lines, however long the log.
func TestTail(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	var ids []int64
	for i := range 25 {
		ids = append(ids, publish(t, pool, "log", "line", map[string]int{"n": i}))
		publish(t, pool, "other", "line", nil)
	}
	later := publish(t, pool, "log", "line", nil) // after the page's cursor
	evs, older, err := events.Tail(ctx, pool, "log", ids[24], 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 10 || evs[0].ID != ids[15] || evs[9].ID != ids[24] || older != 15 {
		t.Fatalf("Tail(10): %d events from %d to %d, %d older; want %d to %d, 15 older", len(evs), evs[0].ID, evs[len(evs)-1].ID, older, ids[15], ids[24])
	}
	if evs, older, err := events.Tail(ctx, pool, "log", later, 100); err != nil || len(evs) != 26 || older != 0 {
		t.Fatalf("Tail(100): %d events, %d older, %v; want all 26", len(evs), older, err)
	}
}

// While the bus reconnects, a transaction begun on its Local that published an event
// still has the bus's watches see it before it returns: what they keep (the router's
// tool lookups) must not outlive a change its author was told had committed.
func TestWatchSeesLocalCommitsWhileTheBusReconnects(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	local := events.NewLocal(pool)
	bus, stop := startBus(t, pool, &events.BusOptions{Local: local})
	defer stop()
	var seen atomic.Int64
	w := bus.Watch(func(ev events.Event) { seen.Store(ev.ID) }, "w")
	defer w.Close()
	for attempt := 1; ; attempt++ {
		_, before := bus.Listening()
		n := testkit.Count(t, pool, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid()
			  AND (query LIKE 'LISTEN %' OR query LIKE '%events.listen.ping%')`)
		if n != 1 {
			t.Fatalf("ended %d listeners, want the bus's", n)
		}
		var on bool
		var away time.Time
		testkit.WaitFor(t, 30*time.Second, func() bool {
			on, away = bus.Listening()
			return away.After(before)
		}, "the bus never noticed its listener ended")
		if !on {
			id := publish(t, local, "w", "k", nil)
			if on, since := bus.Listening(); !on && since.Equal(away) {
				// Away for the whole commit: only the Local could have delivered it.
				if got := seen.Load(); got != id {
					t.Fatalf("while the bus reconnected: watched up to %d when the commit of %d returned", got, id)
				}
				return
			}
		}
		// Back already (each reconnect waits longer, so the next try finds it away).
		if attempt == 5 {
			t.Fatal("the bus was back before every commit")
		}
		testkit.WaitFor(t, 30*time.Second, func() bool { on, _ := bus.Listening(); return on }, "the bus never listened again")
	}
}
