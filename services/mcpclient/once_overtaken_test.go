package mcpclient_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/registry"
)

// An import's discovery (DiscoverOnce) that began before the manager's own session
// listed the server, and stores after it, is dropped for the newer list: the tools are
// discovered, so the import is told so, not that the server could not be discovered,
// and no failed run is recorded. A session's discovery begun later is what is stored.
func TestDiscoverOnceOvertakenIsNoError(t *testing.T) {
	t.Parallel()
	e, sv, armed, blocked, release := heldListing(t, "overtaken")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	armed.Store(true)
	once := make(chan error, 1)
	go func() {
		_, err := e.mgr.DiscoverOnce(ctx, sv.ID, "import", audit.System)
		once <- err
	}()
	<-blocked // the import's listing has begun, and waits
	if _, err := e.mgr.Discover(ctx, sv.ID, audit.System); err != nil {
		t.Fatalf("the session's discovery: %v", err)
	}
	close(release)
	if err := <-once; err != nil {
		t.Fatalf("DiscoverOnce overtaken by a newer listing: %v, want no error (the tools are discovered)", err)
	}
	runs := e.runs(t, sv.ID)
	if len(runs) != 1 || runs[0].Status != "succeeded" || runs[0].Trigger != "manual" {
		t.Fatalf("runs: %+v, want the session's one succeeded run only", runs)
	}
}

// A person's Discover whose listing another session overtook (an import's, or another
// replica's, begun later and stored first) is answered with what is stored, not as a
// failure: the server's tools are discovered.
func TestManualDiscoverOvertakenIsNoError(t *testing.T) {
	t.Parallel()
	e, sv, armed, blocked, release := heldListing(t, "overtaken-manual")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	armed.Store(true)
	type answer struct {
		res registry.DiscoveryResult
		err error
	}
	manual := make(chan answer, 1)
	go func() {
		res, err := e.mgr.Discover(ctx, sv.ID, audit.System)
		manual <- answer{res, err}
	}()
	<-blocked // the person's listing has begun, and waits
	stored, err := e.mgr.DiscoverOnce(ctx, sv.ID, "import", audit.System)
	if err != nil || stored.Total == 0 {
		t.Fatalf("the import's discovery: %+v %v", stored, err)
	}
	close(release)
	got := <-manual
	if got.err != nil || got.res.RunID != stored.RunID || got.res.Total != stored.Total {
		t.Fatalf("Discover overtaken by a newer listing: %+v %v, want no error and the stored run %d with %d tools", got.res, got.err, stored.RunID, stored.Total)
	}
}

// heldListing starts a manager whose session lists only when asked, and a connected
// server named name whose next tools/list, once armed is set, says so on blocked and
// waits for release.
func heldListing(t *testing.T, name string) (e *env, sv registry.Server, armed *atomic.Bool, blocked, release chan struct{}) {
	t.Helper()
	opts := fast()
	opts.Debounce = time.Hour // the session lists only when asked
	e = start(t, opts)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: name})
	armed = new(atomic.Bool)
	blocked, release = make(chan struct{}), make(chan struct{})
	hs.Server().MCP().AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" && armed.CompareAndSwap(true, false) {
				close(blocked)
				select {
				case <-release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return next(ctx, method, req)
		}
	})
	sv = e.create(t, registry.Spec{Name: name, Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true})
	testkit.WaitFor(t, 10*time.Second, func() bool { return e.mgr.Snapshot(sv.ID).Status == registry.StatusConnected }, "never connected")
	return e, sv, armed, blocked, release
}
