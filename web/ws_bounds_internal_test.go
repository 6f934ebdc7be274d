package web

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"testing/synctest"

	"github.com/toolwarden/toolwarden/handlers"
	"github.com/toolwarden/toolwarden/services/auth"
)

// The cache of rendered fragments is bounded by their bytes as well as by their
// number: 512 fragments of an execution's page were gigabytes.
func TestHubCacheBoundedByBytes(t *testing.T) {
	h := newHub(&handlers.Deps{}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	const each = 8 << 20
	for id := range int64(40) {
		r, err := cached(context.Background(), h, h.cache, &h.order, eventKey{id: id}, "e", wsRenderCache, h.renderLimit(),
			func(context.Context) (rendered, error) { return rendered{raw: make([]byte, each)}, nil })
		if err != nil || len(r.raw) != each {
			t.Fatalf("render %d: %d bytes, %v", id, len(r.raw), err)
		}
	}
	total := 0
	for _, r := range h.cache {
		total += len(r.raw)
	}
	if total > wsRenderCacheBytes || h.cacheBytes != 3*total {
		t.Fatalf("the cache keeps %d fragments of %d MiB in all (counted %d MiB), over %d MiB", len(h.cache), total>>20,
			h.cacheBytes>>20, wsRenderCacheBytes>>20)
	}
	if _, ok := h.cache[eventKey{id: 39}]; !ok || len(h.cache) != len(h.order) {
		t.Fatalf("the newest fragment is not kept, or the cache's order is off (%d kept, %d listed)", len(h.cache), len(h.order))
	}
}

// One person replays one socket's missed events at a time: a second replay of theirs
// waits for the first and, past wsReplayWait, gets the busy answer, while another
// person's replay proceeds (the process's four slots were anyone's to keep busy).
func TestHubOneReplayPerPerson(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHub(&handlers.Deps{}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
		ctx := context.Background()
		ann := &auth.Principal{User: auth.User{ID: "ann"}}
		bob := &auth.Principal{User: auth.User{ID: "bob"}}
		release, err := h.acquireReplay(ctx, ann)
		if err != nil {
			t.Fatalf("ann's first replay: %v", err)
		}
		second := make(chan error, 1)
		go func() {
			rel, err := h.acquireReplay(ctx, ann)
			if err == nil {
				rel()
			}
			second <- err
		}()
		synctest.Wait()
		select {
		case err := <-second:
			t.Fatalf("ann's second replay did not wait for her first: %v", err)
		default:
		}
		relBob, err := h.acquireReplay(ctx, bob)
		if err != nil {
			t.Fatalf("bob's replay while ann's runs: %v", err)
		}
		relBob()
		if err := <-second; !errors.Is(err, errReplayBusy) {
			t.Fatalf("ann's second replay while her first runs: %v, want busy", err)
		}
		release()
		rel, err := h.acquireReplay(ctx, ann)
		if err != nil {
			t.Fatalf("ann's replay after her first ended: %v", err)
		}
		rel()
		h.replayMu.Lock()
		defer h.replayMu.Unlock()
		if len(h.replayers) != 0 || len(h.replays) != 0 {
			t.Fatalf("slots left taken: %d people, %d of the process's", len(h.replayers), len(h.replays))
		}
	})
}
