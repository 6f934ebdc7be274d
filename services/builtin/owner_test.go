package builtin_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/decide"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/grants"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/router"
)

// ownersFx is a server whose built-in file operations are low risk, the tool users
// alice and bob, and call, which runs one operation as a user in a conversation and
// returns its text and whether it succeeded.
func ownersFx(t *testing.T) (*webtest.Server, auth.User, auth.User, func(u auth.User, conv, op string, args map[string]any) (string, bool)) {
	t.Helper()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	alice := srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	bob := srv.CreateUser(t, "bob", auth.RoleToolUser, "bob-password-1")
	srv.App.Enable(t, "builtin__file_operations")
	srv.App.SetRisk(t, "builtin__file_operations", risk.Low)
	selfApproveHigh(t, srv)
	call := func(u auth.User, conv, op string, args map[string]any) (string, bool) {
		t.Helper()
		args["operation"] = op
		b, _ := json.Marshal(args)
		res, err := srv.Router.Call(context.Background(), router.Call{Tool: "builtin__file_operations", Arguments: b, Actor: actorOf(u),
			Role: auth.RoleToolUser, Source: router.SourceTestPanel, Approval: ownApproval, ConversationID: conv})
		if err != nil {
			t.Fatalf("%s %s: %v", u.Username, op, err)
		}
		return router.TextOf(res.Content), !res.IsError
	}
	return srv, alice, bob, call
}

// ownApproval is a person's approval of their own file call in a page, whatever its
// level: a confirm, and the phrase, which a delete or an overwrite asks for even with the
// tool set low (builtin.ArgumentRisk).
var ownApproval = router.Approval{Confirmed: true, Phrase: router.Phrase("builtin__file_operations")}

// selfApproveHigh turns separation of duties off, so that a person's phrase runs their
// own high-risk call: these tests are about what the tool lets a call reach once it is
// approved, not about who approves it.
func selfApproveHigh(t *testing.T, srv *webtest.Server) {
	t.Helper()
	off := decide.SeparationOff
	if _, err := srv.App.Executions.PatchSettings(context.Background(), audit.System, executions.SettingsPatch{HighSeparation: &off}); err != nil {
		t.Fatal(err)
	}
}

func actorOf(u auth.User) audit.Actor {
	return audit.Actor{Kind: audit.ActorUser, ID: u.ID, Name: u.Username}
}

