package gateway_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/gateway"
)

// pendingOf is the Pending of a result that says its call still waits.
func pendingOf(t *testing.T, res *mcp.CallToolResult) gateway.Pending {
	t.Helper()
	v := res.StructuredContent
	if v == nil {
		v = res.Meta[gateway.PendingMeta]
	}
	var p gateway.Pending
	if b, _ := json.Marshal(v); !res.IsError || json.Unmarshal(b, &p) != nil || p.ExecutionID == "" {
		t.Fatalf("not a pending result: %+v %q", res, text(res))
	}
	return p
}

// A user holds at most MaxAwaiting toolwarden__await_execution waits open at once; one
// past it answers at once with the pending shape (or the outcome, once there is one),
// and another user's waits are not counted against them.
func TestAwaitWaitsCapped(t *testing.T) {
	t.Parallel()
	e := newHoldEnv(t, &gateway.Options{Hold: 30 * time.Second, MaxAwaiting: 1})
	ctx := context.Background()
	cs, progress := e.client(t, eras[0])
	quick := mcp.Meta{gateway.HoldMeta: 0.1}
	ask := func(cs *mcp.ClientSession, msg string) gateway.Pending {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ut__echo", Arguments: map[string]any{"message": msg}, Meta: quick})
		if err != nil {
			t.Fatal(err)
		}
		return pendingOf(t, res)
	}
	first, second := ask(cs, "first"), ask(cs, "second")

	open := call(ctx, cs, gateway.AwaitTool, map[string]any{"execution_id": first.ExecutionID}, "await-1")
	deadline := time.Now().Add(10 * time.Second)
	for len(progress()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first wait never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	start := time.Now()
	res := wait(t, call(ctx, cs, gateway.AwaitTool, map[string]any{"execution_id": second.ExecutionID}, ""))
	if p := pendingOf(t, res); p.Status != "awaiting_approval" || p.ExecutionID != second.ExecutionID ||
		!strings.HasPrefix(p.ApproveURL, e.srv.URL+"/executions/") || !strings.Contains(text(res), "already open") {
		t.Fatalf("a wait past the cap: %+v %q", p, text(res))
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("a wait past the cap took %s, want an answer at once", d)
	}

	// Another user's wait is theirs.
	e.srv.CreateUser(t, "otto", auth.RoleToolUser, password)
	otto := mustConnect(t, e.srv, e.srv.Token(t, "otto"), eras[1])
	theirs := ask(otto, "otto's")
	ottoWait := call(ctx, otto, gateway.AwaitTool, map[string]any{"execution_id": theirs.ExecutionID}, "")

	// At the cap, a decided execution's wait answers its outcome.
	if _, err := e.srv.Executions.Confirm(ctx, e.admin, second.ExecutionID, "", ""); err != nil {
		t.Fatal(err)
	}
	var out *mcp.CallToolResult
	deadline = time.Now().Add(20 * time.Second)
	for out == nil || out.IsError {
		if time.Now().After(deadline) {
			t.Fatalf("a wait past the cap on a decided execution: %+v %q", out, text(out))
		}
		out = wait(t, call(ctx, cs, gateway.AwaitTool, map[string]any{"execution_id": second.ExecutionID}, ""))
		if out.IsError {
			time.Sleep(100 * time.Millisecond) // approved, still running
		}
	}
	if text(out) != "Echo: second" {
		t.Fatalf("a wait past the cap on a run execution: %q", text(out))
	}

	if _, err := e.srv.Executions.Confirm(ctx, e.admin, first.ExecutionID, "", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.srv.Executions.Confirm(ctx, e.admin, theirs.ExecutionID, "", ""); err != nil {
		t.Fatal(err)
	}
	if res := wait(t, open); res.IsError || text(res) != "Echo: first" {
		t.Fatalf("the wait within the cap: %+v %q", res, text(res))
	}
	if res := wait(t, ottoWait); res.IsError || text(res) != "Echo: otto's" {
		t.Fatalf("another user's wait: %+v %q", res, text(res))
	}
}
