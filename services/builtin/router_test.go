package builtin_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/router"
)

// file_operations through the router: the dotted name chooses the operation, the call
// works in its conversation's workspace, and the audit row and the call's events say
// what it does in a short line (display).
func TestFileOperationsThroughRouter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	srv.App.Enable(t, "builtin__file_operations")
	srv.App.SetRisk(t, "builtin__file_operations", risk.Low)
	admin := audit.Actor{Kind: audit.ActorUser, Name: "admin"}
	res, err := srv.Router.Call(ctx, router.Call{Tool: "builtin__file_operations.create_file",
		Arguments: json.RawMessage(`{"filePath":"docs/notes.txt","content":"hello"}`),
		Actor:     admin, Role: auth.RoleAdmin, Source: router.SourceTestPanel, Approval: router.Approval{Confirmed: true}, ConversationID: "conv-1"})
	if err != nil || res.IsError {
		t.Fatalf("create_file: %v %+v", err, res)
	}
	if b, err := os.ReadFile(filepath.Join(srv.App.Builtin.Root(), "conv-1", "docs", "notes.txt")); err != nil || string(b) != "hello" {
		t.Fatalf("the file: %q %v", b, err)
	}
	if n := srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'tool.call' AND payload->>'call_id' = $1
		AND payload->>'display' = 'Creating file notes.txt'`, res.CallID); n != 1 {
		t.Fatalf("audit rows with the display line: %d", n)
	}
	testkit.WaitFor(t, 10*time.Second, func() bool {
		return srv.App.Count(t, `SELECT count(*) FROM events WHERE topic = 'calls' AND payload->>'call_id' = $1
			AND payload->>'display' = 'Creating file notes.txt'`, res.CallID) > 0
	}, "no call event with the display line")
}
