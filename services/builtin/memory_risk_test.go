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
)

// memory_operations as discovered is medium, but the router rates each call by what it
// does: reads are low (the caller's own notes), delete high (a note forgotten for good,
// in every conversation of its person), and a plain delete confirmed without the phrase
// is refused and forgets nothing. An administrator's level is never lowered for reads.
func TestMemoryOperationLevelsThroughRouter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	srv.App.Enable(t, "builtin__memory_operations")
	check := func(when, args string, want risk.Level, source string) {
		t.Helper()
		webtest.WaitFor(t, 10*time.Second, func() bool {
			d, err := srv.Router.RiskOf(ctx, "builtin__memory_operations", json.RawMessage(args))
			return err == nil && d.Level == want && d.Source == source
		}, when+": "+args+" at "+string(want)+" ("+source+")")
	}
	check("as discovered", `{"operation":"search","query":"x"}`, risk.Low, risk.SourceOperation)
	check("as discovered", `{"operation":"list"}`, risk.Low, risk.SourceOperation)
	check("as discovered", `{"operation":"manage_todos","action":"read"}`, risk.Low, risk.SourceOperation)
	check("as discovered", `{"operation":"store","content":"x"}`, risk.Medium, risk.SourceAnnotations)
	check("as discovered", `{"operation":"manage_todos","action":"write","todos":[]}`, risk.Medium, risk.SourceAnnotations)
	check("as discovered", `{"operation":"delete","id":"42"}`, risk.High, risk.SourceArguments)

	alice := srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	call := func(args string, a router.Approval) (string, error) {
		res, err := srv.Router.Call(ctx, router.Call{Tool: "builtin__memory_operations", Arguments: json.RawMessage(args),
			Actor: audit.Actor{Kind: audit.ActorUser, ID: alice.ID, Name: "alice"}, Role: auth.RoleToolUser,
			Source: router.SourceTestPanel, ConversationID: "conv-1", Approval: a})
		if err == nil && res.IsError {
			t.Fatalf("%s: %+v", args, res)
		}
		if err != nil {
			return "", err
		}
		return router.TextOf(res.Content), nil
	}
	if _, err := call(`{"operation":"store","content":"the vault opens with 4711"}`, router.Approval{Confirmed: true}); err != nil {
		t.Fatal(err)
	}
	var id string
	if err := srv.Pool.QueryRow(ctx, `SELECT id::text FROM memories WHERE user_id = $1`, alice.ID).Scan(&id); err != nil {
		t.Fatal(err)
	}
	// A read runs unasked.
	if _, err := call(`{"operation":"list"}`, router.Approval{}); err != nil {
		t.Fatalf("list without asking: %v", err)
	}
	// A confirm is not enough to forget the note.
	if _, err := call(`{"operation":"delete","id":"`+id+`"}`, router.Approval{Confirmed: true}); err == nil {
		t.Fatal("delete ran on a confirm alone")
	}
	if n := srv.App.Count(t, `SELECT count(*) FROM memories WHERE id::text = $1`, id); n != 1 {
		t.Fatalf("the note after a refused delete: %d rows", n)
	}

	// Set medium by an administrator, reads ask again; delete stays high.
	srv.App.SetRisk(t, "builtin__memory_operations", risk.Medium)
	check("set medium", `{"operation":"list"}`, risk.Medium, risk.SourceOverride)
	check("set medium", `{"operation":"delete","id":"42"}`, risk.High, risk.SourceArguments)
	srv.App.SetRisk(t, "builtin__memory_operations", risk.Low)
	check("set low", `{"operation":"delete","id":"42"}`, risk.High, risk.SourceArguments)
}
