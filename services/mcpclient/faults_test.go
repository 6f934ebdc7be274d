package mcpclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/registry"
)

// stdioSpec registers the in-repo test server as a stdio server with a control file.
func stdioSpec(t *testing.T, name string, opts *mcptest.Options) (registry.Spec, string) {
	t.Helper()
	control := filepath.Join(t.TempDir(), "control")
	cmd, args, envm := mcptest.StdioCommand(opts, control)
	return registry.Spec{Name: name, Type: registry.TypeStdio, Command: cmd, Args: args, Env: envm, Enabled: true,
		HealthIntervalMS: 1000}, control
}

// pidAlive reports whether pid runs; a zombie (dead, waiting for its parent or init to
// reap it) does not count.
func pidAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	if err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) state ...: the state follows the last ')'.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// processesWith returns the live processes (pid → command name) whose environment
// holds the variable kv ("NAME=value"). A confined server sees its own PID namespace, so
// the pid it reports means nothing here; what a server and its children inherit from
// the test says which host processes are theirs. Zombies have no environment left.
func processesWith(t *testing.T, kv string) map[int]string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]string{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !slices.Contains(strings.Split(string(env), "\x00"), kv) || !pidAlive(pid) {
			continue
		}
		comm, _ := os.ReadFile("/proc/" + e.Name() + "/comm")
		out[pid] = strings.TrimSpace(string(comm))
	}
	return out
}

// TestStdioProcessDiesAndComesBack: the process dies → error with the exit status →
// restarted and connected again without restarting anything else; stderr is kept.
func TestStdioProcessDiesAndComesBack(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	spec, control := stdioSpec(t, "dies", &mcptest.Options{Name: "dies"})
	mine := "TOOLWARDEN_MCPTEST_CONTROL_FILE=" + control // in the environment of this server only
	sv := e.create(t, spec)
	e.waitStatus(t, sv.ID, registry.StatusConnected)
	ctl := mcptest.WaitControl(t, control)
	old := processesWith(t, mine)
	if len(old) == 0 {
		t.Fatal("no process of the server found")
	}
	if err := os.Remove(control); err != nil {
		t.Fatal(err)
	}
	if err := ctl.Die(); err != nil {
		t.Fatal(err)
	}
	// From the event: the row's error may last less than a poll before the reconnect.
	if lastError := e.waitStatusEvent(t, sv.ID, registry.StatusError); !strings.Contains(lastError, "exit status 3") {
		t.Fatalf("last error: got %q, want it to mention the exit status", lastError)
	}
	e.waitStatus(t, sv.ID, registry.StatusConnected)
	mcptest.WaitControl(t, control)
	now := processesWith(t, mine)
	if len(now) == 0 {
		t.Fatal("no process of the restarted server found")
	}
	for pid := range old {
		if _, ok := now[pid]; ok {
			t.Fatalf("old process %d (%s) is still there (orphan): old %v, now %v", pid, old[pid], old, now)
		}
	}
	stderr := strings.Join(e.mgr.Snapshot(sv.ID).Stderr, "\n")
	if strings.Count(stderr, "mcptest: dies started pid") < 2 {
		t.Fatalf("stderr of both runs should be kept, got:\n%s", stderr)
	}
	// Disabling tears the session down and stops the process.
	if _, err := e.reg.SetEnabled(context.Background(), audit.System, sv.ID, false); err != nil {
		t.Fatal(err)
	}
	e.mgr.Refresh(context.Background(), sv.ID)
	e.waitStatus(t, sv.ID, registry.StatusDisconnected)
	if left := processesWith(t, mine); len(left) > 0 {
		t.Fatalf("processes %v still run after the server was disabled", left)
	}
	if _, err := e.mgr.Session(sv.ID); !errors.Is(err, mcpclient.ErrNotConnected) {
		t.Fatalf("session after disable: got %v, want ErrNotConnected", err)
	}
}

