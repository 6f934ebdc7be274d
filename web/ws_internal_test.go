package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/a-h/templ"

	"github.com/toolwarden/toolwarden/handlers"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/events"
)

// TestHubRendersApartFromTheRequest: the sockets' contexts carry templ's per-request
// state (securityHeaders sets the CSP nonce), and the renderings shared by all sockets
// run on goroutines of their own. Rendering several events at once for sockets of the
// same request context must not share that state (the race detector caught
// LiveCursor clearing templ's children while another event's rendering read them),
// and no fragment may carry the nonce of the request that happened to render it.
func TestHubRendersApartFromTheRequest(t *testing.T) {
	h := newHub(&handlers.Deps{}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := templ.WithNonce(context.Background(), "nonce-of-one-request")
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			id := int64(i + 1)
			payload, err := json.Marshal(events.AuditSummary{ID: id, At: time.Now(), ActorKind: "system",
				ActorName: "system", Action: "test.render", TargetType: "test", TargetID: strconv.Itoa(i), Result: "success"})
			if err != nil {
				t.Error(err)
				return
			}
			r, err := h.render(ctx, events.Event{ID: id, Topic: audit.Topic, Kind: string(events.AuditAppended), Payload: payload})
			if err != nil {
				t.Errorf("render event %d: %v", id, err)
				return
			}
			if strings.Contains(string(r.raw), "nonce-of-one-request") {
				t.Errorf("event %d's fragment carries the nonce of the request that rendered it: %s", id, r.raw)
			}
		})
	}
	wg.Wait()
	if n := h.renders.Load(); n != 16 {
		t.Fatalf("%d renderings for 16 events", n)
	}
	nonce, err := h.once(ctx, "nonce", func(ctx context.Context) (any, error) { return templ.GetNonce(ctx), nil })
	if err != nil || nonce != "" {
		t.Fatalf("a shared rendering sees the nonce %q of the request that started it (%v)", nonce, err)
	}
}

// Every socket asking for a rendering while it runs waits for that one rendering and gets
// its result; a rendering that panics fails all of them, not the process; a waiter whose
// socket went away stops waiting.
func TestHubRendersOnceForAllWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHub(&handlers.Deps{}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
		release := make(chan struct{})
		var renders atomic.Int32
		var runs sync.WaitGroup
		for range 50 {
			runs.Go(func() {
				v, err := h.once(context.Background(), "k", func(context.Context) (any, error) {
					renders.Add(1)
					<-release
					return "fragment", nil
				})
				if err != nil || v != "fragment" {
					t.Errorf("got %v %v, want the one rendering's fragment", v, err)
				}
			})
		}
		synctest.Wait() // all 50 wait: one in the rendering, the others for it
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := h.once(ctx, "k", func(context.Context) (any, error) { return nil, nil }); err == nil {
			t.Error("a waiter whose socket went away got a result before the rendering ended")
		}
		close(release)
		runs.Wait()
		if n := renders.Load(); n != 1 {
			t.Errorf("%d renderings for 50 waiters at once, want 1", n)
		}
		if _, err := h.once(context.Background(), "p", func(context.Context) (any, error) { panic("view broke") }); err == nil ||
			!strings.Contains(err.Error(), "rendering failed: view broke") {
			t.Errorf("a panicking rendering: %v", err)
		}
	})
}

// A socket that has gone starts no rendering: the replay of a client that left stops
// there, instead of starting a query-backed render for every event it had left.
func TestHubRendersNothingForAGoneSocket(t *testing.T) {
	h := newHub(&handlers.Deps{}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var ran atomic.Bool
	if _, err := h.once(ctx, "k", func(context.Context) (any, error) { ran.Store(true); return nil, nil }); err == nil {
		t.Fatal("a render for a gone socket answered")
	}
	payload, _ := json.Marshal(events.AuditSummary{ID: 1, At: time.Now(), ActorKind: "system", ActorName: "system", Action: "test.render", Result: "success"})
	if _, err := h.render(ctx, events.Event{ID: 1, Topic: audit.Topic, Kind: string(events.AuditAppended), Payload: payload}); err == nil {
		t.Fatal("an event rendered for a gone socket")
	}
	time.Sleep(50 * time.Millisecond)
	if ran.Load() || h.renders.Load() != 0 {
		t.Fatalf("renderings started for a gone socket (%d)", h.renders.Load())
	}
}

// An event that fails to render for a moment (the database did not answer) closes the
// socket to try again, so the page reconnects and replays it from its cursor, instead of
// skipping it for good; one that still fails after renderRetryFor is skipped, and one
// whose payload cannot be read is skipped at once.
func TestHubRetriesAFailedRender(t *testing.T) {
	h := newHub(&handlers.Deps{}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if !h.retryRender(7, errors.New("timeout: the pool had no connection")) {
		t.Fatal("a render that failed for a moment is not retried")
	}
	if !h.retryRender(7, errors.New("timeout again")) {
		t.Fatal("a second failure within the window is not retried")
	}
	h.failMu.Lock()
	h.failedAt[7] = time.Now().Add(-renderRetryFor - time.Second)
	h.failMu.Unlock()
	if h.retryRender(7, errors.New("still failing")) {
		t.Fatal("an event failing past the window is retried for ever")
	}
	var bad map[string]any
	if err := json.Unmarshal([]byte(`{"x":`), &bad); h.retryRender(8, fmt.Errorf("events: decode: %w", err)) {
		t.Fatal("an event whose payload cannot be read is retried")
	}
}
