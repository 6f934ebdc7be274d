package web

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/toolwarden/toolwarden/handlers"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/events"
)

// sessionUsers decodes each sessions event once for every socket, answers as decoding
// it would, forgets the oldest past its bound, and is not fooled by an id the database
// hands out again to an event about someone else.
func TestSessionUsersCache(t *testing.T) {
	ev := func(id int64, user string) events.Event {
		payload, err := json.Marshal(events.Session{UserID: user})
		if err != nil {
			t.Fatal(err)
		}
		return events.Event{ID: id, Topic: auth.SessionsTopic, Kind: "session.ended", Payload: payload}
	}
	var c sessionUsers
	for range 3 {
		if u, ok := c.of(ev(1, "alice")); !ok || u != "alice" {
			t.Fatalf("event 1 is about %q (%v), want alice", u, ok)
		}
	}
	if len(c.users) != 1 || len(c.order) != 1 {
		t.Fatalf("one event looked at thrice kept %d (%d ids), want 1", len(c.users), len(c.order))
	}
	if u, ok := c.of(ev(1, "bob")); !ok || u != "bob" {
		t.Fatalf("a reused id 1 about bob is about %q (%v)", u, ok)
	}
	if u, ok := c.of(events.Event{ID: 2, Topic: auth.SessionsTopic, Payload: json.RawMessage(`{`)}); ok {
		t.Fatalf("an event that does not decode is about %q", u)
	}
	for id := int64(3); id < 3+2*sessionUsersKept; id++ {
		c.of(ev(id, "carol"))
	}
	if len(c.users) != sessionUsersKept || len(c.order) != sessionUsersKept {
		t.Fatalf("kept %d events (%d ids), want at most %d", len(c.users), len(c.order), sessionUsersKept)
	}
	h := &hub{}
	if !h.aboutUser(ev(5000, "dave"), "dave") || h.aboutUser(ev(5000, "dave"), "erin") {
		t.Fatal("hub.aboutUser does not tell dave's event from erin's")
	}
}

// After the bus starts over (events.Reset), the hub keeps no fragment, batch or session
// user by event id: the ids are handed out again, to other events.
func TestHubForgetsOnReset(t *testing.T) {
	h := &hub{cache: map[eventKey]rendered{{id: 7}: {}}, order: []eventKey{{id: 7}}, cacheBytes: 100,
		batches: map[string]*websocket.PreparedMessage{"7,8": nil}, batchOrder: []string{"7,8"}}
	payload, _ := json.Marshal(events.Session{UserID: "u1"})
	h.sessionUsers.of(events.Event{ID: 7, Topic: auth.SessionsTopic, Kind: "session.ended", Payload: payload})
	h.forget()
	if len(h.cache)+len(h.order)+h.cacheBytes+len(h.batches)+len(h.batchOrder)+len(h.sessionUsers.users)+len(h.sessionUsers.order) != 0 {
		t.Fatalf("kept after forget: cache %d, batches %d, session users %d", len(h.cache), len(h.batches), len(h.sessionUsers.users))
	}
}

// A socket may render an event it buffered before the bus started over after the hub
// forgot its caches: that fragment is not taken for the new event the database stores
// under the same id, alone or in a batch.
func TestHubStaleEventAfterResetIsNotServedForNewOne(t *testing.T) {
	h := newHub(&handlers.Deps{}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ev := func(id int64, action string, at time.Time) events.Event {
		payload, err := json.Marshal(events.AuditSummary{ID: id, At: at, ActorKind: "user", ActorName: "ann",
			Action: action, TargetType: "tool", TargetID: "t1", Result: "success"})
		if err != nil {
			t.Fatal(err)
		}
		return events.Event{ID: id, Topic: audit.Topic, Kind: string(events.AuditAppended), Payload: payload, CreatedAt: at}
	}
	before := time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC)
	stale, stale2 := ev(7, "tool.stale_action", before), ev(8, "tool.stale_two", before)
	h.forget()
	ctx := context.Background()
	for _, e := range []events.Event{stale, stale2} { // rendered late, after the forget
		if _, err := h.render(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	sb, err := h.batch(ctx, []events.Event{stale, stale2})
	if err != nil {
		t.Fatal(err)
	}
	after := before.Add(time.Second)
	fresh, fresh2 := ev(7, "tool.fresh_action", after), ev(8, "tool.fresh_two", after)
	r, err := h.render(ctx, fresh)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(r.raw, []byte("tool.fresh_action")) || bytes.Contains(r.raw, []byte("stale")) {
		t.Fatalf("event 7 stored after the reset rendered as the one before it:\n%s", r.raw)
	}
	fb, err := h.batch(ctx, []events.Event{fresh, fresh2})
	if err != nil {
		t.Fatal(err)
	}
	if fb == sb {
		t.Fatal("events 7 and 8 stored after the reset were sent as the batch of those before it")
	}
}