// TestHTTPOutageAndReconnect: the HTTP server goes away → error within a health
// interval → it comes back on the same address → connected again.
func TestHTTPOutageAndReconnect(t *testing.T) {
	t.Parallel()
	for _, typ := range []string{registry.TypeStreamableHTTP, registry.TypeSSE} {
		t.Run(typ, func(t *testing.T) {
			t.Parallel()
			e := start(t, nil)
			hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "outage"})
			url := hs.URL()
			if typ == registry.TypeSSE {
				url = hs.SSEURL()
			}
			sv := e.create(t, registry.Spec{Name: "outage", Type: typ, URL: url, Enabled: true, HealthIntervalMS: 1000, TimeoutMS: 1000})
			e.waitStatus(t, sv.ID, registry.StatusConnected)
			hs.Stop()
			e.waitStatus(t, sv.ID, registry.StatusError)
			hs.Restart()
			e.waitStatus(t, sv.ID, registry.StatusConnected)
			// Health checks run on the new session (the outage itself was seen at once,
			// when the stream broke).
			testkit.WaitFor(t, 10*time.Second, func() bool {
				h, err := e.reg.HealthHistory(context.Background(), sv.ID, 1)
				return err == nil && len(h) == 1 && h[0].OK
			}, "no passing health check recorded after the reconnect")
		})
	}
}

// TestServerThatNeverAnswers: initialize gets no answer → error naming the timeout;
// the manager keeps serving other calls meanwhile.
func TestServerThatNeverAnswers(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	spec, _ := stdioSpec(t, "hangs", &mcptest.Options{Name: "hangs", Hang: true})
	spec.TimeoutMS = 300
	sv := e.create(t, spec)
	got := e.waitStatus(t, sv.ID, registry.StatusError)
	if got.LastError == nil || !strings.Contains(*got.LastError, "no answer to initialize within 300ms") {
		t.Fatalf("last error: got %v, want the initialize timeout", got.LastError)
	}
	start := time.Now()
	if _, err := e.mgr.Discover(context.Background(), sv.ID, audit.System); !errors.Is(err, mcpclient.ErrNotConnected) {
		t.Fatalf("discover on a hung server: got %v, want ErrNotConnected at once", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("discover on a hung server blocked for %s", d)
	}
}

// TestManyPages: 5,000 tools in pages of 10 are all discovered.
func TestManyPages(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "big", Generated: 4995, PageSize: 10})
	sv := e.create(t, registry.Spec{Name: "big", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true})
	runs := e.waitRuns(t, sv.ID, 1)
	if runs[0].Status != "succeeded" || runs[0].Added != 5000 || runs[0].Pages != 500 {
		t.Fatalf("got %+v, want 5000 tools added over 500 pages", runs[0])
	}
	if got := e.server(t, sv.ID).ToolCount; got != 5000 {
		t.Fatalf("tool count: got %d, want 5000", got)
	}
}

