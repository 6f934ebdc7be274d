package gateway_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/secrets"
)

// A read answered by a session that a key rotation is replacing has the key that session
// sends masked: the masker was looked up once the read returned, when the server had no
// session for a moment (the old one being stopped, it waits for the read) and so none.
func TestReadMaskedWhileItsSessionIsReplaced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, nil)
	const oldKey, newKey = "old-key-4f9d2a7c1e55", "new-key-8b3e6d0f5a77"
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "rot"})
	var hold atomic.Bool
	entered, release := make(chan struct{}, 1), make(chan struct{})
	// test://key answers with the key its session sends; when hold is set, the first
	// read waits until released.
	hs.Server().MCP().AddResource(&mcp.Resource{URI: "test://key", Name: "key"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			if hold.CompareAndSwap(true, false) {
				entered <- struct{}{}
				<-release
			}
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://key",
				Text: "key=" + req.Extra.Header.Get("X-Api-Key")}}}, nil
		})
	sv := srv.App.RegisterServer(t, registry.Spec{Name: "rot", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true,
		Trusted: true, Headers: map[string]string{"X-Api-Key": oldKey}}, "echo")
	cs := mustConnect(t, srv, srv.Token(t, "admin"), eras[0])

	if text, _ := readText(t, cs, "toolwarden://rot/test://key"); text != "key="+secrets.Masked {
		t.Fatalf("read before the rotation: %q, want the key masked", text)
	}

	hold.Store(true)
	type outcome struct {
		res *mcp.ReadResourceResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "toolwarden://rot/test://key"})
		done <- outcome{res, err}
	}()
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the read never reached the server")
	}
	nk := newKey
	if _, err := srv.Registry.UpdateServer(ctx, audit.System, sv.ID, registry.Patch{Headers: map[string]*string{"X-Api-Key": &nk}}); err != nil {
		t.Fatal(err)
	}
	refreshed := make(chan struct{})
	go func() { srv.MCP.Refresh(ctx, sv.ID); close(refreshed) }()
	// The old session is out of the manager while it is stopped, which waits for the read.
	testkit.WaitFor(t, 10*time.Second, func() bool { return srv.MCP.Masker(sv.ID) == nil },
		"the server's session was never being replaced")
	close(release)
	var out outcome
	select {
	case out = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the read never returned")
	}
	<-refreshed
	if out.err != nil {
		t.Fatalf("read across the rotation: %v", out.err)
	}
	if len(out.res.Contents) != 1 {
		t.Fatalf("read across the rotation: %d contents, want 1", len(out.res.Contents))
	}
	if text := out.res.Contents[0].Text; strings.Contains(text, oldKey) || text != "key="+secrets.Masked {
		t.Fatalf("read answered by the old session: %q, want its key masked", text)
	}
}
