package builtin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/router"
)

// Cutting a person off from terminal_operations without disabling their account ends
// what they left running: a PTY session busy with a loop (its idle timeout never comes)
// and a background command of an hour, each recorded and audited as ended by the system
// because its owner may no longer use the tool. Three ways: the tool disabled, the
// person's role changed to one without tool.use, the tool refused to them alone. In the
// last two, another person's terminal keeps running.
func TestRevokingTerminalAccessEndsTerminals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// revoke cuts carol off, as the administrator api; toolID is the terminal tool's.
		revoke func(api webtest.API, carol auth.User, toolID string)
		// othersRun: dave's terminal is unaffected (the tool is still his to use).
		othersRun bool
	}{
		{"tool disabled", func(api webtest.API, _ auth.User, toolID string) {
			api.JSON(http.MethodPost, "/api/v1/tools/"+toolID+"/disable", nil, http.StatusOK, nil)
		}, false},
		{"role changed", func(api webtest.API, carol auth.User, _ string) {
			api.JSON(http.MethodPatch, "/api/v1/users/"+carol.ID, map[string]any{"role": "auditor"}, http.StatusOK, nil)
		}, true},
		{"refused to the person", func(api webtest.API, _ auth.User, toolID string) {
			api.JSON(http.MethodPut, "/api/v1/tools/"+toolID+"/permissions", map[string]any{"username": "carol", "can_use": false}, http.StatusOK, nil)
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			srv := lowTerminals(t)
			toolID := srv.App.ToolID(t, terminalTool)
			carol := srv.CreateUser(t, "carol", auth.RoleToolUser, "carol-password-1")
			dave := srv.CreateUser(t, "dave", auth.RoleToolUser, "dave-password-12")
			call := func(who auth.User, conv, args string) string {
				t.Helper()
				res, err := srv.Router.Call(ctx, router.Call{Tool: terminalTool, Arguments: json.RawMessage(args),
					Actor: audit.Actor{Kind: audit.ActorUser, ID: who.ID, Name: who.Username}, Role: who.Role,
					Source: router.SourceAPI, ConversationID: conv})
				if err != nil || res.IsError {
					t.Fatalf("%s: %v %+v", args, err, res)
				}
				var out struct{ SessionID string }
				_ = json.Unmarshal(res.StructuredContent, &out)
				return out.SessionID
			}
			pty := call(carol, "conv-carol", `{"operation":"create_session"}`)
			call(carol, "conv-carol", `{"operation":"send_input","sessionId":"`+pty+`","input":"while :; do echo tick; sleep 1; done\n"}`)
			bg := call(carol, "conv-carol", `{"operation":"run_command","command":"sleep 600","background":true,"timeout":3600}`)
			other := call(dave, "conv-dave", `{"operation":"run_command","command":"sleep 600","background":true,"timeout":3600}`)
			ts := srv.App.Terminals
			webtest.WaitFor(t, 10*time.Second, func() bool {
				data, _, _ := ts.Get(pty).Output(0)
				return strings.Contains(string(data), "tick")
			}, "carol's session runs its loop")

			tc.revoke(webtest.API{T: t, Srv: srv, C: srv.Login(t, "admin", webtest.AdminPassword)}, carol, toolID)

			ended := []string{pty, bg}
			webtest.WaitFor(t, 20*time.Second, func() bool {
				for _, id := range ended {
					if term := ts.Get(id); term != nil && !term.Exited() {
						return false
					}
				}
				return true
			}, "carol's terminals end")
			if data, _, _ := ts.Get(pty).Output(0); !strings.Contains(string(data), "[ended: carol may no longer use terminal_operations]") {
				t.Errorf("the session's output does not say why it ended: %q", data)
			}
			webtest.WaitFor(t, 20*time.Second, func() bool {
				return srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'terminal.end' AND actor_kind = 'system'
					AND target_id = ANY($1) AND payload->>'reason' = 'the owner may no longer use terminal_operations'
					AND payload->>'owner_id' = $2`, ended, carol.ID) == len(ended)
			}, "each end audited as the system's, because carol may no longer use the tool")
			if n := srv.App.Count(t, `SELECT count(*) FROM terminals WHERE id = ANY($1) AND ended_reason = 'owner_revoked'`, ended); n != len(ended) {
				t.Fatalf("%d of %d terminals recorded as ended for the revoked owner", n, len(ended))
			}
			if !tc.othersRun {
				return
			}
			// Past the second look (revokeRecheck) too.
			time.Sleep(6 * time.Second)
			if term := ts.Get(other); term == nil || term.Exited() {
				t.Fatalf("dave's command ended with carol's: %v", term)
			}
		})
	}
}
