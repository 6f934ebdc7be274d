package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/registry"
)

// TestBrowserWebsocketBacksOff: a server that accepts the page's socket and closes it
// at once with 1013 (here: an event it cannot render, which it retries for 30 s) is
// not asked again every second. The ws extension starts its count of tries afresh at
// every open socket, so each page reconnected within a second, forever; the page backs
// off while its sockets keep closing soon after they opened.
func TestBrowserWebsocketBacksOff(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("open the servers", chromedp.Navigate(srv.URL+"/servers"), chromedp.WaitReady("main"))
	b.waitJS(`#live-status is open`, `document.querySelector("#live-status")?.dataset.state === "open"`)
	b.do("count the handshakes", chromedp.Evaluate[chromedp.Void](`
		window.__twConnecting = [];
		window.__twClosed = [];
		document.addEventListener("htmx:wsConnecting", function () { window.__twConnecting.push(Date.now()); });
		document.addEventListener("htmx:wsClose", function (e) { window.__twClosed.push({ at: Date.now(), code: e.detail.event.code }); });`))

	// A server event whose server cannot be read: every socket that follows the topic
	// is closed with 1013 to replay it, and every replay fails the same way.
	ctx := context.Background()
	if _, err := srv.Owner.Exec(ctx, `ALTER TABLE mcp_servers RENAME TO mcp_servers_away`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = srv.Owner.Exec(ctx, `ALTER TABLE mcp_servers_away RENAME TO mcp_servers`) })
	if err := db.WithTx(ctx, srv.Pool, func(tx pgx.Tx) error {
		_, err := events.ServerChanged.Publish(ctx, tx, registry.ServersTopic, events.ServerStatus{ID: uuid.NewString(), Name: "gone"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	b.waitJS("the socket closed with 1013", `window.__twClosed.some(c => c.code === 1013)`)

	// An observation window, not a deadline: how many times the page asked in it.
	const watch = 10 * time.Second
	time.Sleep(watch)
	n := eval[int](b, `(function () {
		var first = window.__twClosed.find(c => c.code === 1013).at;
		return window.__twConnecting.filter(at => at >= first && at < first + `+itoa(int(watch/time.Millisecond))+`).length;
	})()`)
	closes := eval[string](b, `JSON.stringify(window.__twClosed.map(c => c.code))`)
	if n > 6 {
		t.Fatalf("the page opened %d sockets in the %v after the server first closed one with 1013 (closes %s); want it to back off (at most 6)",
			n, watch, closes)
	}
	if n == 0 {
		t.Fatalf("the page did not reconnect at all in the %v after the close (closes %s)", watch, closes)
	}
	t.Logf("%d handshakes in %v; closes %s", n, watch, closes)
}