// TestToolChangesAtRunTime: a changed definition → list_changed → new hash, version
// and the updating state, validated in the same discovery; a breaking change bumps the
// major version; a removed tool is kept, unavailable, its state unchanged.
func TestToolChangesAtRunTime(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "changes"})
	sv := e.create(t, registry.Spec{Name: "changes", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true})
	e.waitRuns(t, sv.ID, 1)
	echo := func() registry.Tool {
		tools, err := e.reg.ServerTools(context.Background(), sv.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range tools {
			if tl.Name == "echo" {
				return tl
			}
		}
		t.Fatal("echo not found")
		return registry.Tool{}
	}
	before := echo()
	if before.Status != "validated" {
		t.Fatalf("first discovery: got echo %s, want validated", before.Status)
	}
	// transitions is echo's state history oldest first, one "from→to" per row.
	transitions := func() []string {
		hist, err := e.reg.ToolHistory(context.Background(), before.ID)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]string, len(hist))
		for i, h := range hist { // newest first
			from := ""
			if h.From != nil {
				from = *h.From
			}
			out[len(hist)-1-i] = from + "→" + h.To
		}
		return out
	}
	want := []string{"→discovered", "discovered→validating", "validating→validated"}
	if got := transitions(); !slices.Equal(got, want) {
		t.Fatalf("first discovery: got history %v, want %v", got, want)
	}
	schema := json.RawMessage(`{"type":"object","properties":{"message":{"type":"string","description":"what to echo"}},"required":["message"]}`)
	hs.Server().SetTool(mcptest.ToolSpec{Name: "echo", Description: "Echoes, now described differently", InputSchema: schema,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}})
	e.waitRuns(t, sv.ID, 2)
	after := echo()
	if after.DefinitionHash == before.DefinitionHash || after.Status != "validated" || after.Version() != "1.1" {
		t.Fatalf("after a description change: got hash changed=%v status %s version %s, want changed, validated, 1.1",
			after.DefinitionHash != before.DefinitionHash, after.Status, after.Version())
	}
	want = append(want, "validated→updating", "updating→validating", "validating→validated")
	if got := transitions(); !slices.Equal(got, want) {
		t.Fatalf("after a description change: got history %v, want %v", got, want)
	}
	// Breaking: message becomes an integer.
	hs.Server().SetTool(mcptest.ToolSpec{Name: "echo", Description: "Echoes, now described differently",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"message":{"type":"integer"}},"required":["message"]}`)})
	e.waitRuns(t, sv.ID, 3)
	if tl := echo(); tl.Version() != "2.0" || tl.Status != "validated" {
		t.Fatalf("after a breaking change: got version %s status %s, want 2.0 validated", tl.Version(), tl.Status)
	}
	want = append(want, "validated→updating", "updating→validating", "validating→validated")
	if got := transitions(); !slices.Equal(got, want) {
		t.Fatalf("after a breaking change: got history %v, want %v", got, want)
	}
	versions, err := e.reg.ToolVersions(context.Background(), after.ID)
	if err != nil || len(versions) != 3 || !versions[0].Breaking {
		t.Fatalf("versions: got %d (%v), newest breaking=%v; want 3, breaking", len(versions), err, len(versions) > 0 && versions[0].Breaking)
	}
	hs.Server().RemoveTool("echo")
	e.waitRuns(t, sv.ID, 4)
	if gone := echo(); gone.Available || gone.Status != "validated" {
		t.Fatalf("removed tool: got available %v status %s, want unavailable, still validated", gone.Available, gone.Status)
	}
	if got := transitions(); !slices.Equal(got, want) {
		t.Fatalf("after removal: got history %v, want %v (no transition)", got, want)
	}
}

// TestRepeatedCursor: a server that keeps returning the same cursor fails discovery
// without touching the stored tools.
func TestRepeatedCursor(t *testing.T) {
	t.Parallel()
	srv := mcptest.New(&mcptest.Options{Name: "loops"})
	var looping atomic.Bool
	srv.MCP().AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if lr, ok := req.(*mcp.ListToolsRequest); ok && looping.Load() && lr.Params != nil {
				lr.Params.Cursor = ""
			}
			res, err := next(ctx, method, req)
			if method == "tools/list" && looping.Load() && err == nil {
				r := res.(*mcp.ListToolsResult)
				r.NextCursor = "again"
				r.Tools = r.Tools[:1]
			}
			return res, err
		}
	})
	hts := httptest.NewServer(srv.Handler())
	t.Cleanup(hts.Close) // registered before start: runs after the sessions are closed
	e := start(t, nil)
	sv := e.create(t, registry.Spec{Name: "loops", Type: registry.TypeStreamableHTTP, URL: hts.URL + "/mcp", Enabled: true})
	first := e.waitRuns(t, sv.ID, 1)[0]
	looping.Store(true)
	if _, err := e.mgr.Discover(context.Background(), sv.ID, audit.System); err == nil || !strings.Contains(err.Error(), "repeated cursor") {
		t.Fatalf("discover: got %v, want a repeated-cursor error", err)
	}
	runs := e.runs(t, sv.ID)
	if runs[0].Status != "failed" {
		t.Fatalf("last run: got %s, want failed", runs[0].Status)
	}
	if got := e.server(t, sv.ID).ToolCount; got != first.Added {
		t.Fatalf("tools after a failed discovery: got %d available, want %d (nothing removed)", got, first.Added)
	}
}

// TestCircuitBreaker: after BreakerFailures failed connects in a row the server is left
// alone for the cooldown, and the status says so.
func TestCircuitBreaker(t *testing.T) {
	t.Parallel()
	opts := fast()
	opts.BreakerFailures, opts.BreakerCooldown = 3, time.Hour
	e := start(t, opts)
	sv := e.create(t, registry.Spec{Name: "absent", Type: registry.TypeStdio, Command: "/nonexistent/mcp-server", Enabled: true})
	var got registry.Server
	testkit.WaitFor(t, 20*time.Second, func() bool {
		got = e.server(t, sv.ID)
		return got.LastError != nil && strings.Contains(*got.LastError, "circuit open after 3 failed attempts")
	}, "the circuit never opened")
	if !strings.Contains(*got.LastError, "cannot start") {
		t.Fatalf("last error %q should keep the cause", *got.LastError)
	}
	snap := e.mgr.Snapshot(sv.ID)
	if !snap.BreakerOpen || snap.NextAttempt.Before(time.Now().Add(50*time.Minute)) {
		t.Fatalf("snapshot: got open=%v next=%s, want open with the next attempt an hour away", snap.BreakerOpen, snap.NextAttempt)
	}
	never(t, 500*time.Millisecond, func() bool { return e.server(t, sv.ID).Status != registry.StatusError },
		"the server was contacted again while the circuit was open")
	// A person asking to reconnect is not held back by the breaker.
	if err := e.mgr.Reconnect(context.Background(), sv.ID); err != nil {
		t.Fatal(err)
	}
	if s := e.mgr.Snapshot(sv.ID); s.BreakerOpen {
		t.Fatal("reconnect kept the open circuit")
	}
}

// TestProcessGroupKilled: whatever a stdio server started dies with it, on disable and
// on shutdown.
func TestProcessGroupKilled(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	pidFile := filepath.Join(t.TempDir(), "sleep.pid")
	cmd, args, envm := mcptest.StdioCommand(&mcptest.Options{Name: "parent"}, "")
	// sh starts a background sleep (a grandchild of Toolwarden), then becomes the server.
	script := `sleep 300 & echo $! > "$PIDFILE"; exec "$0" "$@"`
	envm["PIDFILE"] = pidFile
	sv := e.create(t, registry.Spec{Name: "parent", Type: registry.TypeStdio, Command: "sh",
		Args: append([]string{"-c", script, cmd}, args...), Env: envm, Enabled: true})
	e.waitStatus(t, sv.ID, registry.StatusConnected)
	mine := "PIDFILE=" + pidFile // inherited by the server, the sleep and nothing else
	sleeping := func() []int {
		readPID(t, pidFile) // written once the sleep runs
		var pids []int
		for pid, comm := range processesWith(t, mine) {
			if comm == "sleep" {
				pids = append(pids, pid)
			}
		}
		if len(pids) == 0 {
			t.Fatal("the background sleep is not running")
		}
		return pids
	}
	alive := func(pids []int) bool { return slices.ContainsFunc(pids, pidAlive) }
	pids := sleeping()
	if _, err := e.reg.SetEnabled(context.Background(), audit.System, sv.ID, false); err != nil {
		t.Fatal(err)
	}
	e.mgr.Refresh(context.Background(), sv.ID)
	testkit.WaitFor(t, 10*time.Second, func() bool { return !alive(pids) }, "the grandchild outlived its disabled server")

	// Shutdown: enable again, then stop the manager.
	if err := os.Remove(pidFile); err != nil {
		t.Fatal(err)
	}
	if _, err := e.reg.SetEnabled(context.Background(), audit.System, sv.ID, true); err != nil {
		t.Fatal(err)
	}
	e.mgr.Refresh(context.Background(), sv.ID)
	e.waitStatus(t, sv.ID, registry.StatusConnected)
	pids = sleeping()
	e.stop()
	// SIGKILL is delivered asynchronously: the process may take a moment to be gone.
	testkit.WaitFor(t, 10*time.Second, func() bool { return !alive(pids) }, "the grandchild outlived the shutdown")
	if got := e.server(t, sv.ID).Status; got != registry.StatusDisconnected {
		t.Fatalf("after shutdown: got status %s, want disconnected", got)
	}
}

func readPID(t *testing.T, file string) int {
	t.Helper()
	var pid int
	testkit.WaitFor(t, 10*time.Second, func() bool {
		b, err := os.ReadFile(file)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	}, "no pid in "+file)
	return pid
}

// TestStderrRedacted: a server that prints its secret on standard error does not put it
// on the server page, in a finished line or in a line it has not finished.
func TestStderrRedacted(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	const canary = "canary-redact-12345"
	cmd, args, envm := mcptest.StdioCommand(&mcptest.Options{Name: "chatty"}, "")
	envm["SECRET_TOKEN"] = canary
	sv := e.create(t, registry.Spec{Name: "chatty", Type: registry.TypeStdio, Command: "sh",
		Args: append([]string{"-c", `echo "my token is $SECRET_TOKEN" >&2; printf "unfinished $SECRET_TOKEN" >&2; exec "$0" "$@" 2>/dev/null`, cmd}, args...),
		Env:  envm, Enabled: true})
	e.waitStatus(t, sv.ID, registry.StatusConnected)
	stderr := strings.Join(e.mgr.Snapshot(sv.ID).Stderr, "\n")
	if strings.Contains(stderr, canary) || !strings.Contains(stderr, "my token is ***") || !strings.Contains(stderr, "unfinished ***") {
		t.Fatalf("stderr: got %q, want the token masked", stderr)
	}
}

// TestHealthRetries: a failed health check is tried again up to the server's retries
// setting; the session survives as many failures, and is replaced after one more.
func TestHealthRetries(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "flaky"})
	retries := 2
	sv := e.create(t, registry.Spec{Name: "flaky", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true,
		HealthIntervalMS: 1000, TimeoutMS: 1000, Retries: &retries})
	e.waitStatus(t, sv.ID, registry.StatusConnected)
	checks := func() (ok, failed int) {
		h, err := e.reg.HealthHistory(context.Background(), sv.ID, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range h {
			if c.OK {
				ok++
			} else {
				failed++
			}
		}
		return ok, failed
	}

	// Two failures in a row: tried again, the session stays.
	hs.Server().FailPings(retries)
	okBefore, _ := checks()
	testkit.WaitFor(t, 10*time.Second, func() bool { ok, failed := checks(); return failed == retries && ok > okBefore },
		"no passing check after the failed ones")
	if got := e.server(t, sv.ID); got.Status != registry.StatusConnected {
		t.Fatalf("after %d failed checks within the retries: status %s (%v), want connected", retries, got.Status, got.LastError)
	}
	if snap := e.mgr.Snapshot(sv.ID); snap.Failures != 0 {
		t.Fatalf("session was replaced: %d failures", snap.Failures)
	}

	// One failure more than retries allows: the session is replaced, and comes back.
	hs.Server().FailPings(retries + 1)
	// The error may last only until the reconnect: read it from its announcement.
	if last := e.waitStatusEvent(t, sv.ID, registry.StatusError); !strings.Contains(last, "health check failed 3 times in a row") {
		t.Fatalf("last error: got %q, want three failed health checks", last)
	}
	e.waitStatus(t, sv.ID, registry.StatusConnected)
}

// A URL with the wrong path (or the wrong transport type) answers 404: the test says
// which path each type usually has and to check the type, not the SDK's bare "Not Found".
func TestWrongPathSaysWhatToCheck(t *testing.T) {
	t.Parallel()
	e := start(t, fast())
	nothing := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(nothing.Close)
	for typ, want := range map[string]string{
		registry.TypeStreamableHTTP: "often /mcp; if this is an SSE server",
		registry.TypeSSE:            "often /sse; if this is a Streamable HTTP server",
	} {
		res := e.mgr.Test(context.Background(), registry.Connection{Name: "wrong", Type: typ, URL: nothing.URL + "/nope",
			Timeout: 5 * time.Second})
		if res.OK || !strings.Contains(res.Error, "404 Not Found at that URL: check its path and type") || !strings.Contains(res.Error, want) {
			t.Errorf("%s at a wrong path: got %q, want it to say 404 and %q", typ, res.Error, want)
		}
	}
}

// interposed is the streamable HTTP URL of an mcptest server (opts) behind a front
// that answers a request itself when answer returns true (given the JSON-RPC method, id
// and body), and passes the rest on: a server that misbehaves on one method only.
func interposed(t *testing.T, opts *mcptest.Options, answer func(w http.ResponseWriter, r *http.Request, method string, id json.RawMessage, body []byte) bool) string {
	t.Helper()
	return interposedOn(t, mcptest.StartHTTP(t, opts), answer)
}

// interposedOn is interposed in front of the server hs.
func interposedOn(t *testing.T, hs *mcptest.HTTPServer, answer func(w http.ResponseWriter, r *http.Request, method string, id json.RawMessage, body []byte) bool) string {
	t.Helper()
	target, err := url.Parse(hs.URL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal(body, &req)
		if answer(w, r, req.Method, req.ID, body) {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { front.CloseClientConnections(); front.Close() }) // the session's stream is open still
	return front.URL + target.Path
}

// rpcError answers request id with a JSON-RPC error (HTTP 400) whose message is msg.
func rpcError(w http.ResponseWriter, id json.RawMessage, msg string) {
	m, _ := json.Marshal(msg)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32000,"message":%s}}`, id, m)
}

