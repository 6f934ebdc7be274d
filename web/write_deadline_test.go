package web_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/risk"
)

// A client that asks for responses and never reads them loses its connection once a
// write has waited the download stall time, instead of holding the handler (and its
// connection) for as long as TCP keeps the connection open.
func TestWriteDeadlineClientNeverReads(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{DownloadStall: 300 * time.Millisecond})
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := conn.(*net.TCPConn).SetReadBuffer(4096); err != nil {
		t.Fatal(err)
	}

	// 64 pipelined requests for a file of 480 KB: 30 MB, far past what the two
	// sockets' buffers hold. Their padding keeps requests unread on the server when it
	// closes, so it resets the connection and the client can tell without reading.
	const asks = 64
	pad := strings.Repeat("x", 1024)
	var reqs strings.Builder
	for range asks {
		fmt.Fprintf(&reqs, "GET /static/vendor/xterm.js HTTP/1.1\r\nHost: %s\r\nX-Pad: %s\r\n\r\n", u.Host, pad)
	}
	_ = conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, reqs.String()); err != nil {
		t.Fatal(err)
	}

	// Whole requests as probes: one the server got to would be answered, not refused.
	probe := fmt.Sprintf("GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", u.Host)
	closed := func() bool {
		_ = conn.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
		_, err := io.WriteString(conn, probe)
		var ne net.Error
		return err != nil && !(errors.As(err, &ne) && ne.Timeout())
	}
	webtest.WaitFor(t, 30*time.Second, closed, "the server still holds the connection of a client that never reads")

	// What the client can still read ends short of the answers it asked for.
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("reading the closed connection: %v after %d bytes", err, n)
	}
	if n >= asks*480_000 {
		t.Fatalf("the client read %d bytes: every answer, though it stalled", n)
	}

	// The server answers others as before.
	res, err := http.Get(srv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("/healthz on a new connection: %d", res.StatusCode)
	}
}

// The write deadline is per write: an SSE stream that stays idle well past it still
// delivers its answers (the deadline of the last write does not linger).
func TestWriteDeadlineSparesIdleStreams(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{DownloadStall: 300 * time.Millisecond})
	srv.LiveServer(t, "live", true, "echo")
	srv.App.SetRisk(t, "live__echo", risk.Low)
	ctx := context.Background()
	agent := &http.Client{Transport: bearerTransport(srv.Token(t, "admin"))}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "idle-agent", Version: "1"}, nil).Connect(ctx,
		&mcp.SSEClientTransport{Endpoint: srv.URL + "/sse", HTTPClient: agent}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	time.Sleep(1500 * time.Millisecond) // five times the write deadline, nothing written
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "live__echo", Arguments: map[string]any{"message": "still here"}})
	if err != nil || res.IsError {
		t.Fatalf("a call 1.5 s into an SSE session, the write deadline 0.3 s: %v %+v", err, res)
	}
}
