package builtin_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/tools"
)

// What an API token's call of memory_operations changes is audited as the token's, as
// the call's own tool.call row is, not as its person's session.
func TestMemoryAuditNamesToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	// An admin set it LOW, so a token's call runs without a person's approval.
	tg := srv.App.Enable(t, "builtin__memory_operations")
	low := "low"
	if _, err := srv.App.Tools.Update(ctx, audit.System, tg.ID, tools.Patch{Risk: &low, MayLowerRisk: true, Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	webtest.WaitFor(t, 10*time.Second, func() bool {
		d, err := srv.Router.RiskOf(ctx, "builtin__memory_operations", json.RawMessage(`{"operation":"todo_list"}`))
		return err == nil && d.Level == risk.Low
	}, "the tool's LOW risk in the router")
	ada := srv.CreateUser(t, "ada", auth.RoleToolUser, "ada-password-123")
	srv.Token(t, "ada")
	var tokenID string
	if err := srv.Pool.QueryRow(ctx, `SELECT id FROM api_tokens WHERE user_id = $1`, ada.ID).Scan(&tokenID); err != nil {
		t.Fatal(err)
	}
	agent := audit.Actor{Kind: audit.ActorToken, ID: ada.ID, Name: "ada", TokenID: tokenID, TokenName: "agent"}
	call := func(args string) {
		t.Helper()
		res, err := srv.Router.Call(ctx, router.Call{Tool: "builtin__memory_operations", Arguments: json.RawMessage(args),
			Actor: agent, Role: auth.RoleToolUser, Source: router.SourceGateway, ConversationID: "conv-token"})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", args, err, res)
		}
	}
	call(`{"operation":"store","content":"the staging server is db-2","tags":["staging"]}`)
	call(`{"operation":"todo_add","title":"check db-2"}`)
	call(`{"operation":"manage_todos","action":"write","todos":[{"title":"plan"}]}`)
	var todo string
	if err := srv.Pool.QueryRow(ctx, `SELECT id::text FROM todos WHERE title = 'plan' AND conversation_id = 'conv-token'`).Scan(&todo); err != nil {
		t.Fatal(err)
	}
	call(`{"operation":"todo_complete","id":"` + todo + `"}`)

	for _, action := range []string{"memory.store", "todo.add", "todo.write", "todo.complete"} {
		var kind, id, tok string
		if err := srv.Pool.QueryRow(ctx, `SELECT actor_kind, coalesce(actor_id::text, ''), coalesce(payload->>'token_id', '') FROM audit_log
			WHERE action = $1 AND payload->>'conversation_id' = 'conv-token'`, action).Scan(&kind, &id, &tok); err != nil {
			t.Fatalf("%s: %v", action, err)
		}
		if kind != audit.ActorToken || id != ada.ID || tok != tokenID {
			t.Errorf("%s audited as %s %s (token %q), want the token %s of %s", action, kind, id, tok, tokenID, ada.ID)
		}
	}
}
