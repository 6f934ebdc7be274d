package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/template"
)

// pingFlooder is a hostile Streamable HTTP server: once initialized, it sends pings
// requests to Toolwarden on its stream, and holds every reply POST open until the
// client gives up on it. It answers Toolwarden's own requests at once.
type pingFlooder struct {
	pings int
	// arrived gets every reply POST as it arrives; ended its context's error once the
	// client gave up on it.
	arrived chan struct{}
	ended   chan error
	stream  chan []byte
}

func newPingFlooder(pings int) *pingFlooder {
	return &pingFlooder{pings: pings, arrived: make(chan struct{}, pings), ended: make(chan error, pings),
		stream: make(chan []byte, pings)}
}

func (f *pingFlooder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		for {
			select {
			case msg := <-f.stream:
				fmt.Fprintf(w, "event: message\ndata: %s\n\n", msg)
				w.(http.Flusher).Flush()
			case <-r.Context().Done():
				return
			}
		}
	case http.MethodDelete:
		return
	}
	body, _ := io.ReadAll(r.Body)
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	_ = json.Unmarshal(body, &msg)
	switch {
	case msg.Method == "" && msg.ID != nil: // a reply to one of our pings
		f.arrived <- struct{}{}
		<-r.Context().Done()
		f.ended <- r.Context().Err()
	case msg.ID == nil: // a notification
		if msg.Method == "notifications/initialized" {
			for i := 1; i <= f.pings; i++ {
				f.stream <- fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i)
			}
		}
		w.WriteHeader(http.StatusAccepted)
	default:
		result := `{}`
		if msg.Method == "initialize" {
			result = `{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"flooder","version":"1"}}`
			w.Header().Set("Mcp-Session-Id", "flood")
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, msg.ID, result)
	}
}

// connectFlooder opens a Toolwarden session (as newEndpoint and connect make it) to f,
// with the server's call timeout set to timeout. It returns the counter of the POSTs the
// session's HTTP transport has in flight.
func connectFlooder(t *testing.T, f *pingFlooder, timeout time.Duration) *postCounter {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	lim, _ := testLimit(1 << 20)
	ep, err := newEndpoint(registry.Connection{Name: "flooder", Type: registry.TypeStreamableHTTP, URL: srv.URL, Timeout: timeout},
		nil, nil, newLineBuffer(10, 100), lim, template.Options{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ct := ep.http.Transport.(*capTransport)
	count := &postCounter{base: ct.base}
	ct.base = count
	cs, cancel, err := connect(context.Background(), mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil), ep, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ep.endRequests() // the held replies end with the session
		_ = cs.Close()
		cancel()
		ep.cleanup()
	})
	return count
}

// postCounter counts the reply POSTs in flight through it, and the most at once; the
// session's own messages (a notification it sends meanwhile) are not replies.
type postCounter struct {
	base       http.RoundTripper
	mu         sync.Mutex
	open, peak int
}

func (c *postCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodPost || r.Body == nil {
		return c.base.RoundTrip(r)
	}
	body, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		return nil, err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var msg struct {
		Method string `json:"method"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.Method != "" {
		return c.base.RoundTrip(r)
	}
	c.mu.Lock()
	c.open++
	c.peak = max(c.peak, c.open)
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.open--
		c.mu.Unlock()
	}()
	return c.base.RoundTrip(r)
}

// A reply POST the server never answers is given up after the server's call timeout:
// the server sees its request end.
func TestReplyPOSTAbandoned(t *testing.T) {
	t.Parallel()
	f := newPingFlooder(1)
	connectFlooder(t, f, 200*time.Millisecond)
	<-f.arrived
	if err := <-f.ended; err == nil {
		t.Fatal("the reply POST ended without an error on the server's side")
	}
}

// However many requests the server sends, at most replyConns replies to them are in
// flight at once: the others wait until one is given up. Every reply still reaches the
// server.
func TestReplyPOSTsBounded(t *testing.T) {
	t.Parallel()
	const pings = 3 * replyConns
	f := newPingFlooder(pings)
	count := connectFlooder(t, f, 200*time.Millisecond)
	for range pings {
		<-f.arrived
	}
	count.mu.Lock()
	defer count.mu.Unlock()
	if count.peak > replyConns {
		t.Fatalf("%d reply POSTs were in flight at once, want at most %d", count.peak, replyConns)
	}
}
