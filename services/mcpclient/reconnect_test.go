package mcpclient_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/registry"
)

// slowGoodbye is a streamable HTTP server that, once slow is set, holds each session's
// DELETE (the SDK's Close) for a second, as a stuck server holds its stop; deleting
// counts the DELETEs held, and overlap is set when a session is initialized meanwhile.
func slowGoodbye(t *testing.T, name string) (url string, slow, overlap *atomic.Bool, deleting chan struct{}) {
	t.Helper()
	slow, overlap = &atomic.Bool{}, &atomic.Bool{}
	deleting = make(chan struct{}, 16)
	var held atomic.Int32
	url = interposed(t, &mcptest.Options{Name: name}, func(_ http.ResponseWriter, r *http.Request, method string, _ json.RawMessage, _ []byte) bool {
		if method == "initialize" && held.Load() > 0 {
			overlap.Store(true)
		}
		if r.Method == http.MethodDelete && slow.Load() {
			held.Add(1)
			deleting <- struct{}{}
			time.Sleep(time.Second)
			held.Add(-1)
		}
		return false
	})
	return url, slow, overlap, deleting
}

// A Reconnect asked by a request that ends before the old session has stopped still
// opens the new one; one asked by a request already gone leaves the session alone.
func TestReconnectOutlivesItsRequest(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	u, slow, _, _ := slowGoodbye(t, "slowbye")
	sv := e.create(t, registry.Spec{Name: "slowbye", Type: registry.TypeStreamableHTTP, URL: u, Enabled: true})
	testkit.WaitFor(t, 30*time.Second, func() bool { _, err := e.mgr.Session(sv.ID); return err == nil }, "never connected")
	before, _ := e.mgr.Session(sv.ID)

	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.mgr.Reconnect(gone, sv.ID); err == nil {
		t.Fatal("Reconnect for a request already gone succeeded")
	}
	if cs, err := e.mgr.Session(sv.ID); err != nil || cs != before {
		t.Fatalf("after a Reconnect for a request already gone: session %p (%v), want the one before, %p", cs, err, before)
	}

	slow.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := e.mgr.Reconnect(ctx, sv.ID); err != nil {
		t.Fatal(err)
	}
	if ctx.Err() == nil {
		t.Fatal("the request outlived the old session's stop (the test no longer checks what it says)")
	}
	testkit.WaitFor(t, 30*time.Second, func() bool { cs, err := e.mgr.Session(sv.ID); return err == nil && cs != before },
		"no new session after a Reconnect whose request ended while the old one stopped")
}

// A Refresh (an edit's event, say) while Reconnect stops the old session waits for it:
// otherwise it starts a second copy of the server while the first is still stopping.
func TestReconnectHoldsRefresh(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	u, slow, overlap, deleting := slowGoodbye(t, "one-at-a-time")
	sv := e.create(t, registry.Spec{Name: "one-at-a-time", Type: registry.TypeStreamableHTTP, URL: u, Enabled: true})
	testkit.WaitFor(t, 30*time.Second, func() bool { _, err := e.mgr.Session(sv.ID); return err == nil }, "never connected")
	slow.Store(true)
	done := make(chan error, 1)
	go func() { done <- e.mgr.Reconnect(context.Background(), sv.ID) }()
	select {
	case <-deleting:
	case <-time.After(30 * time.Second):
		t.Fatal("the old session was never closed")
	}
	e.mgr.Refresh(context.Background(), sv.ID)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 30*time.Second, func() bool { _, err := e.mgr.Session(sv.ID); return err == nil }, "never connected again")
	if overlap.Load() {
		t.Fatal("a session was opened while Reconnect was still closing the old one")
	}
}