// A conversation belongs to the first person who calls in it: another person can
// neither use its id nor reach its workspace by path, a listing of the root shows
// each person their own workspaces only, and a plan's preview shows nobody the
// content of a file they may not read. The owner's other conversations read it freely
// and need a grant to write it.
func TestConversationsAreOwned(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, alice, bob, call := ownersFx(t)
	if out, ok := call(alice, "alice-1", "create_file", map[string]any{"filePath": "secret.txt", "content": "alice's secret"}); !ok {
		t.Fatalf("alice writes in her conversation: %s", out)
	}
	secret := filepath.Join(srv.App.Builtin.Root(), "alice-1", "secret.txt")

	// Bob names alice's conversation: refused, whatever the operation.
	if out, ok := call(bob, "alice-1", "read_file", map[string]any{"filePath": "secret.txt"}); ok || !strings.Contains(out, "belongs to another person") {
		t.Fatalf("bob in alice's conversation: %v %s", ok, out)
	}
	// Bob, in his own, reaches for her file by path: refused for reads and writes.
	for _, c := range []struct {
		op   string
		args map[string]any
	}{
		{"read_file", map[string]any{"filePath": secret}},
		{"get_file_info", map[string]any{"filePath": secret}},
		{"list_dir", map[string]any{"path": filepath.Dir(secret)}},
		{"grep_search", map[string]any{"pattern": "secret", "path": filepath.Dir(secret)}},
		{"file_search", map[string]any{"pattern": "*.txt", "path": filepath.Dir(secret)}},
		{"copy_file", map[string]any{"filePath": secret, "newPath": "mine.txt"}},
		{"create_file", map[string]any{"filePath": secret, "content": "bob was here", "overwrite": true}},
	} {
		if out, ok := call(bob, "bob-1", c.op, c.args); ok || !strings.Contains(out, "another person's workspace") {
			t.Errorf("bob's %s of alice's file: %v %s", c.op, ok, out)
		}
	}
	// The root lists each person's own workspaces.
	if out, ok := call(bob, "bob-1", "list_dir", map[string]any{"path": srv.App.Builtin.Root()}); !ok || strings.Contains(out, "alice-1") || !strings.Contains(out, "bob-1/") {
		t.Errorf("bob's listing of the root: %v %q", ok, out)
	}
	// Alice's other conversation reads her file, and needs a grant to change it.
	if out, ok := call(alice, "alice-2", "read_file", map[string]any{"filePath": secret}); !ok || !strings.Contains(out, "alice's secret") {
		t.Errorf("alice reads her file from another conversation: %v %s", ok, out)
	}
	if out, ok := call(alice, "alice-2", "create_file", map[string]any{"filePath": secret, "content": "x", "overwrite": true}); ok || !strings.Contains(out, "authorize_operation") {
		t.Errorf("alice writes her other conversation's file without a grant: %v %s", ok, out)
	}

	// A plan's preview: alice sees her overwrite's diff; bob's plan on her file shows
	// nothing of it (and would be refused when it runs).
	steps := []executions.PreviewCall{{Tool: "builtin__file_operations.create_file",
		Arguments: json.RawMessage(`{"operation":"create_file","filePath":` + jsonString(secret) + `,"content":"new","overwrite":true}`)}}
	ps, err := srv.App.Previewer().PreviewPlan(ctx, "alice-1", alice.ID, steps)
	if err != nil || len(ps) != 1 || ps[0] == nil || !strings.Contains(ps[0].Diff, "-alice's secret") {
		t.Fatalf("alice's preview: %v %+v", err, ps)
	}
	for _, conv := range []string{"bob-1", "alice-1"} {
		ps, err = srv.App.Previewer().PreviewPlan(ctx, conv, bob.ID, steps)
		if err != nil || len(ps) != 1 || ps[0] != nil {
			t.Fatalf("bob's preview in %s: %v %+v", conv, err, ps)
		}
	}
}

// A removed person's workspace is nobody's to open: not an unclaimed one that a grant
// (the caller's own say-so) would open, so reads and writes are refused, grant or not.
func TestRemovedPersonsWorkspace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, alice, bob, call := ownersFx(t)
	if out, ok := call(alice, "proj", "create_file", map[string]any{"filePath": ".env", "content": "ALICE_KEY=1"}); !ok {
		t.Fatalf("alice writes in her conversation: %s", out)
	}
	env := filepath.Join(srv.App.Builtin.Root(), "proj", ".env")
	if _, err := srv.Pool.Exec(ctx, `DELETE FROM users WHERE id = $1`, alice.ID); err != nil {
		t.Fatal(err)
	}
	// Bob approves his own grants for it: still refused.
	for _, op := range []string{"file_operations.read_file", "file_operations.create_file"} {
		if _, err := srv.App.Grants.Create(ctx, grants.Spec{ConversationID: "bob-1", Operation: op, By: actorOf(bob)}); err != nil {
			t.Fatal(err)
		}
	}
	if out, ok := call(bob, "bob-1", "read_file", map[string]any{"filePath": env}); ok || !strings.Contains(out, "removed") {
		t.Fatalf("bob reads a removed person's file: %v %s", ok, out)
	}
	if out, ok := call(bob, "bob-1", "create_file", map[string]any{"filePath": env, "content": "x", "overwrite": true}); ok || !strings.Contains(out, "removed") {
		t.Fatalf("bob writes a removed person's file: %v %s", ok, out)
	}
	if out, ok := call(bob, "proj", "read_file", map[string]any{"filePath": ".env"}); ok || !strings.Contains(out, "removed") {
		t.Fatalf("bob in a removed person's conversation: %v %s", ok, out)
	}
}

func jsonString(s string) string { b, _ := json.Marshal(s); return string(b) }
