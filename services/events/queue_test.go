package events_test

import (
	"testing"

	"github.com/toolwarden/toolwarden/services/events"
)

// A subscriber may ask for a shorter queue than the bus's Buffer (the websocket hub
// does, for its thousands of idle sockets); everyone else keeps the bus's.
func TestSubscribeSampledQueue(t *testing.T) {
	t.Parallel()
	bus := events.NewBus(nil, nil)
	short := bus.SubscribeSampledQueue([]string{"a"}, nil, 1, 32)
	defer short.Close()
	if n := cap(short.C); n != 32 {
		t.Errorf("a subscription asking for 32 queues %d events", n)
	}
	for name, s := range map[string]*events.Subscription{
		"Subscribe":                           bus.Subscribe("a"),
		"SubscribeSampled":                    bus.SubscribeSampled([]string{"a"}, nil, 1),
		"SubscribeSampledQueue with no queue": bus.SubscribeSampledQueue([]string{"a"}, nil, 1, 0),
	} {
		if n := cap(s.C); n != 256 {
			t.Errorf("%s queues %d events, want the bus's 256", name, n)
		}
		s.Close()
	}
}
