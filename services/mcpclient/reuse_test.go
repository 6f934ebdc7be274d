package mcpclient

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/mcptest"
)

// A call whose context ends as soon as it returns (as every call through the router
// does) leaves its connection to a streamable HTTP server for the next call: the SDK
// drains the rest of the result's stream after handing over the result, and ending the
// context must not cut that short. A caller that gives up before the answer still ends
// the request at once.
func TestConnectionsOutliveTheirCalls(t *testing.T) {
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "reuse"})
	var dials atomic.Int64
	base := &http.Transport{MaxIdleConnsPerHost: 128, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	lim, _ := testLimit(1 << 20)
	hc := &http.Client{Transport: &capTransport{base: base, lim: lim}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "reuse", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: hs.URL(), HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	before := dials.Load()
	const calls = 300
	for range calls {
		ctx, cancel := context.WithCancel(context.Background())
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hi"}})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := dials.Load() - before; n > 3 {
		t.Errorf("%d calls dialed %d new connections; a connection should carry call after call", calls, n)
	}

	// Giving up while the server has not answered ends the call without waiting.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "sleep", Arguments: map[string]any{"ms": 1500}})
	if err == nil || time.Since(start) > 2*time.Second {
		t.Fatalf("a call given up after 200 ms: err %v after %s", err, time.Since(start))
	}
}
