package gateway_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/gateway"
)

// sessionEndEnv is holdEnv with a trusted server "lt" whose sleep is LOW (it runs at
// once) and a hold longer than any check here waits.
func sessionEndEnv(t *testing.T) (*holdEnv, *mcptest.Server) {
	t.Helper()
	e := newHoldEnv(t, &gateway.Options{Hold: 20 * time.Second})
	lt := e.srv.LiveServer(t, "lt", true, "sleep")
	return e, lt.Server()
}

// withdrawnUnrun checks that held execution ex was withdrawn by the client, audited,
// and that approving it now fails and runs nothing.
func (e *holdEnv) withdrawnUnrun(t *testing.T, ex *executions.Execution) {
	t.Helper()
	ctx := context.Background()
	cur, err := e.srv.Executions.Get(ctx, ex.ID)
	if err != nil {
		t.Fatal(err)
	}
	if cur.Status != executions.Cancelled || cur.Reason != "cancelled by the client" || cur.DecidedBy != "tina" {
		t.Fatalf("the held execution after its session ended: status %s, reason %q, decided by %q; want cancelled by the client",
			cur.Status, cur.Reason, cur.DecidedBy)
	}
	if n := e.srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'execution.cancel' AND target_id = $1
		AND actor_id = $2`, ex.ID, e.tina.ID); n != 1 {
		t.Fatalf("audit rows of the withdrawal: %d, want 1", n)
	}
	if _, err := e.srv.Executions.Confirm(ctx, e.admin, ex.ID, "", ""); err == nil {
		t.Fatal("the withdrawn execution could still be approved")
	}
	if err := e.srv.Router.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	steps, err := e.srv.Executions.Steps(ctx, ex.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range steps {
		if st.Phase == "run" && st.Status != executions.StepPending && st.Status != executions.StepSkipped {
			t.Fatalf("the withdrawn execution's step is %s: the tool ran for a client that is gone", st.Status)
		}
	}
	if n := e.srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'tool.call' AND payload::text LIKE '%gone client%'`); n != 0 {
		t.Fatalf("%d upstream calls of the withdrawn execution's tool, want none", n)
	}
}

// deleteSession ends MCP session id with DELETE /mcp as the token's user and returns
// its status, failing if the DELETE does not come back.
func deleteSession(t *testing.T, srv *webtest.Server, token, id string) int {
	t.Helper()
	done := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodDelete, srv.URL+"/mcp", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Mcp-Session-Id", id)
		req.Header.Set("Mcp-Protocol-Version", eras[0])
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- 0
			return
		}
		res.Body.Close()
		done <- res.StatusCode
	}()
	select {
	case code := <-done:
		return code
	case <-time.After(90 * time.Second):
		t.Fatal("DELETE /mcp did not come back: it waits for the session's calls")
	}
	return 0
}

// A stateful client that ends its session (DELETE /mcp, as the TypeScript SDK does on
// close, with no notifications/cancelled) ends the session's calls: a held call's
// execution is withdrawn before the DELETE answers, and can no longer be approved; a
// LOW call under way is cancelled upstream. Another user's DELETE of the session ends
// nothing.
func TestDeletingASessionCancelsItsCalls(t *testing.T) {
	t.Parallel()
	e, lt := sessionEndEnv(t)
	ctx := context.Background()
	cs, _ := e.client(t, eras[0])
	held := call(ctx, cs, "ut__echo", map[string]any{"message": "gone client"}, "")
	running := call(ctx, cs, "lt__sleep", map[string]any{"ms": 45000}, "")
	ex := e.pending(t, "ut__echo")
	webtest.WaitFor(t, 10*time.Second, func() bool { return lt.Sleeping() == 1 }, "the LOW sleep never reached the upstream")

	e.srv.CreateUser(t, "otto", auth.RoleToolUser, password)
	if code := deleteSession(t, e.srv, e.srv.Token(t, "otto"), cs.ID()); code != http.StatusForbidden {
		t.Fatalf("another user's DELETE of tina's session: got %d, want 403", code)
	}
	// (The owner check itself is TestSessionCallsEnd's: this DELETE answers without
	// waiting for what it might have cancelled.)
	if cur, err := e.srv.Executions.Get(ctx, ex.ID); err != nil {
		t.Fatal(err)
	} else if cur.Status != executions.AwaitingApproval {
		t.Fatalf("after another user's DELETE the held execution is %s, want still awaiting approval", cur.Status)
	}
	if lt.Sleeping() != 1 {
		t.Fatal("another user's DELETE cancelled tina's LOW call")
	}

	if code := deleteSession(t, e.srv, e.token, cs.ID()); code/100 != 2 {
		t.Fatalf("DELETE of the session: got %d", code)
	}
	// Checked as the DELETE answers, long before the hold would have ended.
	e.withdrawnUnrun(t, ex)
	webtest.WaitFor(t, 10*time.Second, func() bool { return lt.Sleeping() == 0 }, "the LOW call was not cancelled upstream")
	_ = cs.Close()
	<-held
	<-running
}

