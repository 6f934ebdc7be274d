package web_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/web"
)

// replayUntil reads conn until the cursor reaches last and returns how many messages
// that took, failing on a request to reload.
func replayUntil(t *testing.T, conn *websocket.Conn, last int64) int {
	t.Helper()
	frames := 0
	deadline := time.Now().Add(60 * time.Second)
	for {
		_ = conn.SetReadDeadline(deadline)
		_, msg, err := conn.ReadMessage()
		if err != nil {
			t.Fatalf("replay up to %d: %v after %d messages", last, err, frames)
		}
		frames++
		s := string(msg)
		if strings.Contains(s, "missed too many live updates") {
			t.Fatalf("the replay asked the page to reload (message %d)", frames)
		}
		i := strings.LastIndex(s, `data-last-event-id="`)
		if i < 0 {
			continue
		}
		s = s[i+len(`data-last-event-id="`):]
		id, _ := strconv.ParseInt(s[:strings.IndexByte(s, '"')], 10, 64)
		if id >= last {
			return frames
		}
	}
}

// Pages replaying the same missed events share their renderings: the hub keeps at
// least as many fragments as one replay sends (it kept 512, oldest first, and every
// replay of more than that rendered each event again: a query or more each).
func TestReplaysOfTheSameEventsRenderThemOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, nil)
	srv.LiveServer(t, "mt", true, "echo")
	id := srv.ToolID(t, "mt__echo")
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	cursor := lastEventID(t, srv)
	const missed = 800
	var last int64
	if err := db.WithTx(ctx, srv.Pool, func(tx pgx.Tx) error {
		for v := range missed {
			var err error
			if last, err = events.ToolChanged.Publish(ctx, tx, tools.Topic, events.ToolVersion{ID: id, Version: v + 2}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	before := web.Renders(srv.App.Web)
	for range 3 {
		conn := wsDial(t, srv, admin, []string{tools.Topic}, cursor)
		replayUntil(t, conn, last)
		conn.Close()
	}
	if n := web.Renders(srv.App.Web) - before; n > missed+10 {
		t.Fatalf("three replays of the same %d events rendered %d fragments, want each event once", missed, n)
	}
}

// A page back after a gap is replayed only the newest of a sampled topic's events
// (the audit log's), as it would have been sent them live, and they do not count
// towards the replay's bound: a dashboard that missed a thousand calls' entries is not
// asked to reload.
func TestReplayOfManyAuditEntriesIsSampled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, nil)
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	cursor := lastEventID(t, srv)
	entries := make([]audit.Entry, 1100)
	for i := range entries {
		entries[i] = audit.Entry{Actor: audit.System, Action: "test.gap", TargetType: "test", TargetID: strconv.Itoa(i)}
	}
	if err := db.WithTx(ctx, srv.Pool, func(tx pgx.Tx) error {
		// Batches small enough that each entry is announced, as calls recorded apart are.
		for i := 0; i < len(entries); i += 10 {
			if _, err := audit.AppendBatch(ctx, tx, entries[i:i+10]); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	last := lastEventID(t, srv)
	if n := testkit.Count(t, srv.Pool, `SELECT count(*) FROM events WHERE id > $1 AND topic = $2`, cursor, audit.Topic); n < len(entries) {
		t.Fatalf("%d audit events announced the %d entries, want one each", n, len(entries))
	}
	conn := wsDial(t, srv, admin, []string{audit.Topic, "sessions"}, cursor)
	if n := replayUntil(t, conn, last); n > web.WSSampleKeep {
		t.Fatalf("the replay of %d audit entries took %d messages, want at most the newest %d", len(entries), n, web.WSSampleKeep)
	}
}
