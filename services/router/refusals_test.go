package router_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/router"
)

// answerEcho makes the server answer an echo call whose arguments contain marker with
// the JSON-RPC error given instead of running it.
func answerEcho(hs *mcptest.HTTPServer, marker string, answer *jsonrpc.Error) {
	hs.Server().MCP().AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && method == "tools/call" &&
				p.Name == "echo" && bytes.Contains(p.Arguments, []byte(marker)) {
				return nil, answer
			}
			return next(ctx, method, req)
		}
	})
}

// A server answering calls with JSON-RPC errors (bad arguments) is up: five such calls
// leave its circuit closed, and the next good call goes through.
func TestServerRefusalsKeepCircuitClosed(t *testing.T) {
	t.Parallel()
	e := startWith(t, &router.Options{BreakerFailures: 3, BreakerCooldown: time.Hour}, nil)
	hs := e.server("refuses", true, "echo")
	serverID := e.tool("refuses__echo").ServerID
	answerEcho(hs, "refuse", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "bad arguments"})
	for i := range 5 {
		_, err := e.call("refuses__echo", `{"message":"refuse"}`)
		if codeOf(err) != router.CodeUpstream || !strings.Contains(err.Error(), "bad arguments") {
			t.Fatalf("refused call %d: got %v, want upstream_error saying bad arguments", i, err)
		}
	}
	if b := e.r.Breaker(serverID); b.State != router.CircuitClosed || b.Failures != 0 {
		t.Fatalf("after 5 refused calls: got %+v, want closed with no failures", b)
	}
	res, err := e.call("refuses__echo", `{"message":"fine"}`)
	if err != nil || router.TextOf(res.Content) != "Echo: fine" {
		t.Fatalf("good call after the refusals: got %v, %v", res, err)
	}
}

// A refusal is neither a failure nor a success of the server: between failing calls it
// does not reset their count, so the circuit still opens at the third failure in a row.
func TestRefusalsDoNotHideFailures(t *testing.T) {
	t.Parallel()
	e := startWith(t, &router.Options{BreakerFailures: 3, BreakerCooldown: time.Hour}, nil)
	hs := e.server("flaky", false, "echo") // untrusted: a failing call is not retried, one failure each
	serverID := e.tool("flaky__echo").ServerID
	answerEcho(hs, "refuse", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "bad arguments"})
	answerEcho(hs, "break", &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the server broke"})
	for i := range 3 {
		if _, err := e.call("flaky__echo", `{"message":"break"}`); err == nil {
			t.Fatalf("failing call %d succeeded", i)
		}
		if i < 2 {
			if _, err := e.call("flaky__echo", `{"message":"refuse"}`); err == nil {
				t.Fatalf("refused call %d succeeded", i)
			}
		}
	}
	if b := e.r.Breaker(serverID); b.State != router.CircuitOpen {
		t.Fatalf("after 3 failures with refusals between them: got %+v, want the circuit open", b)
	}
}

