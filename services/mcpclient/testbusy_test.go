package mcpclient_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/registry"
)

// Connection tests beyond Options.MaxTests wait for one to end, then fail as busy: one
// person must not start hundreds of server processes at once.
func TestConnectionTestsBounded(t *testing.T) {
	t.Parallel()
	const limit = 2
	arrived := make(chan struct{}, 16)
	hold := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select { // never answers
		case <-hold:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(hold) })
	mgr := mcpclient.New(nil, &mcpclient.Options{MaxTests: limit, TestTimeout: time.Minute})
	cfg := registry.Connection{Name: "hangs", Type: registry.TypeStreamableHTTP, URL: srv.URL + "/mcp", Timeout: time.Minute}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range limit {
		wg.Add(1)
		go func() { defer wg.Done(); mgr.Test(ctx, cfg) }()
	}
	for range limit {
		<-arrived // that test holds its slot: the server has its request
	}
	// The extra test is cancelled should it reach the server, which it must not.
	extra, reached := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		select {
		case <-arrived:
			reached()
		case <-done:
		}
	}()
	res := mgr.Test(extra, cfg)
	close(done)
	cancel()
	wg.Wait()
	if extra.Err() != nil {
		t.Fatalf("test %d of %d at once reached the server (result %q): Options.MaxTests is not enforced", limit+1, limit, res.Error)
	}
	reached()
	if res.OK || !res.Busy || !strings.Contains(res.Error, "too many connection tests are running at once") {
		t.Fatalf("test %d of %d at once: got ok=%v busy=%v error %q, want the busy error", limit+1, limit, res.OK, res.Busy, res.Error)
	}
}
