package tools_test

import (
	"testing"

	"github.com/toolwarden/toolwarden/services/audit"
)

// A rule for a username typed with capitals (or spaces) is for the user who signs in
// with it: login lower-cases names (auth.NormalizeUsername), and so does the rule.
func TestPermissionForUsernameAsTyped(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tool := f.tool(toolSpec{server: f.server("srv", true), name: "echo"})
	bobID := f.str(`INSERT INTO users (username, role, password_hash) VALUES ('bob', 'tool_user', 'x') RETURNING id::text`)
	admin := audit.Actor{Kind: audit.ActorUser, Name: "admin"}

	no := false
	if err := f.svc.SetPermission(f.ctx, admin, tool, "Bob", &no); err != nil {
		t.Fatalf(`the rule for "Bob": %v`, err)
	}
	perms, err := f.svc.UsePermissions(f.ctx, bobID)
	if err != nil {
		t.Fatal(err)
	}
	if can, ok := perms[tool]; !ok || can {
		t.Fatalf("bob's rules: %v, want the tool refused", perms)
	}
	if got := f.str(`SELECT payload->>'user' FROM audit_log WHERE action = 'tool.permission'`); got != "bob" {
		t.Fatalf("audited for user %q, want bob", got)
	}
	// Back to the role's rule, the name typed another way.
	if err := f.svc.SetPermission(f.ctx, admin, tool, " BOB ", nil); err != nil {
		t.Fatalf(`removing the rule for " BOB ": %v`, err)
	}
	if n := f.count(`SELECT count(*) FROM user_tool_permissions WHERE user_id = $1`, bobID); n != 0 {
		t.Fatalf("%d rules left for bob", n)
	}
}
