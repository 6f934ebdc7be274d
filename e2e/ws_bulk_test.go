package e2e

import (
	"errors"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/tools"
)

// TestWebsocketTakesABulkActionsEvents: a bulk action publishes an event per tool in one
// commit (200 at most); a page following the tools topic takes them all without being
// dropped for falling behind (1013, then a replay of all of them), as it was with a
// socket queue of 64.
func TestWebsocketTakesABulkActionsEvents(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	srv := webtest.Start(t, nil)
	up := mcptest.StartHTTP(t, &mcptest.Options{Name: "many", Generated: tools.MaxLimit})
	srv.RegisterServer(t, registry.Spec{Name: "many", Type: registry.TypeStreamableHTTP, URL: up.URL(), Enabled: true, Trusted: true})
	var ids []string
	testkit.WaitFor(t, 30*time.Second, func() bool {
		rows, err := srv.Pool.Query(ctx, `SELECT t.id::text FROM mcp_tools t JOIN mcp_servers s ON s.id = t.server_id
			WHERE s.name = 'many' AND t.name LIKE 'gen-%' ORDER BY t.name`)
		if err != nil {
			t.Fatal(err)
		}
		ids = ids[:0]
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		rows.Close()
		return len(ids) == tools.MaxLimit
	}, "the generated tools were not discovered")
	h := sessionHeader(t, srv, "admin", webtest.AdminPassword, srv.URL)
	start := maxEventID(t, srv)
	conn := subscribe(t, srv, h, []string{tools.Topic}, start)
	if _, err := srv.Tools.Tag(ctx, audit.System, ids, []string{"bulk"}, false); err != nil {
		t.Fatal(err)
	}
	want := eventIDs(t, srv, start, tools.Topic)
	if len(want) < tools.MaxLimit {
		t.Fatalf("the bulk tag published %d events on the tools topic, want one per tool", len(want))
	}
	last := want[len(want)-1]
	for got := int64(0); got < last; {
		cursors, _ := readMessageCursors(t, conn)
		for _, id := range cursors {
			got = max(got, id)
		}
	}
	var ce *websocket.CloseError
	_ = conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if _, _, err := conn.ReadMessage(); errors.As(err, &ce) {
		t.Fatalf("after the bulk action's events the socket closed: %v", err)
	}
}
