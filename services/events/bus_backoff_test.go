package events_test

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/events"
)

// waits records how long the bus said it waits before each reconnect.
type waits struct {
	mu  sync.Mutex
	got []time.Duration
}

func (w *waits) Enabled(context.Context, slog.Level) bool { return true }
func (w *waits) WithAttrs([]slog.Attr) slog.Handler       { return w }
func (w *waits) WithGroup(string) slog.Handler            { return w }
func (w *waits) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "in" {
			w.mu.Lock()
			w.got = append(w.got, a.Value.Duration())
			w.mu.Unlock()
		}
		return true
	})
	return nil
}

// A listener lost after it listened again reconnects as soon as the first one did: the
// wait doubles over failures in a row only, and a bus that was back for hours waited
// seconds after its next loss.
func TestBusBackoffStartsOverAfterItListened(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	w := &waits{}
	bus, stop := startBus(t, pool, &events.BusOptions{Logger: slog.New(w)})
	defer stop()
	for range 3 {
		_, before := bus.Listening()
		n := testkit.Count(t, pool, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid()
			  AND (query LIKE 'LISTEN %' OR query LIKE '%events.listen.ping%')`)
		if n != 1 {
			t.Fatalf("ended %d listeners, want the bus's", n)
		}
		var away time.Time
		testkit.WaitFor(t, 30*time.Second, func() bool {
			var on bool
			on, away = bus.Listening()
			return !on && away.After(before)
		}, "the bus never noticed its listener ended")
		testkit.WaitFor(t, 30*time.Second, func() bool {
			on, since := bus.Listening()
			return on && since.After(away)
		}, "the bus never listened again")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.got) != 3 {
		t.Fatalf("the bus reconnected after waits %v, want 3", w.got)
	}
	for _, d := range w.got {
		if d != 100*time.Millisecond {
			t.Fatalf("the bus waited %v before reconnecting after each loss, want 100ms each", w.got)
		}
	}
}

// Each sampled topic keeps its own newest events: a burst on one (the audit log's) does
// not push out the newest of another (the event that carries the approvals count).
func TestSampledTopicsKeepTheirOwnNewest(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	bus, stop := startBus(t, pool, nil)
	defer stop()
	s := bus.SubscribeSampled([]string{"a", "x"}, []string{"a", "x"}, 2)
	defer s.Close()
	all := bus.Subscribe() // delivered after s for each event: tells when s has seen one
	defer all.Close()
	var ids []int64
	for _, topic := range []string{"x", "x", "x", "a", "a", "a", "a"} {
		ids = append(ids, publish(t, pool, topic, "k", nil))
	}
	for ev := receive(t, all); ev.ID != ids[6]; ev = receive(t, all) {
	}
	evs, ok := s.TakeSampled(0)
	var got []int64
	for _, ev := range evs {
		got = append(got, ev.ID)
	}
	if want := []int64{ids[1], ids[2], ids[5], ids[6]}; !ok || !slices.Equal(got, want) {
		t.Fatalf("held %v (%v), want the newest two of each topic %v", got, ok, want)
	}
}