// An SSE client that drops its stream ends its session's calls the same way.
func TestDroppingAnSSEStreamCancelsItsCalls(t *testing.T) {
	t.Parallel()
	e, lt := sessionEndEnv(t)
	ctx := context.Background()
	// The stream is the GET of the transport's Connect, made with this context. (The
	// SDK client's Close waits for its calls before it ends the stream.)
	stream, drop := context.WithCancel(ctx)
	defer drop()
	tr := &mcp.SSEClientTransport{Endpoint: e.srv.URL + "/sse", HTTPClient: &http.Client{Transport: bearer{e.token}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "sse-test", Version: "1.0"}, nil).Connect(stream, tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	held := call(ctx, cs, "ut__echo", map[string]any{"message": "gone client"}, "")
	running := call(ctx, cs, "lt__sleep", map[string]any{"ms": 45000}, "")
	ex := e.pending(t, "ut__echo")
	webtest.WaitFor(t, 10*time.Second, func() bool { return lt.Sleeping() == 1 }, "the LOW sleep never reached the upstream")

	drop()
	webtest.WaitFor(t, 20*time.Second, func() bool {
		cur, err := e.srv.Executions.Get(ctx, ex.ID)
		return err == nil && cur.Status != executions.AwaitingApproval
	}, "the held execution still awaits approval after its SSE stream was dropped")
	e.withdrawnUnrun(t, ex)
	webtest.WaitFor(t, 10*time.Second, func() bool { return lt.Sleeping() == 0 }, "the LOW call was not cancelled upstream")
	<-held
	<-running
}

// A stateful client whose held call's POST ends (a crash, a proxy's read timeout: no
// notifications/cancelled, no DELETE) has that call cancelled as if it had said so:
// nothing can resume the stream, and the held execution stayed approvable for a client
// that was gone while the session lived on (30 minutes after its last request).
func TestDroppedCallStreamCancelsItsCall(t *testing.T) {
	t.Parallel()
	e := newHoldEnv(t, &gateway.Options{Hold: time.Minute})
	token := "Bearer " + e.token
	res, body := post(t, e.srv, http.DefaultClient, map[string]string{"Authorization": token})
	session := res.Header.Get("Mcp-Session-Id")
	if res.StatusCode != http.StatusOK || session == "" {
		t.Fatalf("initialize: got %d %s", res.StatusCode, body)
	}
	h := map[string]string{"Authorization": token, "Mcp-Session-Id": session, "Mcp-Protocol-Version": eras[0]}
	send(t, e.srv, http.DefaultClient, http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, h)

	ctx, drop := context.WithCancel(context.Background())
	defer drop()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.srv.URL+"/mcp", strings.NewReader(
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ut__echo","arguments":{"message":"gone client"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range h {
		req.Header.Set(k, v)
	}
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		if res, err := http.DefaultClient.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
	}()
	ex := e.pending(t, "ut__echo")
	drop() // the client's connection goes; nothing more is said
	<-answered
	webtest.WaitFor(t, 30*time.Second, func() bool {
		cur, err := e.srv.Executions.Get(context.Background(), ex.ID)
		return err == nil && cur.Status != executions.AwaitingApproval
	}, "the held execution still awaits approval after its call's stream ended")
	e.withdrawnUnrun(t, ex)
}
