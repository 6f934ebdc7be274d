package mcpclient

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
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

}

// At the transport: a request whose caller gives up before the headers arrive ends at
// once; one whose headers arrived may be read for drainGrace more, then ends too, even
// when the server never finishes it.
func TestGivingUpEndsTheRequest(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/headers" {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
		}
		select { // a server that never finishes
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	defer hs.Close()
	lim, _ := testLimit(1 << 20)
	hc := &http.Client{Transport: &capTransport{base: http.DefaultTransport.(*http.Transport).Clone(), lim: lim}}

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, hs.URL+"/slow", nil)
	if _, err := hc.Do(req); err == nil || time.Since(start) > 700*time.Millisecond {
		t.Fatalf("a request given up before its headers: err %v after %s", err, time.Since(start))
	}

	ctx, cancel = context.WithCancel(context.Background())
	req, _ = http.NewRequestWithContext(ctx, http.MethodPost, hs.URL+"/headers", nil)
	res, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	cancel()
	start = time.Now()
	_, err = io.ReadAll(res.Body)
	if took := time.Since(start); err == nil || took > drainGrace+time.Second {
		t.Fatalf("reading a stream given up after its headers: err %v after %s", err, took)
	} else if took < drainGrace/2 {
		t.Fatalf("the stream ended %s after its caller gave up: no grace to read the rest", took)
	}
}