// A call its caller gave up on (or that ran out of time) is neither a failure nor a
// success of the server either: counted as a success, one cancelled call in every few
// kept a failing server's circuit closed for good.
func TestCancelledCallsDoNotHideFailures(t *testing.T) {
	t.Parallel()
	e := startWith(t, &router.Options{BreakerFailures: 3, BreakerCooldown: time.Hour}, nil)
	hs := e.server("flaky", false, "echo", "sleep")
	serverID := e.tool("flaky__echo").ServerID
	answerEcho(hs, "break", &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the server broke"})
	for i := range 3 {
		if _, err := e.call("flaky__echo", `{"message":"break"}`); err == nil {
			t.Fatalf("failing call %d succeeded", i)
		}
		if i < 2 {
			ctx, cancel := context.WithTimeout(e.ctx, 100*time.Millisecond)
			_, err := e.callCtx(ctx, "flaky__sleep", `{"ms":5000}`)
			cancel()
			if codeOf(err) != router.CodeCancelled {
				t.Fatalf("a call given up on: %v, want cancelled", err)
			}
		}
	}
	if b := e.r.Breaker(serverID); b.State != router.CircuitOpen {
		t.Fatalf("after 3 failures with calls given up on between them: got %+v, want the circuit open", b)
	}
}

// A proxy in front of the server refusing large bodies (413 and an HTML page) refuses
// those calls only: the circuit stays closed and a small call goes through.
func TestOversizedCallsKeepCircuitClosed(t *testing.T) {
	t.Parallel()
	e := startWith(t, &router.Options{BreakerFailures: 3, BreakerCooldown: time.Hour}, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "limited"})
	target, err := url.Parse(hs.URL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if len(body) > 16<<10 {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			_, _ = io.WriteString(w, "<html><body>413 Request Entity Too Large</body></html>")
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { front.CloseClientConnections(); front.Close() })
	sv := e.register(registry.Spec{Name: "limited", Type: registry.TypeStreamableHTTP, URL: front.URL + target.Path,
		Enabled: true, Trusted: true}, "echo")
	big := `{"message":"` + strings.Repeat("x", 32<<10) + `"}`
	for i := range 5 {
		_, err := e.call("limited__echo", big)
		if codeOf(err) != router.CodeUpstream || !strings.Contains(err.Error(), "Request Entity Too Large") {
			t.Fatalf("large call %d: got %v, want upstream_error saying Request Entity Too Large", i, err)
		}
	}
	if b := e.r.Breaker(sv.ID); b.State != router.CircuitClosed || b.Failures != 0 {
		t.Fatalf("after 5 refused calls: got %+v, want closed with no failures", b)
	}
	res, err := e.call("limited__echo", `{"message":"small"}`)
	if err != nil || router.TextOf(res.Content) != "Echo: small" {
		t.Fatalf("small call after the large ones: got %v, %v", res, err)
	}
}

// While a half-open circuit's trial call is in flight, other calls are refused as
// paused (not "too many requests" from the server), not as having run.
func TestHalfOpenTrialPausesOtherCalls(t *testing.T) {
	t.Parallel()
	// A cooldown of a millisecond: the circuit is half-open by the next call.
	e := startWith(t, &router.Options{BreakerFailures: 1, BreakerCooldown: time.Millisecond}, nil)
	hs := e.server("trial", true, "echo", "sleep")
	serverID := e.tool("trial__echo").ServerID
	// An internal error is the server failing: it counts against the circuit.
	answerEcho(hs, "boom", &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal failure"})
	if _, err := e.call("trial__echo", `{"message":"boom"}`); codeOf(err) != router.CodeUpstream {
		t.Fatalf("failing call: got %v, want upstream_error", err)
	}
	if b := e.r.Breaker(serverID); b.State == router.CircuitClosed {
		t.Fatalf("after an internal error: got %+v, want the circuit not closed", b)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	trial := make(chan error, 1)
	go func() {
		_, err := e.callCtx(ctx, "trial__sleep", `{"ms":60000}`)
		trial <- err
	}()
	testkit.WaitFor(t, 20*time.Second, func() bool { return hs.Server().Sleeping() == 1 }, "the trial call never reached the server")
	_, err := e.call("trial__echo", `{"message":"meanwhile"}`)
	var re *router.Error
	if !errors.As(err, &re) || re.Code != router.CodeUpstream || !strings.Contains(re.Message, "paused") || re.Ran {
		t.Fatalf("a call during the trial: got %v (ran %v), want upstream_error saying paused, not run", err, re != nil && re.Ran)
	}
	cancel()
	<-trial
	testkit.WaitFor(t, 10*time.Second, func() bool { return hs.Server().Sleeping() == 0 }, "the trial call never ended at the server")
}

// A retryable tool's call that the server refused (bad arguments) is not sent again:
// asking again gets the same answer.
func TestServerRefusalIsNotRetried(t *testing.T) {
	t.Parallel()
	e := startWith(t, &router.Options{RetryAttempts: 3, RetryBackoff: time.Millisecond}, nil)
	hs := e.server("strict", true, "echo") // trusted: its read-only echo is retryable
	var mu sync.Mutex
	seen := 0
	hs.Server().MCP().AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && method == "tools/call" && bytes.Contains(p.Arguments, []byte("refuse")) {
				mu.Lock()
				seen++
				mu.Unlock()
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "bad arguments"}
			}
			return next(ctx, method, req)
		}
	})
	if _, err := e.call("strict__echo", `{"message":"refuse"}`); codeOf(err) != router.CodeUpstream {
		t.Fatalf("refused call: got %v, want upstream_error", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if seen != 1 {
		t.Fatalf("the server saw the refused call %d times, want once", seen)
	}
}

// A server that forgot the session answers every request with a 400, plain (the
// TypeScript SDK's SSE "No transport found for sessionId") or with a JSON-RPC error
// (its streamable HTTP "No valid session ID provided", whose null id makes it no
// answer to the call, so it is read as a plain refusal): three refused calls in a row
// have the session checked at once — its ping refused too, it is replaced — rather
// than at the next health check (an hour here), and calls work again.
func TestRefusedSessionIsReplaced(t *testing.T) {
	t.Parallel()
	t.Run("plain", func(t *testing.T) {
		t.Parallel()
		refusedSessionIsReplaced(t, func(w http.ResponseWriter) {
			http.Error(w, "No transport found for sessionId", http.StatusBadRequest)
		})
	})
	t.Run("json-rpc", func(t *testing.T) {
		t.Parallel()
		refusedSessionIsReplaced(t, func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null}`)
		})
	})
}

func refusedSessionIsReplaced(t *testing.T, refuse func(http.ResponseWriter)) {
	e := startWith(t, &router.Options{BreakerFailures: 50}, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "forgetful"})
	target, err := url.Parse(hs.URL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	var mu sync.Mutex
	seen, forgotten := map[string]bool{}, map[string]bool{}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Mcp-Session-Id")
		mu.Lock()
		seen[id] = id != ""
		gone := forgotten[id]
		mu.Unlock()
		if gone {
			refuse(w)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { front.CloseClientConnections(); front.Close() })
	e.register(registry.Spec{Name: "forgetful", Type: registry.TypeStreamableHTTP, URL: front.URL + target.Path,
		Enabled: true, Trusted: true, HealthIntervalMS: 3_600_000}, "echo")
	if _, err := e.call("forgetful__echo", `{"message":"first"}`); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	maps.Copy(forgotten, seen) // the server forgets every session it had
	delete(forgotten, "")
	n := len(forgotten)
	mu.Unlock()
	if n == 0 {
		t.Fatal("no request carried a session id")
	}
	for i := range 3 {
		if _, err := e.call("forgetful__echo", `{"message":"lost"}`); err == nil {
			t.Fatalf("call %d on the forgotten session succeeded", i)
		}
	}
	testkit.WaitFor(t, 20*time.Second, func() bool {
		res, err := e.call("forgetful__echo", `{"message":"again"}`)
		return err == nil && router.TextOf(res.Content) == "Echo: again"
	}, "a call on a new session after the refused ones")
}

// Refused requests anyone can cause (an oversized read behind a proxy's limit) have
// the session's health checked, but a passing check does not close the call circuit of
// a server that fails its calls.
func TestRefusalProbeKeepsCircuitOpen(t *testing.T) {
	t.Parallel()
	e := startWith(t, &router.Options{BreakerFailures: 1, BreakerCooldown: time.Hour}, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "failing"})
	answerEcho(hs, "boom", &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal failure"})
	target, err := url.Parse(hs.URL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte("resources/read")) {
			http.Error(w, "Request Entity Too Large", http.StatusRequestEntityTooLarge)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { front.CloseClientConnections(); front.Close() })
	sv := e.register(registry.Spec{Name: "failing", Type: registry.TypeStreamableHTTP, URL: front.URL + target.Path,
		Enabled: true, Trusted: true, HealthIntervalMS: 3_600_000}, "echo")
	if _, err := e.call("failing__echo", `{"message":"boom"}`); err == nil {
		t.Fatal("the failing call succeeded")
	}
	if b := e.r.Breaker(sv.ID); b.State != router.CircuitOpen {
		t.Fatalf("after a failure: %+v, want the circuit open", b)
	}
	checks := e.count(`SELECT count(*) FROM server_health WHERE server_id = $1`, sv.ID)
	for range 3 {
		if _, _, err := e.mgr.ReadResource(e.ctx, sv.ID, "test://readme"); err == nil {
			t.Fatal("a refused read succeeded")
		}
	}
	testkit.WaitFor(t, 20*time.Second, func() bool {
		return e.count(`SELECT count(*) FROM server_health WHERE server_id = $1`, sv.ID) > checks
	}, "the health check the refusals asked for")
	// The check records itself before it would close the circuit: watched for a second
	// after, it stays open.
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if b := e.r.Breaker(sv.ID); b.State != router.CircuitOpen {
			t.Fatalf("after the refusals' passing health check: %+v, want the circuit still open", b)
		}
	}
}

// A JSON-RPC server error (-32000, a proxy's "connection closed" while the server behind
// it restarts) is the server failing, not a refusal: a retryable call is tried again,
// and it counts against the circuit.
func TestServerErrorRangeIsAFailure(t *testing.T) {
	t.Parallel()
	e := startWith(t, &router.Options{RetryAttempts: 3, RetryBackoff: time.Millisecond, BreakerFailures: 50}, nil)
	hs := e.server("proxied", true, "echo")
	serverID := e.tool("proxied__echo").ServerID
	var mu sync.Mutex
	seen := 0
	hs.Server().MCP().AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && method == "tools/call" && bytes.Contains(p.Arguments, []byte("restart")) {
				mu.Lock()
				seen++
				mu.Unlock()
				return nil, &jsonrpc.Error{Code: -32000, Message: "Connection closed"}
			}
			return next(ctx, method, req)
		}
	})
	if _, err := e.call("proxied__echo", `{"message":"restart"}`); codeOf(err) != router.CodeUpstream {
		t.Fatalf("the failing call: got %v, want upstream_error", err)
	}
	mu.Lock()
	n := seen
	mu.Unlock()
	if n != 3 {
		t.Errorf("the server saw the call %d times, want 3 (retried)", n)
	}
	if b := e.r.Breaker(serverID); b.Failures == 0 {
		t.Errorf("after the failing call: %+v, want its failure counted", b)
	}
}
