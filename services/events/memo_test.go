package events_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/events"
)

// A Memo keeps a value until an event of its topics (of a kind it does not ignore)
// clears it; callers that find it gone share one load; with no bus nothing is kept.
func TestMemo(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	var loads atomic.Int64
	load := func() (int64, error) { return loads.Add(1), nil }

	var none events.Memo[int64]
	none.Get(load)
	if v, _ := none.Get(load); v != 2 {
		t.Fatalf("with no bus: %d, want a load per call", v)
	}

	loads.Store(0)
	bus, stop := startBus(t, pool, nil)
	defer stop()
	var m events.Memo[int64]
	m.Watch(bus, []string{"kept"}, "ignored.kind")
	// Published through the bus itself: its watchers (m's) have run when this returns.
	send := func(topic, kind string) {
		t.Helper()
		ctx := t.Context()
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		p, err := bus.PublishBatch(ctx, tx, []events.Draft{{Topic: topic, Kind: kind}})
		if err != nil {
			t.Fatal(err)
		}
		err = tx.Commit(ctx)
		p.Deliver(err)
		if err != nil {
			t.Fatal(err)
		}
	}
	if v, _ := m.Get(load); v != 1 {
		t.Fatalf("first Get: %d", v)
	}
	if v, _ := m.Get(load); v != 1 {
		t.Fatalf("second Get loaded again: %d", v)
	}
	for _, ev := range []struct {
		topic, kind string
		want        int64
	}{{"other", "x", 1}, {"kept", "ignored.kind", 1}, {"kept", "changed", 2}} {
		send(ev.topic, ev.kind)
		if v, _ := m.Get(load); v != ev.want {
			t.Errorf("after %s/%s: %d, want %d", ev.topic, ev.kind, v, ev.want)
		}
	}

	// Gone: eight callers at once share one load.
	send("kept", "changed")
	release := make(chan struct{})
	slow := func() (int64, error) { <-release; return loads.Add(1), nil }
	var wg sync.WaitGroup
	got := make([]int64, 8)
	for i := range got {
		wg.Go(func() { got[i], _ = m.Get(slow) })
	}
	time.Sleep(100 * time.Millisecond) // let them all find the value gone
	close(release)
	wg.Wait()
	for i, v := range got {
		if v != 3 {
			t.Errorf("caller %d got %d, want the one shared load (3)", i, v)
		}
	}
}