// failedDiscovery waits for server id's first failed discovery and returns its error.
func (e *env) failedDiscovery(t *testing.T, id string) string {
	t.Helper()
	var got string
	testkit.WaitFor(t, 20*time.Second, func() bool {
		rows := testkit.Strings(t, e.pool, `SELECT error FROM discovery_runs WHERE server_id = $1 AND status = 'failed'`, id)
		if len(rows) > 0 {
			got = rows[0]
		}
		return got != ""
	}, "no failed discovery recorded")
	return got
}

// A discovery that fails with the server's own words (an error page quoting the
// credential it was sent) is recorded, published and logged with the secret masked.
func TestDiscoveryFailureMasked(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	const canary = "sk-canary-discovery-98765"
	u := interposed(t, &mcptest.Options{Name: "quoting"}, func(w http.ResponseWriter, r *http.Request, method string, id json.RawMessage, _ []byte) bool {
		if method != "tools/list" {
			return false
		}
		rpcError(w, id, "upstream refused the key "+r.Header.Get("Authorization"))
		return true
	})
	sv := e.create(t, registry.Spec{Name: "quoting", Type: registry.TypeStreamableHTTP, URL: u,
		AuthType: registry.AuthBearer, AuthToken: canary, Enabled: true})
	if got := e.failedDiscovery(t, sv.ID); strings.Contains(got, canary) || !strings.Contains(got, "***") {
		t.Fatalf("the failed discovery's error: %q, want the key masked", got)
	}
	if n := testkit.Count(t, e.pool, `SELECT count(*) FROM events WHERE payload::text LIKE '%' || $1 || '%'`, canary); n != 0 {
		t.Fatalf("%d events carry the key", n)
	}
}

