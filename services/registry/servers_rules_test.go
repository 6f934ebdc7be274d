package registry_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/registry"
)

// roleActors adds the users boss (admin), mgr (tool manager) and bob (tool user), and
// returns the actor of kind named name.
func (f *fixture) roleActors() func(kind, name string) audit.Actor {
	f.t.Helper()
	users := map[string]string{} // username → id
	for name, role := range map[string]string{"boss": "admin", "mgr": "tool_manager", "bob": "tool_user"} {
		var id string
		if err := f.pool.QueryRow(f.ctx, `INSERT INTO users (username, role, password_hash) VALUES ($1, $2, 'x') RETURNING id::text`,
			name, role).Scan(&id); err != nil {
			f.t.Fatal(err)
		}
		users[name] = id
	}
	return func(kind, name string) audit.Actor { return audit.Actor{Kind: kind, ID: users[name], Name: name} }
}

// Deleting a server, directly or by an import that prunes it, removes its tools'
// per-user rules with them. A refusal among them is removed only by an actor who may
// set the rules (users.manage, signed in, or the system); whoever deletes, each removed
// rule is audited as tool.permission.
func TestDeleteServerUserRules(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	as := f.roleActors()
	f.create(stdioSpec("keep"))
	granted, gone := f.create(stdioSpec("granted")), f.create(stdioSpec("gone"))
	f.discover(granted.ID, discovery("connect", threeTools()...))
	f.discover(gone.ID, discovery("connect", threeTools()...))
	gt, tl := f.toolsByName(granted.ID), f.toolsByName(gone.ID)
	f.exec(`INSERT INTO user_tool_permissions (user_id, tool_id, can_use) VALUES ($1, $2, true), ($3, $4, false), ($1, $5, true)`,
		as("", "bob").ID, gt["echo"].ID, as("", "bob").ID, tl["echo"].ID, tl["add"].ID)
	rules := func() int { return f.count(`SELECT count(*) FROM user_tool_permissions`) }

	// Grants only: taking them away widens nobody's access, so a tool manager may.
	if err := f.reg.DeleteServer(f.ctx, as(audit.ActorUser, "mgr"), granted.ID); err != nil {
		t.Fatalf("tool manager deleting a server with grants only: %v", err)
	}
	if n := rules(); n != 2 {
		t.Fatalf("after deleting granted: got %d rules, want 2", n)
	}

	wantRefused := func(who string, err error, say string) {
		t.Helper()
		var fe *fault.Error
		if !errors.As(err, &fe) || fe.Kind != fault.KindConflict || fe.Code != registry.CodeUserRules ||
			!strings.Contains(fe.Message, "1 per-user rule") || !strings.Contains(fe.Message, "bob on gone__echo") ||
			!strings.Contains(fe.Message, say) {
			t.Errorf("%s: got %v, want a %s conflict naming bob's refusal and saying %q", who, err, registry.CodeUserRules, say)
		}
	}
	wantRefused("tool manager", f.reg.DeleteServer(f.ctx, as(audit.ActorUser, "mgr"), gone.ID), "only an administrator")
	wantRefused("admin's token", f.reg.DeleteServer(f.ctx, as(audit.ActorToken, "boss"), gone.ID), "sign in")
	wantRefused("anonymous", f.reg.DeleteServer(f.ctx, audit.Actor{Kind: audit.ActorAnonymous}, gone.ID), "only an administrator")
	// Planned by the administrator (a tool manager's plan has an error: see
	// TestPrunePlanRefusesWhatApplyWouldRefuse); applying checks again, whoever applies.
	plan := f.planAs(as(audit.ActorUser, "boss"), `version: 1
servers:
  - name: keep
    type: stdio
    description: local files
    command: npx
    args: [-y, '@example/server']
    env:
      API_KEY: null
    enabled: true
`)
	if plan.Count(registry.PlanDelete) != 1 || plan.HasErrors() {
		t.Fatalf("plan: %s, want gone deleted", plan)
	}
	_, err := f.reg.ApplyImport(f.ctx, as(audit.ActorUser, "mgr"), plan)
	wantRefused("tool manager's import", err, "only an administrator")
	if n := rules(); n != 2 || f.count(`SELECT count(*) FROM mcp_servers WHERE id = $1`, gone.ID) != 1 {
		t.Fatalf("after refused deletes: got %d rules, want 2, and the server kept", n)
	}

	res, err := f.reg.ApplyImport(f.ctx, as(audit.ActorUser, "boss"), plan)
	if err != nil || len(res.Deleted) != 1 {
		t.Fatalf("admin's import: got %+v, %v; want gone deleted", res, err)
	}
	if n := rules(); n != 0 {
		t.Fatalf("after the admin's import: got %d rules, want 0", n)
	}
	got := f.auditPayloads("tool.permission")
	want := []struct {
		because string
		user    string
		removed bool
	}{{"server.delete", "bob", true}, {"server.import.delete", "bob", true}, {"server.import.delete", "bob", false}}
	if len(got) != len(want) {
		t.Fatalf("got tool.permission rows %v, want %d", got, len(want))
	}
	// Within one deletion the rows follow the tools' names: add before echo.
	for i, w := range want {
		if got[i]["because"] != w.because || got[i]["user"] != w.user || got[i]["removed_rule"] != w.removed || got[i]["can_use"] != nil {
			t.Errorf("row %d: got %v, want %s removing %s's rule (can_use %v)", i, got[i], w.because, w.user, w.removed)
		}
	}
	if del := f.auditPayloads("server.import.delete"); len(del) != 1 || del[0]["rules_removed"] != float64(2) {
		t.Errorf("server.import.delete rows %v, want one with rules_removed 2", del)
	}
}
