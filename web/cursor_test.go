package web_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/tools"
)

// Every page that follows topics over the websocket carries the cursor it was read at:
// a page at cursor 0 made its socket replay the whole history (on /grants and
// /terminals, toasts of approvals asked for long ago).
func TestEveryLivePageHasACursor(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	srv.LiveServer(t, "mt", true, "echo")
	srv.CreateUser(t, "tess", auth.RoleToolUser, "tess-password-123")
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	for _, path := range []string{"/", "/servers", "/tools", "/executions", "/terminals", "/approvals", "/analytics", "/grants",
		"/audit", "/users", "/tokens", "/settings/executions", "/assistant", "/tools/" + srv.ToolID(t, "mt__echo")} {
		doc := page(t, srv.Get(t, admin, path))
		topics, live := doc.Find(`[ws-connect]`).Attr("data-topics")
		if !live || topics == "" {
			continue
		}
		cursor, err := strconv.ParseInt(doc.Find(`#ws-cursor`).AttrOr("data-last-event-id", ""), 10, 64)
		if err != nil || cursor <= 0 {
			t.Errorf("%s follows %q from cursor %q, want the newest event id", path, topics, doc.Find(`#ws-cursor`).AttrOr("data-last-event-id", ""))
		}
	}
}

// A page resuming from a cursor older than what the retention pruned cannot be sent
// what it missed: it is told to reload, not replayed the rest as if that were all.
func TestSocketBehindPrunedEventsIsToldToReload(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, nil)
	srv.LiveServer(t, "mt", true, "echo")
	id := srv.ToolID(t, "mt__echo")
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	cursor := lastEventID(t, srv)
	changed := func(version int) int64 {
		var ev int64
		err := db.WithTx(ctx, srv.Pool, func(tx pgx.Tx) error {
			var err error
			ev, err = events.ToolChanged.Publish(ctx, tx, tools.Topic, events.ToolVersion{ID: id, Version: version})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	old := changed(2)
	testkit.Exec(t, srv.Pool, `UPDATE events SET created_at = now() - interval '8 days' WHERE id = $1`, old)
	changed(3)
	if n, err := events.Prune(ctx, srv.Pool, time.Now().Add(-7*24*time.Hour)); err != nil || n < 1 {
		t.Fatalf("pruned %d events (%v), want the backdated one", n, err)
	}
	conn := wsDial(t, srv, admin, []string{tools.Topic}, cursor)
	wsUntil(t, conn, "the reload toast", func(doc *goquery.Document) bool {
		html, _ := doc.Html()
		if strings.Contains(html, "missed too many") {
			return true
		}
		if strings.Contains(html, id) {
			t.Fatalf("a page behind pruned event %d was replayed the later one alone, with no reload: %s", old, html)
		}
		return false
	})
}

// Other people's sign-ins and sign-outs, which a socket reads only to re-check its own
// person, do not count towards the replay's bound: a quiet page was told to reload after
// a thousand of them, and its own missed event never came.
func TestReplayIgnoresOthersSessions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, nil)
	srv.LiveServer(t, "mt", true, "echo")
	id := srv.ToolID(t, "mt__echo")
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	cursor := lastEventID(t, srv)
	err := db.WithTx(ctx, srv.Pool, func(tx pgx.Tx) error {
		for i := range 1200 {
			kind := events.SessionStarted
			if i%2 == 1 {
				kind = events.SessionEnded
			}
			if _, err := kind.Publish(ctx, tx, auth.SessionsTopic, events.Session{UserID: "11111111-1111-4111-8111-111111111111",
				Username: "someone"}); err != nil {
				return err
			}
		}
		_, err := events.ToolChanged.Publish(ctx, tx, tools.Topic, events.ToolVersion{ID: id, Version: 2})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	conn := wsDial(t, srv, admin, []string{tools.Topic}, cursor)
	wsUntil(t, conn, "the missed tool event", func(doc *goquery.Document) bool {
		html, _ := doc.Html()
		if strings.Contains(html, "missed too many") {
			t.Fatalf("a page that missed one event of its own was told to reload: %s", html)
		}
		return strings.Contains(html, id)
	})
}