// A server that lists null among its resources and prompts does not bring Toolwarden
// down (the discovery after a connect runs on a timer, where a panic ended the
// process): the nulls are skipped and the rest recorded.
func TestNullListEntriesSkipped(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	u := interposed(t, &mcptest.Options{Name: "nulls"}, func(w http.ResponseWriter, _ *http.Request, method string, id json.RawMessage, _ []byte) bool {
		result := map[string]string{
			"resources/list": `{"resources":[null,{"uri":"note://kept","name":"kept"}]}`,
			"prompts/list":   `{"prompts":[null]}`,
		}[method]
		if result == "" {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, id, result)
		return true
	})
	sv := e.create(t, registry.Spec{Name: "nulls", Type: registry.TypeStreamableHTTP, URL: u, Enabled: true})
	testkit.WaitFor(t, 20*time.Second, func() bool {
		got := e.server(t, sv.ID)
		return len(got.Resources) == 1 && got.Resources[0].URI == "note://kept" && got.Prompts != nil
	}, "the discovery never recorded the resource the server listed beside a null")
}

// A server that stops answering in the middle of a tools listing fails that discovery
// within its timeout (nothing changed), instead of holding discovery forever.
func TestListingPageTimesOut(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	u := interposed(t, &mcptest.Options{Name: "stalls", Generated: 5, PageSize: 2},
		func(_ http.ResponseWriter, r *http.Request, method string, _ json.RawMessage, body []byte) bool {
			if method != "tools/list" || !bytes.Contains(body, []byte(`"cursor"`)) {
				return false
			}
			<-r.Context().Done() // the second page never comes
			return true
		})
	sv := e.create(t, registry.Spec{Name: "stalls", Type: registry.TypeStreamableHTTP, URL: u, Enabled: true, TimeoutMS: 1000})
	if got := e.failedDiscovery(t, sv.ID); !strings.Contains(got, "tools/list page 2: no answer within 1s") {
		t.Fatalf("the failed discovery: %q", got)
	}
	if n := testkit.Count(t, e.pool, `SELECT count(*) FROM mcp_tools WHERE server_id = $1`, sv.ID); n != 0 {
		t.Fatalf("%d tools stored from a listing that did not end", n)
	}
}

