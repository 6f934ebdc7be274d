package web

import (
	"io"
	"log/slog"
	"testing"
	"unsafe"

	"github.com/toolwarden/toolwarden/handlers"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/events"
)

// An idle socket's subscription holds a short queue, not the bus's 256 events (22 KiB
// a socket: 110 MiB for 5,000 open dashboards); other subscribers keep the bus's.
func TestHubSubscriptionQueueIsShort(t *testing.T) {
	t.Parallel()
	bus := events.NewBus(nil, nil)
	h := newHub(&handlers.Deps{}, bus, slog.New(slog.NewTextHandler(io.Discard, nil)))
	s := h.subscribe([]string{auth.SessionsTopic, audit.Topic}, []string{audit.Topic})
	defer s.Close()
	per := cap(s.C) * int(unsafe.Sizeof(events.Event{}))
	if cap(s.C) > 64 || per > 6<<10 {
		t.Errorf("a socket's subscription queues %d events (%d bytes), want at most 64 (6 KiB)", cap(s.C), per)
	}
	other := bus.Subscribe(auth.SessionsTopic)
	defer other.Close()
	if cap(other.C) != 256 {
		t.Errorf("another subscriber's queue: %d events, want the bus's 256", cap(other.C))
	}
}
