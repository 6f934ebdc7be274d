package mcpclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/registry"
)

// A session that has listed nothing lists its tools before its first call; a server
// that never answers that list, or pages it on and on each page just within the
// server's timeout, has the call refused within twice the server's timeout, as a
// timeout (ErrTimeout), not as a context error the router would take for the session
// ending under the call.
func TestOnDemandListingTimesOut(t *testing.T) {
	t.Parallel()
	for name, page := range map[string]time.Duration{"mute": time.Hour, "slow-pager": 200 * time.Millisecond} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			opts := fast()
			opts.Debounce = time.Hour // no discovery lists the session's tools first
			e := start(t, opts)
			hs := mcptest.StartHTTP(t, &mcptest.Options{Name: name})
			release := make(chan struct{})
			t.Cleanup(func() { close(release) })
			hs.Server().MCP().AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
				return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
					if method != "tools/list" {
						return next(ctx, method, req)
					}
					select {
					case <-ctx.Done():
						return nil, ctx.Err()
					case <-release:
						return nil, errors.New("released")
					case <-time.After(page):
					}
					var cursor string
					if p, ok := req.GetParams().(*mcp.ListToolsParams); ok {
						cursor = p.Cursor
					}
					return &mcp.ListToolsResult{Tools: []*mcp.Tool{{Name: "t" + strconv.Itoa(len(cursor)), InputSchema: json.RawMessage(`{"type":"object"}`)}},
						NextCursor: cursor + "x"}, nil
				}
			})
			sv := e.create(t, registry.Spec{Name: name, Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true, TimeoutMS: 300})
			testkit.WaitFor(t, 10*time.Second, func() bool { return e.mgr.Snapshot(sv.ID).Status == registry.StatusConnected }, "never connected")

			// The caller's own deadline is far off: what ends the wait is the listing's bound.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			began := time.Now()
			_, err := e.mgr.CallToolServed(ctx, sv.ID, "", "echo", "any-hash", map[string]any{"message": "hi"}, nil, nil)
			took := time.Since(began)
			if !errors.Is(err, mcpclient.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				t.Fatalf("call on a session whose listing does not end: %v, want ErrTimeout and no context error", err)
			}
			if took > 20*time.Second {
				t.Fatalf("the call waited %s for a listing bounded by twice the server's 300 ms timeout", took)
			}
		})
	}
}
