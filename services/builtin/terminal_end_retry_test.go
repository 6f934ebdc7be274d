package builtin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/router"
)

// A terminal ended because its owner lost the tool, whose record cannot be written at
// that moment (here a lock held on it past the write's 5 s), is recorded and audited once
// the database lets it: the end's audit row was lost, the sweep fixing only the record.
func TestAuditedEndWrittenAfterAFailedWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := lowTerminals(t)
	toolID := srv.App.ToolID(t, terminalTool)
	carol := srv.CreateUser(t, "carol", auth.RoleToolUser, "carol-password-1")
	res, err := srv.Router.Call(ctx, router.Call{Tool: terminalTool,
		Arguments: json.RawMessage(`{"operation":"run_command","command":"sleep 600","background":true,"timeout":3600}`),
		Actor:     audit.Actor{Kind: audit.ActorUser, ID: carol.ID, Name: carol.Username}, Role: carol.Role,
		Source: router.SourceAPI, ConversationID: "conv-carol"})
	if err != nil || res.IsError {
		t.Fatalf("run_command: %v %+v", err, res)
	}
	var out struct{ SessionID string }
	_ = json.Unmarshal(res.StructuredContent, &out)
	webtest.WaitFor(t, 10*time.Second, func() bool {
		return srv.App.Count(t, `SELECT count(*) FROM terminals WHERE id = $1`, out.SessionID) == 1
	}, "the command's record")

	// The record is locked while the tool is refused to carol: the end's write waits
	// out its 5 s and fails.
	tx, err := srv.App.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // committed below
	if _, err := tx.Exec(ctx, `SELECT 1 FROM terminals WHERE id = $1 FOR UPDATE`, out.SessionID); err != nil {
		t.Fatal(err)
	}
	api := webtest.API{T: t, Srv: srv, C: srv.Login(t, "admin", webtest.AdminPassword)}
	api.JSON(http.MethodPut, "/api/v1/tools/"+toolID+"/permissions", map[string]any{"username": "carol", "can_use": false}, http.StatusOK, nil)
	ts := srv.App.Terminals
	webtest.WaitFor(t, 20*time.Second, func() bool {
		term := ts.Get(out.SessionID)
		return term == nil || term.Exited()
	}, "carol's command ends")
	time.Sleep(6 * time.Second) // past the first write's 5 s
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	webtest.WaitFor(t, 30*time.Second, func() bool {
		return srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'terminal.end' AND target_id = $1
			AND payload->>'ended_reason' = 'owner_revoked'`, out.SessionID) == 1
	}, "the end audited once the record could be written")
	if n := srv.App.Count(t, `SELECT count(*) FROM terminals WHERE id = $1 AND ended_reason = 'owner_revoked'`, out.SessionID); n != 1 {
		t.Error("the record does not say why the command ended")
	}
	time.Sleep(time.Second)
	if n := srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'terminal.end' AND target_id = $1`, out.SessionID); n != 1 {
		t.Errorf("the end audited %d times, want once", n)
	}
}
