package mcpclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/registry"
)

// TestOversizedCallKeepsSession: a server behind a body-size limit (express.json(),
// nginx) answers a large call 413 with an HTML page. That call fails, saying so, and
// the shared session goes on: the next call succeeds on it, with no new initialize.
func TestOversizedCallKeepsSession(t *testing.T) {
	t.Parallel()
	for _, typ := range []string{registry.TypeStreamableHTTP, registry.TypeSSE} {
		t.Run(typ, func(t *testing.T) {
			t.Parallel()
			var inits atomic.Int32
			u := interposed(t, &mcptest.Options{Name: "limited"}, func(w http.ResponseWriter, r *http.Request, method string, _ json.RawMessage, body []byte) bool {
				if method == "initialize" {
					inits.Add(1)
				}
				if r.Method == http.MethodPost && len(body) > 64<<10 {
					w.Header().Set("Content-Type", "text/html; charset=utf-8")
					w.WriteHeader(http.StatusRequestEntityTooLarge)
					_, _ = w.Write([]byte("<html><body><h1>413 Request Entity Too Large</h1></body></html>"))
					return true
				}
				return false
			})
			if typ == registry.TypeSSE {
				u = strings.TrimSuffix(u, "/mcp") + "/sse"
			}
			e := start(t, nil)
			sv := e.create(t, registry.Spec{Name: "limited", Type: typ, URL: u, Enabled: true})
			e.waitStatus(t, sv.ID, registry.StatusConnected)
			before, err := e.mgr.Session(sv.ID)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			_, err = e.mgr.CallTool(ctx, sv.ID, "echo", map[string]any{"message": strings.Repeat("x", 200<<10)}, nil)
			if err == nil || !strings.Contains(err.Error(), "Request Entity Too Large") {
				t.Fatalf("large call: got %v, want it refused as Request Entity Too Large", err)
			}
			if !errors.Is(err, mcp.ErrRequestRefused) || !strings.Contains(err.Error(), "HTTP 413") {
				t.Errorf("large call: got %v, want it marked mcp.ErrRequestRefused with HTTP 413", err)
			}
			res, err := e.mgr.CallTool(ctx, sv.ID, "echo", map[string]any{"message": "small"}, nil)
			if err != nil {
				t.Fatalf("small call after the large one: %v", err)
			}
			if got := res.Content[0].(*mcp.TextContent).Text; got != "Echo: small" {
				t.Fatalf("small call: got %q", got)
			}
			after, err := e.mgr.Session(sv.ID)
			if err != nil || after != before {
				t.Fatalf("session after the large call: got %p (%v), want the same %p", after, err, before)
			}
			if n := inits.Load(); n != 1 {
				t.Fatalf("initialize requests: got %d, want 1 (no reconnect)", n)
			}
			if got := e.server(t, sv.ID).Status; got != registry.StatusConnected {
				t.Fatalf("status: got %s, want connected", got)
			}
		})
	}
}
