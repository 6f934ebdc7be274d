package mcpclient

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/template"
)

// Closing a session returns even when the SDK's Close waits for something the server
// never finishes (here a call with no deadline the server never answers): after closeGrace the endpoint is
// cleaned up, which ends it.
func TestSessionCloseEndsWhatItWaitsFor(t *testing.T) {
	t.Parallel()
	called := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal(body, &msg)
		w.Header().Set("Content-Type", "application/json")
		switch msg.Method {
		case "initialize":
			w.Header().Set("Mcp-Session-Id", "s")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"slow","version":"1"}}}`, msg.ID)
		case "server/discover":
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`, msg.ID)
		case "tools/call": // never answered
			called <- struct{}{}
			<-r.Context().Done()
		default:
			if msg.ID == nil {
				w.WriteHeader(http.StatusAccepted)
				return
			}
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{}}`, msg.ID)
		}
	}))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	lim, _ := testLimit(1 << 20)
	ep, err := newEndpoint(registry.Connection{Name: "slow", Type: registry.TypeStreamableHTTP, URL: srv.URL, Timeout: time.Hour},
		nil, nil, newLineBuffer(10, 100), lim, template.Options{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, cancel, err := connect(context.Background(), mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil), ep, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	s := &session{cs: cs, ep: ep, cancel: cancel}
	go func() {
		_, _ = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "wait"})
	}()
	<-called
	done := make(chan struct{})
	go func() { s.close(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		ep.cleanup()
		t.Fatal("closing the session did not return")
	}
}
