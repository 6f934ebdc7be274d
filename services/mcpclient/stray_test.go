package mcpclient_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/registry"
)

// strayMark begins the stderr line that says what a server's standard output had that
// was dropped (mcpclient's strayMark).
const strayMark = "[toolwarden] dropped from standard output, not a JSON-RPC message: "

// bannerSpec is the in-repo test server started through a shell that first writes a
// banner to standard output (with banner set), as many servers do, and writes a stray
// line there once the file trigger exists: mid-session, between the server's own
// messages.
func bannerSpec(t *testing.T, banner bool) (spec registry.Spec, control, trigger string) {
	t.Helper()
	dir := t.TempDir()
	control, trigger = filepath.Join(dir, "control"), filepath.Join(dir, "trigger")
	cmd, args, envm := mcptest.StdioCommand(&mcptest.Options{Name: "banner"}, control)
	envm["STRAY_TRIGGER"] = trigger
	script := `(while [ ! -e "$STRAY_TRIGGER" ]; do sleep 0.02; done; echo "stray line mid-session"; echo '{"level":"info","msg":"a log line","id":1}') & ` +
		`exec "$0" "$@"`
	if banner {
		script = `echo "server listening on stdio"; ` + script
	}
	return registry.Spec{Name: "banner", Type: registry.TypeStdio, Command: "sh", Args: append([]string{"-c", script, cmd}, args...),
		Env: envm, Enabled: true}, control, trigger
}

// A stdio server that writes a banner to standard output before it speaks MCP passes
// the connection test; the banner is shown with its standard error.
func TestBannerConnectionTest(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	spec, _, _ := bannerSpec(t, true)
	res := e.mgr.Test(context.Background(), registry.Connection{Name: spec.Name, Type: spec.Type, Command: spec.Command,
		Args: spec.Args, Env: spec.Env, Timeout: 30 * time.Second})
	if !res.OK || res.ToolCount == 0 {
		t.Fatalf("connection test: ok %v, %d tools, error %q", res.OK, res.ToolCount, res.Error)
	}
	if !slices.Contains(res.Stderr, strayMark+"server listening on stdio") {
		t.Fatalf("stderr %q, want the banner noted", res.Stderr)
	}
}

// A stray line on a stdio server's standard output mid-session is dropped: the call in
// flight meanwhile, and the session, go on.
func TestStrayLineMidSession(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	spec, control, trigger := bannerSpec(t, false)
	sv := e.create(t, spec)
	e.waitStatus(t, sv.ID, registry.StatusConnected)
	cs, err := e.mgr.Session(sv.ID)
	if err != nil {
		t.Fatal(err)
	}
	ctrl := mcptest.WaitControl(t, control)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	type result struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "sleep", Arguments: map[string]any{"ms": 2000}})
		done <- result{res, err}
	}()
	testkit.WaitFor(t, 30*time.Second, func() bool { n, err := ctrl.Sleeping(); return err == nil && n == 1 }, "the call never started")
	if err := os.WriteFile(trigger, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// The line comes within 20 ms, the call's answer after 2 s.
	select {
	case r := <-done:
		if r.err != nil || r.res.IsError {
			t.Fatalf("the call in flight: %v %+v", r.err, r.res)
		}
	case <-ctx.Done():
		t.Fatal("the call in flight never returned")
	}
	waitStderr(t, e, sv.ID, strayMark+"stray line mid-session")
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "after"}}); err != nil || res.IsError {
		t.Fatalf("a call after the stray line: %v %+v", err, res)
	}
	if sv := e.server(t, sv.ID); sv.Status != registry.StatusConnected {
		t.Fatalf("status %s, want still connected", sv.Status)
	}
}

// strayEvents puts events whose data is not JSON, and one with no data at all (only an
// id and a retry, as a Streamable HTTP server primes a stream with), before each event of
// an SSE stream.
type strayEvents struct{ next http.Handler }

func (s strayEvents) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.next.ServeHTTP(&strayWriter{ResponseWriter: w}, r)
}

type strayWriter struct{ http.ResponseWriter }

func (w *strayWriter) Write(p []byte) (int, error) {
	if strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream") {
		_, _ = io.WriteString(w.ResponseWriter, "event: message\ndata: server says hello\n\ndata: {not json}\n\nid: 7\nretry: 100\n\n")
	}
	return w.ResponseWriter.Write(p)
}

func (w *strayWriter) Flush() { w.ResponseWriter.(http.Flusher).Flush() }

func (w *strayWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// An event of a Streamable HTTP or SSE server whose data is not JSON is dropped: the
// session connects, and calls go through, whatever comes before their answers.
func TestStrayEvents(t *testing.T) {
	t.Parallel()
	hs := httptest.NewServer(strayEvents{mcptest.New(&mcptest.Options{Name: "stray"}).Handler()})
	t.Cleanup(hs.Close) // after the manager stopped: Close waits for the streams it holds
	e := start(t, nil)
	for _, c := range []struct{ typ, url string }{
		{registry.TypeStreamableHTTP, hs.URL + "/mcp"},
		{registry.TypeSSE, hs.URL + "/sse"},
	} {
		t.Run(c.typ, func(t *testing.T) {
			sv := e.create(t, registry.Spec{Name: "stray-" + strings.ReplaceAll(c.typ, "_", "-"), Type: c.typ, URL: c.url, Enabled: true})
			e.waitStatus(t, sv.ID, registry.StatusConnected)
			cs, err := e.mgr.Session(sv.ID)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for i := range 3 {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hi"}})
				if err != nil || res.IsError {
					t.Fatalf("call %d: %v %+v", i, err, res)
				}
			}
		})
	}
}

// A stdio server whose answer to a call is malformed JSON (here made so by a filter on
// its standard output) fails that call at once with an error that says so, rather than
// at the call's timeout; the session goes on.
func TestMalformedResponseFailsFast(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	cmd, args, envm := mcptest.StdioCommand(&mcptest.Options{Name: "malformed"}, filepath.Join(t.TempDir(), "control"))
	// The answer to echo "MALFORM" gets a comma after the string: not JSON, id intact.
	script := `"$0" "$@" | sed -u 's/MALFORM"/MALFORM",/g'`
	sv := e.create(t, registry.Spec{Name: "malformed", Type: registry.TypeStdio, Command: "sh",
		Args: append([]string{"-c", script, cmd}, args...), Env: envm, Enabled: true})
	e.waitStatus(t, sv.ID, registry.StatusConnected)
	cs, err := e.mgr.Session(sv.ID)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	start := time.Now()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "MALFORM"}})
	if err == nil || !strings.Contains(err.Error(), "malformed response: malformed sent an answer that is not a JSON-RPC message") {
		t.Fatalf("the malformed answer: %v %+v, want a malformed response error", err, res)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the call failed after %s, want at once", d)
	}
	waitStderr(t, e, sv.ID, strayMark+`{"jsonrpc"`)
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "after"}}); err != nil || res.IsError {
		t.Fatalf("a call after the malformed answer: %v %+v", err, res)
	}
	if sv := e.server(t, sv.ID); sv.Status != registry.StatusConnected {
		t.Fatalf("status %s, want still connected", sv.Status)
	}
}
