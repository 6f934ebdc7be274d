package gateway_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/auth"
)

// A 2026-07-28 client's subscriptions/listen stream hears each list_changed once, as its
// subscription's (the notification names it), and as many as a 2025-11-25 session of
// the same person: the SDK keeps sessions without initialize parameters (as stateless
// ones are) among those it tells on their own channel, which could have told the
// listen twice.
func TestListChangedOncePerChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, nil)
	srv.LiveServer(t, "mt", true, "echo")
	srv.CreateUser(t, "alice", auth.RoleToolUser, password)
	token := srv.Token(t, "alice")
	var mu sync.Mutex
	heard := map[string][]mcp.Meta{}
	for _, v := range []string{"2026-07-28", "2025-11-25"} {
		tr := &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: &http.Client{Transport: bearer{token}}}
		c := mcp.NewClient(&mcp.Implementation{Name: "once-" + v, Version: "1"}, &mcp.ClientOptions{
			ToolListChangedHandler: func(_ context.Context, r *mcp.ToolListChangedRequest) {
				mu.Lock()
				defer mu.Unlock()
				var m mcp.Meta
				if r.Params != nil {
					m = r.Params.Meta
				}
				heard[v] = append(heard[v], m)
			}})
		cs, err := c.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: v})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
	}
	time.Sleep(500 * time.Millisecond) // the listen is open
	srv.App.Enable(t, "mt__add")
	testkit.WaitFor(t, 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(heard["2025-11-25"]) > 0 && len(heard["2026-07-28"]) > 0
	}, "a client heard no list_changed")
	time.Sleep(2 * time.Second) // what follows the change has come by now
	mu.Lock()
	defer mu.Unlock()
	if n, o := len(heard["2026-07-28"]), len(heard["2025-11-25"]); n != o {
		t.Errorf("a 2026-07-28 listen heard %d list_changed, a 2025-11-25 session %d; want as many", n, o)
	}
	for i, m := range heard["2026-07-28"] {
		if m["io.modelcontextprotocol/subscriptionId"] == nil {
			t.Errorf("list_changed %d on the listen names no subscription: %v", i+1, m)
		}
	}
}
