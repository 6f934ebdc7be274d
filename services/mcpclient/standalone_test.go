package mcpclient

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/template"
)

// cutFront stands between Toolwarden and a real SDK streamable server as a proxy with
// a read timeout does: every standalone GET stream is ended after `after` (at once
// when 0, without reaching the server). With retry set, each stream first tells the
// client to reconnect after that many milliseconds, as a server may.
type cutFront struct {
	next  http.Handler
	after time.Duration
	retry int
	gets  atomic.Int32
}

func (f *cutFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		f.next.ServeHTTP(w, r)
		return
	}
	f.gets.Add(1)
	if f.after == 0 {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), f.after)
	defer cancel()
	f.next.ServeHTTP(&retryWriter{ResponseWriter: w, retry: f.retry}, r.WithContext(ctx))
}

// retryWriter writes an SSE retry field right after a successful response's header.
type retryWriter struct {
	http.ResponseWriter
	retry int
	wrote bool
}

func (w *retryWriter) WriteHeader(code int) {
	if w.wrote {
		return
	}
	w.wrote = true
	w.ResponseWriter.WriteHeader(code)
	if code == http.StatusOK && w.retry > 0 {
		fmt.Fprintf(w.ResponseWriter, "retry: %d\n\n", w.retry)
		w.Flush()
	}
}

func (w *retryWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.ResponseWriter.Write(p)
}

func (w *retryWriter) Flush() { w.ResponseWriter.(http.Flusher).Flush() }

func (w *retryWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// echoServer is a real SDK streamable HTTP server with one tool, echo.
func echoServer() http.Handler {
	srv := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		Text string `json:"text"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
}

// openStreamable opens a Toolwarden session (as newEndpoint and connect make it) to url.
// ended gets the session's end.
func openStreamable(t *testing.T, url string) (cs *mcp.ClientSession, ended chan error) {
	t.Helper()
	lim, _ := testLimit(1 << 20)
	ep, err := newEndpoint(registry.Connection{Name: "cut", Type: registry.TypeStreamableHTTP, URL: url, Timeout: 10 * time.Second},
		nil, nil, newLineBuffer(10, 100), lim, template.Options{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, cancel, err := connect(context.Background(), mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil), ep, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.Close()
		cancel()
		ep.cleanup()
	})
	ended = make(chan error, 1)
	go func() { ended <- cs.Wait() }()
	return cs, ended
}

// A proxy that ends the idle standalone stream now and then (nginx's
// proxy_read_timeout) does not end the session: more cuts than the SDK's retries
// without progress, and a call still goes through.
func TestStandaloneStreamCutsKeepSession(t *testing.T) {
	t.Parallel()
	front := &cutFront{next: echoServer(), after: 400 * time.Millisecond, retry: 100}
	srv := httptest.NewServer(front)
	t.Cleanup(srv.Close)
	cs, ended := openStreamable(t, srv.URL)

	const cuts = 8
	deadline := time.After(60 * time.Second)
	for front.gets.Load() <= cuts {
		select {
		case err := <-ended:
			t.Fatalf("the session ended after %d standalone streams: %v", front.gets.Load(), err)
		case <-deadline:
			t.Fatalf("only %d standalone streams in a minute", front.gets.Load())
		case <-time.After(50 * time.Millisecond):
		}
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "still here"}})
	if err != nil {
		t.Fatalf("call after %d cuts: %v", cuts, err)
	}
	if len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "still here" {
		t.Fatalf("call after %d cuts: got %+v", cuts, res.Content)
	}
}

// A server that ends the standalone stream as soon as it opens still ends the session
// after a few reconnects, rather than being reconnected to for ever.
func TestStandaloneStreamClosedAtOnceEndsSession(t *testing.T) {
	t.Parallel()
	t.Run("closed", func(t *testing.T) { closedAtOnce(t, &cutFront{next: echoServer()}) })
	// A stream that lasted longer than the 1 ms the server asks to wait is no progress
	// for that: it must outlive minStreamLife.
	t.Run("tiny retry", func(t *testing.T) {
		closedAtOnce(t, &cutFront{next: echoServer(), after: 20 * time.Millisecond, retry: 1})
	})
}

func closedAtOnce(t *testing.T, front *cutFront) {
	t.Parallel()
	srv := httptest.NewServer(front)
	t.Cleanup(srv.Close)
	_, ended := openStreamable(t, srv.URL)
	select {
	case err := <-ended:
		if err == nil || !strings.Contains(err.Error(), "without progress") {
			t.Fatalf("session ended with %v, want retries without progress", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the session was still reconnecting after %d standalone streams", front.gets.Load())
	}
	if n := front.gets.Load(); n > streamableRetries+1 {
		t.Fatalf("%d standalone streams, want at most %d", n, streamableRetries+1)
	}
}

// A server that went away (its stream broke and it no longer accepts connections) ends
// the session at its first failed reconnect, so that the supervisor reports the outage
// rather than the SDK retrying quietly for half a minute.
func TestStandaloneStreamServerGoneEndsSession(t *testing.T) {
	t.Parallel()
	front := &cutFront{next: echoServer(), after: time.Hour}
	srv := httptest.NewServer(front)
	_, ended := openStreamable(t, srv.URL)
	deadline := time.After(30 * time.Second)
	for front.gets.Load() == 0 {
		select {
		case <-deadline:
			t.Fatal("the standalone stream never opened")
		case <-time.After(10 * time.Millisecond):
		}
	}
	srv.CloseClientConnections()
	srv.Close()
	select {
	case err := <-ended:
		if err == nil {
			t.Fatal("session ended without an error")
		}
	case <-time.After(8 * time.Second):
		t.Fatal("the session outlived its server by 8 s")
	}
}