// A server's error text is recorded cut to a bound, however long the server made it.
func TestServerErrorTextBounded(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	long := strings.Repeat("why ", 100_000)
	u := interposed(t, &mcptest.Options{Name: "verbose"}, func(w http.ResponseWriter, _ *http.Request, method string, id json.RawMessage, _ []byte) bool {
		if method != "tools/list" {
			return false
		}
		rpcError(w, id, long)
		return true
	})
	sv := e.create(t, registry.Spec{Name: "verbose", Type: registry.TypeStreamableHTTP, URL: u, Enabled: true})
	if got := e.failedDiscovery(t, sv.ID); len(got) > 4096 || !strings.Contains(got, "(cut)") {
		t.Fatalf("the failed discovery's error: %d bytes", len(got))
	}
}

// A server that announces list_changed faster than the debounce delay, without pause,
// is still discovered while it goes on: the requests join the pending discovery but do
// not put it off for good.
func TestListChangedStormStillDiscovers(t *testing.T) {
	t.Parallel()
	e := start(t, nil) // debounce 150 ms
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "storm"})
	sv := e.create(t, registry.Spec{Name: "storm", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true})
	e.waitRuns(t, sv.ID, 1)
	defer changeEvery(hs, "storm", 50*time.Millisecond)()
	testkit.WaitFor(t, 5*time.Second, func() bool { return len(e.runs(t, sv.ID)) >= 2 },
		"no discovery while list_changed kept coming every 50 ms")
}

