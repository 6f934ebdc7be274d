package mcptest

import (
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// HTTPServer is a test server listening on a loopback port, serving both
// streamable HTTP and legacy SSE. It can die (Stop) and come back on the same
// port (Restart), so reconnection logic can be tested against a stable URL.
type HTTPServer struct {
	t    testing.TB
	srv  *Server
	addr string // host:port, fixed at the first listen so Restart reuses it

	mu      sync.Mutex
	hs      *http.Server
	served  chan struct{} // closed when the current Serve returns
	stopped bool
}

// StartHTTP starts a server for opts on 127.0.0.1 with a free port and stops
// it when the test ends.
func StartHTTP(t testing.TB, opts *Options) *HTTPServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("mcptest: listen: %v", err)
	}
	h := &HTTPServer{t: t, srv: New(opts), addr: ln.Addr().String()}
	h.serve(ln)
	t.Cleanup(h.Stop)
	return h
}

func (h *HTTPServer) serve(ln net.Listener) {
	// A fresh handler per start drops the old session table, as a real
	// restart would: clients holding an old session ID get 404.
	hs := &http.Server{Handler: h.srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = hs.Serve(ln) // always ErrServerClosed after Stop
	}()
	h.hs, h.served, h.stopped = hs, served, false
}

// URL is the streamable HTTP endpoint, http://127.0.0.1:<port>/mcp.
func (h *HTTPServer) URL() string { return "http://" + h.addr + "/mcp" }

// SSEURL is the legacy SSE endpoint, http://127.0.0.1:<port>/sse.
func (h *HTTPServer) SSEURL() string { return "http://" + h.addr + "/sse" }

// Server is the MCP server behind the listener; it survives Stop and Restart,
// so tools changed before a restart are still there after it.
func (h *HTTPServer) Server() *Server { return h.srv }

// Stop makes the server die: it closes the listener and every open
// connection at once, long-lived SSE and GET streams included, and closes
// the server-side sessions so no notification is queued for a dead client.
// Stopping a stopped server does nothing.
func (h *HTTPServer) Stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return
	}
	h.stopped = true
	// Close, not Shutdown: Shutdown waits for streams to go idle, which SSE
	// streams never do, and a crash does not wait either.
	_ = h.hs.Close()
	<-h.served
	for ss := range h.srv.mcp.Sessions() {
		_ = ss.Close()
	}
}

// Restart stops the server if it is running and serves again on the same
// port, retrying for a few seconds if the port is momentarily busy. It fails
// the test if the port cannot be had, so it must be called from the test's
// goroutine.
func (h *HTTPServer) Restart() {
	h.t.Helper()
	h.Stop()
	h.mu.Lock()
	defer h.mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ln, err := net.Listen("tcp", h.addr)
		if err == nil {
			h.serve(ln)
			return
		}
		// Any error is retried: on a port we held a moment ago it is almost
		// always "address in use" from a lingering socket.
		if time.Now().After(deadline) {
			h.t.Fatalf("mcptest: restart on %s: %v", h.addr, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Stopped reports whether the server is down (after Stop, before Restart).
func (h *HTTPServer) Stopped() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stopped
}
