package web

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/toolwarden/toolwarden/handlers"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/events"
)

// A replay counts towards wsMaxReplay only the events up to its bound (the newest
// committed when it began): those committed between that read and the replay's own
// arrive live, and counting them told a page that missed a few less than wsMaxReplay,
// during a busy moment, to reload. More than wsMaxReplay up to the bound still is too
// many. Both reads are bounded so: the page's topics, and the sessions events about its
// person when it follows that topic only for its own checks.
func TestReplayCountsOnlyEventsThroughItsBound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	bus := events.NewBus(pool, nil)
	h := newHub(&handlers.Deps{Events: bus}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	const user = "00000000-0000-0000-0000-00000000000a"
	// publish records n events on topic (about user, on the sessions topic) and returns
	// the last one's id.
	publish := func(topic string, n int) int64 {
		t.Helper()
		drafts := make([]events.Draft, n)
		for i := range drafts {
			drafts[i] = events.Draft{Topic: topic, Kind: string(events.UserChanged), Payload: events.Session{UserID: user, Username: "ada"}}
		}
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		evs, err := events.PublishBatch(ctx, tx, drafts)
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		return evs[len(evs)-1].ID
	}
	check := func(name string, last, bound int64, topics, subscribed []string, onlyForCheck bool, want int, wantTooMany bool) {
		t.Helper()
		evs, tooMany, err := h.replayThrough(ctx, last, bound, topics, subscribed, nil, onlyForCheck, user)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if tooMany != wantTooMany {
			t.Errorf("%s: tooMany %v, want %v (%d events replayed up to the bound)", name, tooMany, wantTooMany, len(evs))
		}
		if wantTooMany {
			return
		}
		if len(evs) != want || evs[len(evs)-1].ID != bound {
			t.Errorf("%s: replayed %d events through %d, want %d through the bound %d", name, len(evs), evs[len(evs)-1].ID, want, bound)
		}
	}

	// The page's topic: wsMaxReplay events it missed, then a few committed after the
	// replay's bound (while it read).
	bound := publish("servers", wsMaxReplay)
	publish("servers", 5)
	check("servers", 0, bound, []string{"servers"}, []string{"servers"}, false, wsMaxReplay, false)
	check("servers, one more", 0, bound+1, []string{"servers"}, []string{"servers"}, false, 0, true)

	// The sessions events about the person of a page that follows the topic only for
	// its checks (SinceAbout), after the events above.
	from := publish("servers", 1)
	bound = publish(events.SessionsTopic, wsMaxReplay)
	publish(events.SessionsTopic, 5)
	check("sessions about the person", from, bound, []string{"servers"}, []string{"servers", events.SessionsTopic}, true, wsMaxReplay, false)
	check("sessions about the person, one more", from, bound+1, []string{"servers"}, []string{"servers", events.SessionsTopic}, true, 0, true)
}