// What a server says of itself (its instructions, name, resources and prompts) is
// stored and shown with its secret values hidden: a server that puts its key in a
// resource's URI does not show it on the server's page.
func TestSelfDescriptionMasked(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	const canary = "sk-canary-describes-13579"
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "talkative"})
	up := hs.Server().MCP()
	up.AddResource(&mcp.Resource{URI: "test://keyed?api_key=" + canary, Name: "keyed " + canary, Description: "uses " + canary},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{}, nil
		})
	up.AddPrompt(&mcp.Prompt{Name: "with-key", Description: "signed with " + canary},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{}, nil
		})
	sv := e.create(t, registry.Spec{Name: "talkative", Type: registry.TypeStreamableHTTP, URL: hs.URL(),
		AuthType: registry.AuthBearer, AuthToken: canary, Enabled: true})
	e.waitRuns(t, sv.ID, 1)
	if n := testkit.Count(t, e.pool, `SELECT count(*) FROM mcp_servers WHERE id = $1 AND resources::text LIKE '%keyed%'`, sv.ID); n != 1 {
		t.Fatalf("the resources were not stored (%d)", n)
	}
	if n := testkit.Count(t, e.pool, `SELECT count(*) FROM mcp_servers WHERE (resources::text || prompts::text) LIKE '%' || $1 || '%'`, canary); n != 0 {
		t.Fatal("the server's key is stored in its resources or prompts")
	}
}

// A discovery asked for while another of the same server runs waits for it only as long
// as its caller does: a server that takes its time over a listing does not hold the
// person who pressed Discover.
func TestManualDiscoveryGivesUpWaiting(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	var slow atomic.Bool
	release := make(chan struct{})
	u := interposed(t, &mcptest.Options{Name: "slow"}, func(w http.ResponseWriter, r *http.Request, method string, id json.RawMessage, _ []byte) bool {
		if method == "tools/list" && slow.Load() {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		return false
	})
	t.Cleanup(func() { close(release) })
	sv := e.create(t, registry.Spec{Name: "slow", Type: registry.TypeStreamableHTTP, URL: u, Enabled: true})
	e.waitRuns(t, sv.ID, 1)
	slow.Store(true)
	go func() { _, _ = e.mgr.Discover(context.Background(), sv.ID, audit.System) }() // held by the server
	time.Sleep(300 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := e.mgr.Discover(ctx, sv.ID, audit.System); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "waited for the one running") {
			t.Fatalf("the second discovery: %v, want it to give up waiting", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second discovery waited past its caller's deadline")
	}
}

// churning is a server named name whose churn is counted closely (debounce 20 ms, three
// runs in a row, then a 3 s wait), connected and discovered once.
func churning(t *testing.T, name string) (*env, *mcptest.HTTPServer, registry.Server) {
	t.Helper()
	opts := fast()
	opts.Debounce, opts.ChurnRuns, opts.ChurnWait = 20*time.Millisecond, 3, 3*time.Second
	e := start(t, opts)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: name})
	sv := e.create(t, registry.Spec{Name: name, Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true})
	e.waitRuns(t, sv.ID, 1)
	return e, hs, sv
}

