package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/gateway"
)

// A held call whose execution cannot be read again (here: the executions' pool closed
// under it) answers pending on that execution, not a JSON-RPC error that names none:
// the execution still waits for a decision, and an agent told only that the call
// failed would call again and ask for a second approval.
func TestHeldExecutionUnreadIsPending(t *testing.T) {
	t.Parallel()
	e := newHoldEnv(t, nil)
	ctx := context.Background()
	pool, err := pgxpool.NewWithConfig(ctx, e.srv.Pool.Config().Copy())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	exec, err := executions.New(pool, e.srv.Router, e.srv.Tools, &executions.Options{Keys: e.srv.Keys})
	if err != nil {
		t.Fatal(err)
	}
	g := gateway.New(e.srv.Router, e.srv.Auth, &gateway.Options{Executions: exec, Bus: e.srv.Bus, Hold: 30 * time.Second})
	hs := httptest.NewServer(g)
	t.Cleanup(func() { g.Close(); hs.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "unread-test", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: hs.URL, HTTPClient: &http.Client{Transport: bearer{e.token}}},
		&mcp.ClientSessionOptions{ProtocolVersion: eras[0]})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	out := call(ctx, cs, "ut__echo", map[string]any{"message": "unread"}, "")
	ex := e.pending(t, "ut__echo")
	time.Sleep(300 * time.Millisecond) // held: past its first read
	pool.Close()
	// Any event of the execution makes the hold read it again.
	if _, err := e.srv.Executions.Reject(ctx, e.admin, ex.ID, "to wake the hold"); err != nil {
		t.Fatal(err)
	}
	res := wait(t, out)
	var p gateway.Pending
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &p)
	if !res.IsError || p.ExecutionID != ex.ID || !strings.Contains(text(res), gateway.AwaitTool) || !strings.Contains(text(res), ex.ID) {
		t.Fatalf("the held call whose execution could not be read: %q %+v, want it pending on %s", text(res), res.StructuredContent, ex.ID)
	}
}
