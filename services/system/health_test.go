package system_test

import (
	"context"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/system"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// Health reports the event bus: down until it listens (live updates of other replicas
// do not arrive, and a page's socket sees only this one's), up while it does, down
// again once it stopped; each with since when.
func TestHealthReportsTheEventBus(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	bus := events.NewBus(pool, nil)
	s := system.New(pool, false).WithBus(bus)
	check := func(when, status string) {
		t.Helper()
		h := s.Health(context.Background())
		c, ok := h.Components["event_bus"]
		if !ok || c.Status != status || c.Since == nil || (status == system.Down) == (c.Problem == "") || h.OK != (status == system.Up) {
			t.Fatalf("%s: event_bus %+v (reported: %v), health ok %v; want %s with since when", when, c, ok, h.OK, status)
		}
	}
	check("before the bus ran", system.Down)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = bus.Run(ctx); close(done) }()
	select {
	case <-bus.Ready():
	case <-time.After(30 * time.Second):
		t.Fatal("the bus never listened")
	}
	check("while the bus listens", system.Up)
	cancel()
	<-done
	check("after the bus stopped", system.Down)
}
