package gateway_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/gateway"
)

// A 2026-07-28 call that comes back with its requestState once too often (or too late)
// is pointed at its execution, which may still be approved, as a hold's end is: told to
// call the tool again, the agent would ask for a second approval, and the tool could
// run twice.
func TestStaleRequestStateNamesExecution(t *testing.T) {
	t.Parallel()
	e := newHoldEnv(t, &gateway.Options{Hold: 300 * time.Millisecond})
	ctx := context.Background()
	cs, _, _ := e.elicitingClient(t, eras[1], false)
	args := map[string]any{"message": "stale"}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ut__echo", Arguments: args})
	if err != nil || !res.NeedsInput() || res.RequestState == "" {
		t.Fatalf("first call: %v %+v", err, res)
	}
	ex := e.pending(t, "ut__echo")
	retry := &mcp.CallToolParams{Name: "ut__echo", Arguments: args, RequestState: res.RequestState,
		InputResponses: mcp.InputResponseMap{approvalID: &mcp.ElicitResult{Action: "accept"}}}
	for _, which := range []string{"the retry (held, undecided)", "the same state again"} {
		r, err := cs.CallTool(ctx, retry)
		if err != nil {
			t.Fatalf("%s: %v", which, err)
		}
		var p gateway.Pending
		b, _ := json.Marshal(r.StructuredContent)
		_ = json.Unmarshal(b, &p)
		if !r.IsError || p.ExecutionID != ex.ID || p.Status != "awaiting_approval" ||
			!strings.Contains(text(r), gateway.AwaitTool) || !strings.Contains(text(r), ex.ID) {
			t.Fatalf("%s: %q %+v, want it pending on execution %s", which, text(r), r.StructuredContent, ex.ID)
		}
	}
	if n := e.srv.App.Count(t, `SELECT count(*) FROM executions WHERE requested_by = $1`, e.tina.ID); n != 1 {
		t.Fatalf("%d executions, want the one call's", n)
	}
	// Decided meanwhile, the stale state answers with the outcome, as a wait would.
	if _, err := e.srv.Executions.Confirm(ctx, e.admin, ex.ID, "", ""); err != nil {
		t.Fatal(err)
	}
	webtest.WaitFor(t, 10*time.Second, func() bool {
		r, err := cs.CallTool(ctx, retry)
		return err == nil && !r.IsError && text(r) == "Echo: stale"
	}, "the stale state never answered with the approved call's result")
}
