package web_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/tools"
)

// A person disabled between the socket's handshake and its subscription (an event the
// replay of a page without the sessions topic leaves out) is signed out at once, not
// at the next periodic check.
func TestSocketChecksThePersonWhenItSubscribes(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	u := srv.CreateUser(t, "aud", auth.RoleAuditor, "aud-password-12345")
	c := srv.Login(t, "aud", "aud-password-12345")
	conn, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/ws", wsHeader(srv, c))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := srv.Auth.SetDisabled(t.Context(), audit.System, u.ID, true); err != nil {
		t.Fatal(err)
	}
	if err := conn.WriteJSON(map[string]any{"subscribe": []string{"audit"}, "last_id": 0}); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, msg, err := conn.ReadMessage()
		var ce *websocket.CloseError
		if errors.As(err, &ce) && ce.Code == 4401 {
			return
		}
		if err != nil {
			t.Fatalf("after the person was disabled: %v %s; want close 4401 at once", err, msg)
		}
	}
}

// An event that cannot be rendered for a moment (here the tools table is away) closes
// the socket with 1013 instead of being skipped; the page reconnecting from its cursor
// gets it once the database answers again.
func TestSocketReplaysAnEventItCouldNotRender(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, nil)
	srv.LiveServer(t, "mt", true, "echo")
	id := srv.ToolID(t, "mt__echo")
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	latest, err := srv.App.Bus.LatestID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	conn := wsDial(t, srv, admin, []string{tools.Topic}, latest)
	if _, err := srv.Owner.Exec(ctx, `ALTER TABLE mcp_tools RENAME TO mcp_tools_away`); err != nil {
		t.Fatal(err)
	}
	err = db.WithTx(ctx, srv.Pool, func(tx pgx.Tx) error {
		_, err := events.ToolChanged.Publish(ctx, tx, tools.Topic, events.ToolVersion{ID: id, Version: 2})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	for {
		_, _, err := conn.ReadMessage()
		if websocket.IsCloseError(err, 1013) {
			break
		}
		if err != nil {
			t.Fatalf("the socket ended with %v, want 1013 to try again", err)
		}
	}
	if _, err := srv.Owner.Exec(ctx, `ALTER TABLE mcp_tools_away RENAME TO mcp_tools`); err != nil {
		t.Fatal(err)
	}
	again := wsDial(t, srv, admin, []string{tools.Topic}, latest)
	wsUntil(t, again, "the tool's row after the reconnect", func(doc *goquery.Document) bool {
		html, _ := doc.Html()
		return strings.Contains(html, id)
	})
}

// A demotion committed after the socket's first check of the person but before its
// replay is replayed in id order with what it missed: the page is closed (1012) before
// anything after the demotion on a topic the new role may not follow reaches it. Two
// locks place the demotion there: the users table holds the first check back, the
// events table the replay.
func TestSocketReplaysADemotionBeforeWhatFollowsIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, nil)
	u := srv.CreateUser(t, "aud", auth.RoleAuditor, "aud-password-12345")
	c := srv.Login(t, "aud", "aud-password-12345")
	cursor := lastEventID(t, srv)
	conn, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/ws", wsHeader(srv, c))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	replay, err := srv.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = replay.Rollback(ctx) }()
	testkit.Exec(t, replay, `LOCK TABLE events IN ACCESS EXCLUSIVE MODE`)
	check, err := srv.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = check.Rollback(ctx) }()
	testkit.Exec(t, check, `LOCK TABLE users IN ACCESS EXCLUSIVE MODE`)
	if err := conn.WriteJSON(map[string]any{"subscribe": []string{audit.Topic}, "last_id": cursor}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitForLockWait(t, srv.Pool, "auth.CurrentRole.session")
	if err := check.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// The first check has read the role (still auditor) once no session runs it.
	testkit.WaitFor(t, 30*time.Second, func() bool {
		return testkit.Count(t, srv.Pool, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND state = 'active' AND query LIKE '%auth.CurrentRole.session%' AND pid <> pg_backend_pid()`) == 0
	}, "the socket's first check never ended")
	testkit.Exec(t, replay, `UPDATE users SET role = $2 WHERE id = $1`, u.ID, auth.RoleToolUser)
	if _, err := events.UserChanged.Publish(ctx, replay, auth.SessionsTopic, events.Session{UserID: u.ID, Username: u.Username, Reason: "account changed"}); err != nil {
		t.Fatal(err)
	}
	if _, err := audit.Append(ctx, replay, audit.Entry{Actor: audit.System, Action: "test.after_demotion", TargetType: "test", TargetID: "after"}); err != nil {
		t.Fatal(err)
	}
	if err := replay.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, msg, err := conn.ReadMessage()
	if !websocket.IsCloseError(err, 1012) {
		t.Fatalf("the demoted auditor's socket sent %q (%v), want close 1012 before any audit entry", msg, err)
	}
}