// A server that keeps changing its tools and saying so is discovered back to back only
// ChurnRuns times; then each discovery waits (ChurnWait, doubling), so such a server
// cannot make Toolwarden write schema versions, history and audit entries without end.
func TestChangingServerSlowedDown(t *testing.T) {
	t.Parallel()
	e, hs, sv := churning(t, "churn")
	stop := changeEvery(hs, "churn", 30*time.Millisecond)
	time.Sleep(4 * time.Second)
	stop()
	// Without the wait a run every 20–160 ms: dozens in 4 s. With it: the connect's,
	// three in a row, then one after 3 s at most.
	if runs := e.runs(t, sv.ID); len(runs) > 8 {
		t.Fatalf("%d discoveries in 4 s of a server changing its tools every 30 ms, want them slowed down: %s", len(runs), runStatuses(runs))
	}
}

// A server that announces each change a second time, with nothing changed, is slowed
// down as one that only changes: the runs that find nothing new do not start the count
// again.
func TestChangingServerAnnouncingTwiceSlowedDown(t *testing.T) {
	t.Parallel()
	e, hs, sv := churning(t, "twice")
	stop := changeAndRepeatEvery(hs, "twice", 60*time.Millisecond, true)
	time.Sleep(4 * time.Second)
	stop()
	if runs := e.runs(t, sv.ID); len(runs) > 10 {
		t.Fatalf("%d discoveries in 4 s of a server changing its tools and announcing each change twice, want them slowed down: %s",
			len(runs), runStatuses(runs))
	}
}

// A server that keeps announcing changes whose lists then fail is slowed down as one
// whose lists change: each failed run counts as a changed one.
func TestFailingServerSlowedDown(t *testing.T) {
	t.Parallel()
	opts := fast()
	opts.Debounce, opts.ChurnRuns, opts.ChurnWait = 20*time.Millisecond, 3, 3*time.Second
	e := start(t, opts)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "flaky"})
	var failing atomic.Bool
	u := interposedOn(t, hs, func(w http.ResponseWriter, r *http.Request, method string, id json.RawMessage, _ []byte) bool {
		if method == "tools/list" && failing.Load() {
			rpcError(w, id, "the list changed while it was read")
			return true
		}
		return false
	})
	sv := e.create(t, registry.Spec{Name: "flaky", Type: registry.TypeStreamableHTTP, URL: u, Enabled: true})
	e.waitRuns(t, sv.ID, 1)
	failing.Store(true)
	stop := changeEvery(hs, "flaky", 30*time.Millisecond)
	time.Sleep(4 * time.Second)
	stop()
	if runs := e.runs(t, sv.ID); len(runs) > 8 {
		t.Fatalf("%d discoveries in 4 s of a server whose lists fail after each change, want them slowed down: %s", len(runs), runStatuses(runs))
	}
}

// runStatuses lists the runs' statuses, for a failure message.
func runStatuses(runs []registry.DiscoveryRun) string {
	var out []string
	for _, r := range runs {
		out = append(out, r.Trigger+":"+r.Status)
	}
	return strings.Join(out, " ")
}

// changeEvery changes tool name's description on hs every interval (each change sends
// list_changed) until the returned function is called.
func changeEvery(hs *mcptest.HTTPServer, name string, every time.Duration) func() {
	return changeAndRepeatEvery(hs, name, every, false)
}

// changeAndRepeatEvery is changeEvery that, when repeat is set, also announces each
// version a second time, unchanged.
func changeAndRepeatEvery(hs *mcptest.HTTPServer, name string, every time.Duration, repeat bool) func() {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(every):
			}
			spec := mcptest.ToolSpec{Name: name, Description: fmt.Sprintf("version %d", i), InputSchema: json.RawMessage(`{"type":"object"}`)}
			hs.Server().SetTool(spec)
			if repeat {
				select {
				case <-stop:
					return
				case <-time.After(every):
				}
				hs.Server().SetTool(spec)
			}
		}
	}()
	return func() { close(stop); <-done }
}
