package decide_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/decide"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/risk"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// Who may decide: a person (never a token or nobody) with a role that may approve;
// for HIGH, someone other than the requester as the separation setting says.
func TestCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	a := auth.New(pool, nil)
	d := decide.New(pool, a)
	add := func(name string, r auth.Role) string {
		var id string
		if err := pool.QueryRow(ctx, `INSERT INTO users (username, role, password_hash, last_login_at) VALUES ($1, $2, 'x', now()) RETURNING id`, name, string(r)).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	alice := add("alice", auth.RoleToolUser)
	add("audrey", auth.RoleAuditor) // cannot approve: does not count as someone else
	person := audit.Actor{Kind: audit.ActorUser, ID: alice, Name: "alice"}
	token := audit.Actor{Kind: audit.ActorToken, ID: alice, Name: "alice", TokenID: "t"}
	// fe is the refusal, nil when allowed; NeedsOther says whether someone else may decide.
	type refusal struct{ NeedsOther bool }
	check := func(dec decide.Decision) (decide.Verdict, *refusal) {
		t.Helper()
		v, err := d.Check(ctx, dec)
		if err == nil {
			return v, nil
		}
		if !fault.Is(err, fault.KindForbidden) {
			t.Fatal(err)
		}
		return v, &refusal{NeedsOther: decide.NeedsOther(err)}
	}
	set := func(s decide.Separation) {
		t.Helper()
		if err := db.WithTx(ctx, pool, func(tx pgx.Tx) error { return decide.SetSeparation(ctx, tx, s, "test") }); err != nil {
			t.Fatal(err)
		}
	}
	own := decide.Decision{Actor: person, Role: auth.RoleToolUser, Requester: alice, Level: risk.High}

	if _, fe := check(decide.Decision{Actor: token, Role: auth.RoleAdmin, Level: risk.Medium}); fe == nil {
		t.Error("a token decided")
	}
	if _, fe := check(decide.Decision{Actor: audit.Actor{Kind: audit.ActorAnonymous}, Role: auth.RoleAdmin}); fe == nil {
		t.Error("nobody decided")
	}
	if _, fe := check(decide.Decision{Actor: person, Role: auth.RoleAuditor, Level: risk.Medium}); fe == nil {
		t.Error("an auditor decided")
	}
	// Alone (the auditor cannot approve): auto lets alice approve her own HIGH request.
	if v, fe := check(own); fe != nil || !v.SelfApproved {
		t.Errorf("alone, auto: got %+v, %v; want a self-approval", v, fe)
	}
	set(decide.SeparationAlways)
	if _, fe := check(own); fe == nil || !fe.NeedsOther {
		t.Errorf("alone, always: got %v, want refused, needing another person", fe)
	}
	set(decide.SeparationAuto)
	bob := add("bob", auth.RoleToolManager)
	if _, fe := check(own); fe == nil || !fe.NeedsOther {
		t.Errorf("with bob, auto: got %v, want refused, needing another person", fe)
	}
	if v, fe := check(decide.Decision{Actor: audit.Actor{Kind: audit.ActorUser, ID: bob}, Role: auth.RoleToolManager, Requester: alice, Level: risk.High}); fe != nil || v.SelfApproved {
		t.Errorf("bob approves alice's: got %+v, %v; want allowed, not a self-approval", v, fe)
	}
	if _, fe := check(decide.Decision{Actor: person, Role: auth.RoleToolUser, Requester: alice, Level: risk.Medium}); fe != nil {
		t.Errorf("her own MEDIUM request: %v", fe)
	}
	if _, err := pool.Exec(ctx, `UPDATE users SET disabled_at = now() WHERE id = $1`, bob); err != nil {
		t.Fatal(err)
	}
	if v, fe := check(own); fe != nil || !v.SelfApproved {
		t.Errorf("bob disabled, auto: got %+v, %v; want a self-approval", v, fe)
	}
	// An account nobody ever signed in with (an agent's, used through tokens) does not count.
	if _, err := pool.Exec(ctx, `INSERT INTO users (username, role, password_hash) VALUES ('robot', 'tool_user', 'x')`); err != nil {
		t.Fatal(err)
	}
	if v, fe := check(own); fe != nil || !v.SelfApproved {
		t.Errorf("with a robot that never signed in, auto: got %+v, %v; want a self-approval", v, fe)
	}
	// A vetting run of a tool not enabled yet is allowed, marked self-approved.
	if _, err := pool.Exec(ctx, `UPDATE users SET disabled_at = NULL WHERE id = $1`, bob); err != nil {
		t.Fatal(err)
	}
	vet := own
	vet.Vetting = true
	if v, fe := check(vet); fe != nil || !v.SelfApproved {
		t.Errorf("vetting with bob there: got %+v, %v; want allowed, marked self-approved", v, fe)
	}
	// Always means always: a test of a tool not enabled yet is no exception.
	set(decide.SeparationAlways)
	if _, fe := check(vet); fe == nil || !fe.NeedsOther {
		t.Errorf("vetting with bob there, always: got %v, want refused, needing another person", fe)
	}
	set(decide.SeparationAuto)
	if _, err := pool.Exec(ctx, `UPDATE users SET disabled_at = now() WHERE id = $1`, bob); err != nil {
		t.Fatal(err)
	}
	set(decide.SeparationOff)
	add("carol", auth.RoleAdmin)
	if v, fe := check(own); fe != nil || !v.SelfApproved {
		t.Errorf("off: got %+v, %v; want a self-approval", v, fe)
	}
	if sep, err := d.Separation(ctx, pool); err != nil || sep != decide.SeparationOff {
		t.Errorf("separation: got %q, %v; want off", sep, err)
	}
}
