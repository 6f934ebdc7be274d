package router_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/secrets"
)

// A call whose server's API key is rotated while it runs, and which then runs again on
// the new session, has the new key masked in its result: its masks used to be those of
// the session when the call began (the old key only, or none while the session was
// being replaced), and the new key echoed by the server went out as it came.
func TestCallMaskedWithTheSessionItRanOn(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	const oldKey, newKey = "old-key-4f9d2a7c1e55", "new-key-8b3e6d0f5a77"
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "rot"})
	var hold atomic.Bool
	entered, release := make(chan struct{}, 1), make(chan struct{})
	// echo {"message":"key"} answers with the key its session sends; when hold is set,
	// the first such call waits until released (or its session ends), then fails.
	hs.Server().MCP().AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			p, ok := req.GetParams().(*mcp.CallToolParamsRaw)
			if method != "tools/call" || !ok || p.Name != "echo" || !bytes.Contains(p.Arguments, []byte(`"key"`)) {
				return next(ctx, method, req)
			}
			if hold.CompareAndSwap(true, false) {
				entered <- struct{}{}
				select {
				case <-release:
				case <-ctx.Done():
				}
				return nil, errors.New("the first attempt ended")
			}
			key := req.GetExtra().Header.Get("X-Api-Key")
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "key=" + key}}}, nil
		}
	})
	sv := e.register(registry.Spec{Name: "rot", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true,
		Trusted: true, Headers: map[string]string{"X-Api-Key": oldKey}}, "echo")

	res, err := e.call("rot__echo", `{"message":"key"}`)
	if err != nil || router.TextOf(res.Content) != "key="+secrets.Masked {
		t.Fatalf("call before the rotation: %v %v, want the old key masked", res, err)
	}

	hold.Store(true)
	type outcome struct {
		res *router.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := e.call("rot__echo", `{"message":"key"}`)
		done <- outcome{res, err}
	}()
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the call never reached the server")
	}
	nk := newKey
	if _, err := e.reg.UpdateServer(e.ctx, audit.System, sv.ID, registry.Patch{Headers: map[string]*string{"X-Api-Key": &nk}}); err != nil {
		t.Fatal(err)
	}
	// The old session is stopped and the new one started: the call's first attempt fails,
	// and it is retried (echo is read-only, its server trusted) on the new session.
	e.mgr.Refresh(e.ctx, sv.ID)
	close(release)
	var out outcome
	select {
	case out = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the call never returned")
	}
	if out.err != nil {
		t.Fatalf("call across the rotation: %v", out.err)
	}
	text := router.TextOf(out.res.Content)
	if strings.Contains(text, newKey) || text != "key="+secrets.Masked {
		t.Fatalf("call that ran on the new session (%d attempts) answered %q, want the new key masked", out.res.Attempts, text)
	}
	if out.res.Attempts < 2 {
		t.Fatalf("the call took %d attempts, want it retried on the new session", out.res.Attempts)
	}
}
