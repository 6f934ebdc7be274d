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
	if _, err := srv.Pool.Exec(ctx, `ALTER TABLE mcp_tools RENAME TO mcp_tools_away`); err != nil {
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
	if _, err := srv.Pool.Exec(ctx, `ALTER TABLE mcp_tools_away RENAME TO mcp_tools`); err != nil {
		t.Fatal(err)
	}
	again := wsDial(t, srv, admin, []string{tools.Topic}, latest)
	wsUntil(t, again, "the tool's row after the reconnect", func(doc *goquery.Document) bool {
		html, _ := doc.Html()
		return strings.Contains(html, id)
	})
}
