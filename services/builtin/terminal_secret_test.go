package builtin_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/router"
)

// A password an agent types at a hidden-input prompt (read -s) with send_input is kept
// in no record: not in the call's usage row, not in its audit rows (its tool.call row's
// arguments and display; terminal.input says hidden input), not in its events.
func TestSendInputPasswordNotRecorded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := lowTerminals(t)
	admin := audit.Actor{Kind: audit.ActorUser, Name: "admin"}
	call := func(args string) *router.Result {
		t.Helper()
		res, err := srv.Router.Call(ctx, router.Call{Tool: terminalTool, Arguments: json.RawMessage(args), Actor: admin, Role: auth.RoleAdmin,
			Source: router.SourceAPI, ConversationID: "conv-pw"})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", args, err, res)
		}
		return res
	}
	var cs struct{ SessionID string }
	_ = json.Unmarshal(call(`{"operation":"create_session"}`).StructuredContent, &cs)
	call(`{"operation":"send_input","sessionId":"` + cs.SessionID + `","input":"read -s pw; echo got-${#pw}\n"}`)
	term := srv.App.Terminals.Get(cs.SessionID)
	webtest.WaitFor(t, 10*time.Second, func() bool { return !term.Echo() }, "read -s turns echo off")

	const password = "tulip-Otter-Pw93"
	call(`{"operation":"send_input","sessionId":"` + cs.SessionID + `","input":"` + password + `\n"}`)
	webtest.WaitFor(t, 10*time.Second, func() bool {
		return testkit.Count(t, srv.Pool, `SELECT count(*) FROM audit_log WHERE action = 'terminal.input' AND target_id = $1
			AND payload->>'input' = '[hidden input]'`, cs.SessionID) == 1 &&
			testkit.Count(t, srv.Pool, `SELECT count(*) FROM tool_usage_logs WHERE request->>'operation' = 'send_input'`) == 2 &&
			testkit.Count(t, srv.Pool, `SELECT count(*) FROM audit_log WHERE action = 'tool.call'
				AND payload->'arguments'->>'operation' = 'send_input'`) == 2
	}, "the password's call recorded")

	like := "%" + password + "%"
	if n := testkit.Count(t, srv.Pool, `SELECT count(*) FROM tool_usage_logs WHERE request::text LIKE $1 OR metadata::text LIKE $1`, like); n != 0 {
		t.Errorf("the password is in %d usage rows", n)
	}
	rows, err := srv.Pool.Query(ctx, `SELECT action, payload::text FROM audit_log WHERE payload::text LIKE $1`, like)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var action, payload string
		if err := rows.Scan(&action, &payload); err != nil {
			t.Fatal(err)
		}
		t.Errorf("the password is in the audit row %s: %s", action, payload)
	}
	rows.Close()
	if n := testkit.Count(t, srv.Pool, `SELECT count(*) FROM events WHERE payload::text LIKE $1`, like); n != 0 {
		t.Errorf("the password is in %d events", n)
	}
}
