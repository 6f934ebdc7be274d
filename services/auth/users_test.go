package auth_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/fault"
)

func TestCreateUserValidation(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	const okPW = "a long enough password"
	for _, tc := range []struct {
		name   string
		in     auth.NewUser
		fields []string // the fields with problems; every other field must have none
	}{
		{"empty username", auth.NewUser{Username: "", Role: auth.RoleGuest, Password: okPW}, []string{"username"}},
		{"blank username", auth.NewUser{Username: "   ", Role: auth.RoleGuest, Password: okPW}, []string{"username"}},
		{"space inside", auth.NewUser{Username: "alice smith", Role: auth.RoleGuest, Password: okPW}, []string{"username"}},
		{"leading dash", auth.NewUser{Username: "-alice", Role: auth.RoleGuest, Password: okPW}, []string{"username"}},
		{"leading dot", auth.NewUser{Username: ".alice", Role: auth.RoleGuest, Password: okPW}, []string{"username"}},
		{"at sign", auth.NewUser{Username: "alice@example.com", Role: auth.RoleGuest, Password: okPW}, []string{"username"}},
		{"non-ASCII", auth.NewUser{Username: "zoë", Role: auth.RoleGuest, Password: okPW}, []string{"username"}},
		{"49 characters", auth.NewUser{Username: strings.Repeat("a", 49), Role: auth.RoleGuest, Password: okPW}, []string{"username"}},
		{"no role", auth.NewUser{Username: "alice", Password: okPW}, []string{"role"}},
		{"unknown role", auth.NewUser{Username: "alice", Role: "root", Password: okPW}, []string{"role"}},
		{"role in capitals", auth.NewUser{Username: "alice", Role: "Admin", Password: okPW}, []string{"role"}},
		{"short password", auth.NewUser{Username: "alice", Role: auth.RoleGuest, Password: "elevenchars"}, []string{"password"}},
		{"password is the username", auth.NewUser{Username: "administrator", Role: auth.RoleGuest, Password: " Administrator "}, []string{"password"}},
		{"password too long", auth.NewUser{Username: "alice", Role: auth.RoleGuest, Password: strings.Repeat("p", auth.MaxPasswordLength+1)}, []string{"password"}},
		{"display name too long", auth.NewUser{Username: "alice", DisplayName: strings.Repeat("d", 101), Role: auth.RoleGuest, Password: okPW}, []string{"display_name"}},
		{"everything wrong", auth.NewUser{Username: "Not Valid!", Role: "boss", Password: "short"}, []string{"username", "role", "password"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, pw, err := f.svc.CreateUser(f.ctx, audit.System, tc.in)
			ve := fieldErr(t, err)
			if u.ID != "" || pw != "" {
				t.Errorf("got user %+v and password %q, want neither", u, pw)
			}
			for _, field := range []string{"username", "display_name", "role", "password"} {
				want := false
				for _, w := range tc.fields {
					want = want || w == field
				}
				if got := ve.For(field) != ""; got != want {
					t.Errorf("problem with %q: got %v (%q), want %v", field, got, ve.For(field), want)
				}
			}
		})
	}
	if n := f.count(`SELECT count(*) FROM users`); n != 0 {
		t.Errorf("users after invalid input: got %d, want 0", n)
	}
	f.verifyAudit(0)
}

func TestCreateUser(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	admin := audit.Actor{Kind: audit.ActorUser, ID: "00000000-0000-4000-8000-00000000000a", Name: "root"}
	u, generated, err := f.svc.CreateUser(f.ctx, admin, auth.NewUser{Username: " Alice.Smith ", DisplayName: "  Alice Smith ", Role: auth.RoleAuditor, Password: testPassword})
	if err != nil {
		t.Fatalf("CreateUser: %v", err)
	}
	if generated != "" {
		t.Errorf("generated password: got %q, want none when one was given", generated)
	}
	if u.ID == "" || u.Username != "alice.smith" || u.DisplayName != "Alice Smith" || u.Role != auth.RoleAuditor || u.Disabled() || u.LastLoginAt != nil {
		t.Errorf("user: got %+v, want alice.smith the auditor, enabled, never signed in", u)
	}
	if ok, err := auth.VerifyPassword(u.PasswordHash, testPassword); err != nil || !ok {
		t.Errorf("stored hash: got %v, %v verifying the password; want true", ok, err)
	}
	for _, name := range []string{"alice.smith", "ALICE.SMITH ", " Alice.Smith"} {
		got, err := f.svc.GetUserByName(f.ctx, name)
		if err != nil || got.ID != u.ID {
			t.Errorf("GetUserByName(%q): got %+v, %v; want alice.smith", name, got, err)
		}
	}
	if got, err := f.svc.GetUser(f.ctx, u.ID); err != nil || got.Username != "alice.smith" {
		t.Errorf("GetUser: got %+v, %v; want alice.smith", got, err)
	}
	for _, id := range []string{"00000000-0000-4000-8000-000000000000", "not-a-uuid", ""} {
		if _, err := f.svc.GetUser(f.ctx, id); !errors.Is(err, auth.ErrNotFound) {
			t.Errorf("GetUser(%q): got %v, want ErrNotFound", id, err)
		}
	}
	if _, err := f.svc.GetUserByName(f.ctx, "bob"); !errors.Is(err, auth.ErrNotFound) {
		t.Errorf("GetUserByName(bob): got %v, want ErrNotFound", err)
	}

	a := f.oneAudit("user.create")
	if a.ActorID != admin.ID || a.ActorName != "root" || a.TargetType != "user" || a.TargetID != u.ID ||
		a.Payload["username"] != "alice.smith" || a.Payload["role"] != "auditor" || a.Payload["display_name"] != "Alice Smith" {
		t.Errorf("user.create audit: got %+v, want root creating alice.smith", a)
	}
	if strings.Contains(a.Raw, testPassword) || strings.Contains(a.Raw, "argon2") {
		t.Errorf("user.create audit contains the password or its hash: %s", a.Raw)
	}

	// Usernames are unique whatever the case they are typed in.
	_, _, err = f.svc.CreateUser(f.ctx, admin, auth.NewUser{Username: "ALICE.smith", Role: auth.RoleGuest, Password: "another password"})
	if ve := fieldErr(t, err); ve.For("username") == "" {
		t.Errorf("duplicate username: got %v, want a problem with username", ve)
	}
	if n := len(f.audits("user.create")); n != 1 {
		t.Errorf("user.create audit rows after a duplicate: got %d, want 1", n)
	}
	f.verifyAudit(1)
}

func TestCreateUserGeneratedPassword(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	u, pw, err := f.svc.CreateUser(f.ctx, audit.System, auth.NewUser{Username: "agent-7", Role: auth.RoleToolUser})
	if err != nil {
		t.Fatalf("CreateUser: %v", err)
	}
	if len(pw) < auth.MinPasswordLength {
		t.Fatalf("generated password: got %q, want at least %d characters", pw, auth.MinPasswordLength)
	}
	if strings.Contains(f.oneAudit("user.create").Raw, pw) {
		t.Error("user.create audit contains the generated password")
	}
	s := f.login("agent-7", pw)
	if s.User.ID != u.ID {
		t.Errorf("login with the generated password: got user %+v, want agent-7", s.User)
	}
}

func TestListAndCountUsers(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	if total, active, err := f.svc.CountUsers(f.ctx); err != nil || total != 0 || active != 0 {
		t.Fatalf("CountUsers on an empty database: got %d, %d, %v; want 0, 0", total, active, err)
	}
	admin := f.createUser("zed", auth.RoleAdmin)
	bob := f.createUser("bob", auth.RoleGuest)
	f.createUser("alice", auth.RoleToolUser)
	if _, err := f.svc.SetDisabled(f.ctx, actorOf(admin), bob.ID, true); err != nil {
		t.Fatal(err)
	}
	users, err := f.svc.ListUsers(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, u := range users {
		names = append(names, u.Username)
	}
	if got := strings.Join(names, ","); got != "alice,bob,zed" {
		t.Errorf("ListUsers: got %s, want alice,bob,zed", got)
	}
	if total, active, err := f.svc.CountUsers(f.ctx); err != nil || total != 3 || active != 2 {
		t.Errorf("CountUsers: got %d, %d, %v; want 3, 2", total, active, err)
	}
}

func TestSetRole(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	root := f.createUser("root", auth.RoleAdmin)
	alice := f.createUser("alice", auth.RoleToolUser)
	s := f.login("alice", testPassword)

	u, err := f.svc.SetRole(f.ctx, actorOf(root), alice.ID, auth.RoleAuditor)
	if err != nil {
		t.Fatalf("SetRole: %v", err)
	}
	if u.Role != auth.RoleAuditor || !u.UpdatedAt.After(alice.UpdatedAt) {
		t.Errorf("SetRole result: got %+v, want auditor with a newer updated_at", u)
	}
	// The change applies to the live session at once.
	if p := f.mustAuth(s.Token, alice); p.User.Role != auth.RoleAuditor || !p.Can(auth.PermAuditView) || p.Can(auth.PermToolUse) {
		t.Errorf("session after SetRole: got role %s, want auditor's permissions", p.User.Role)
	}
	a := f.oneAudit("user.role_change")
	if a.ActorID != root.ID || a.TargetID != alice.ID || a.Payload["from"] != "tool_user" || a.Payload["to"] != "auditor" || a.Payload["username"] != "alice" {
		t.Errorf("user.role_change audit: got %+v, want root moving alice from tool_user to auditor", a)
	}

	// The same role again changes nothing and is not audited.
	if u, err := f.svc.SetRole(f.ctx, actorOf(root), alice.ID, auth.RoleAuditor); err != nil || u.Role != auth.RoleAuditor {
		t.Errorf("SetRole to the same role: got %+v, %v; want no change", u, err)
	}
	if n := len(f.audits("user.role_change")); n != 1 {
		t.Errorf("user.role_change rows after a no-op: got %d, want 1", n)
	}

	for _, role := range []auth.Role{"", "root", "ADMIN"} {
		_, err := f.svc.SetRole(f.ctx, actorOf(root), alice.ID, role)
		if ve := fieldErr(t, err); ve.For("role") == "" {
			t.Errorf("SetRole(%q): got %v, want a problem with role", role, ve)
		}
	}
	if _, err := f.svc.SetRole(f.ctx, actorOf(root), "00000000-0000-4000-8000-000000000000", auth.RoleGuest); !errors.Is(err, auth.ErrNotFound) {
		t.Errorf("SetRole on an unknown user: got %v, want ErrNotFound", err)
	}
	if got, _ := f.svc.GetUser(f.ctx, alice.ID); got.Role != auth.RoleAuditor {
		t.Errorf("alice's role: got %s, want auditor", got.Role)
	}
	f.verifyAudit(-1)
}

func TestLastAdmin(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	root := f.createUser("root", auth.RoleAdmin)
	alice := f.createUser("alice", auth.RoleToolUser)

	// root is the only administrator: it can be neither demoted nor disabled, by
	// anybody.
	for _, actor := range []audit.Actor{actorOf(root), audit.System} {
		_, err := f.svc.SetRole(f.ctx, actor, root.ID, auth.RoleToolManager)
		conflictErr(t, err)
	}
	_, err := f.svc.SetDisabled(f.ctx, audit.System, root.ID, true)
	conflictErr(t, err)

	// A disabled administrator does not count as another one.
	second := f.createUser("second", auth.RoleAdmin)
	if _, err := f.svc.SetDisabled(f.ctx, actorOf(root), second.ID, true); err != nil {
		t.Fatalf("disabling the second admin: %v", err)
	}
	_, err = f.svc.SetRole(f.ctx, actorOf(root), root.ID, auth.RoleGuest)
	conflictErr(t, err)
	// ...and can itself be demoted, since it is not active.
	if _, err := f.svc.SetRole(f.ctx, actorOf(root), second.ID, auth.RoleGuest); err != nil {
		t.Fatalf("demoting a disabled admin: got %v, want nil", err)
	}

	// With another active administrator, root may step down.
	if _, err := f.svc.SetRole(f.ctx, actorOf(root), alice.ID, auth.RoleAdmin); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.SetRole(f.ctx, actorOf(root), root.ID, auth.RoleToolManager); err != nil {
		t.Fatalf("demoting root with alice as admin: got %v, want nil", err)
	}
	// Now alice is the last one.
	_, err = f.svc.SetRole(f.ctx, actorOf(alice), alice.ID, auth.RoleToolUser)
	conflictErr(t, err)
	_, err = f.svc.SetDisabled(f.ctx, actorOf(root), alice.ID, true)
	conflictErr(t, err)

	total, active, err := f.svc.CountUsers(f.ctx)
	if err != nil || total != 3 || active != 2 {
		t.Errorf("CountUsers: got %d, %d, %v; want 3, 2", total, active, err)
	}
	if n := f.count(`SELECT count(*) FROM users WHERE role = 'admin' AND disabled_at IS NULL`); n != 1 {
		t.Errorf("active admins: got %d, want 1", n)
	}
	// Refusals are not audited: create×3, disable, role_change×3.
	f.verifyAudit(3 + 1 + 3)
}

func TestCannotDisableYourself(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	root := f.createUser("root", auth.RoleAdmin)
	f.createUser("other-admin", auth.RoleAdmin)
	_, err := f.svc.SetDisabled(f.ctx, actorOf(root), root.ID, true)
	conflictErr(t, err)
	if u, _ := f.svc.GetUser(f.ctx, root.ID); u.Disabled() {
		t.Fatal("root disabled itself")
	}
	// Neither through an API token.
	tokActor := actorOf(root)
	tokActor.Kind = audit.ActorToken
	_, err = f.svc.SetDisabled(f.ctx, tokActor, root.ID, true)
	conflictErr(t, err)
	if n := len(f.audits("user.disable")); n != 0 {
		t.Errorf("user.disable audit rows: got %d, want 0", n)
	}
}

func TestDisabledUserCutOff(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	root := f.createUser("root", auth.RoleAdmin)
	bob := f.createUser("bob", auth.RoleToolUser)
	s := f.login("bob", testPassword)
	plain, _ := f.createToken(bob, "agent")
	f.mustAuth(s.Token, bob)
	f.mustAuthToken(plain, bob)

	u, err := f.svc.SetDisabled(f.ctx, actorOf(root), bob.ID, true)
	if err != nil {
		t.Fatalf("SetDisabled: %v", err)
	}
	if !u.Disabled() {
		t.Fatalf("SetDisabled result: got %+v, want disabled", u)
	}
	f.mustNotAuth(s.Token, "session of a disabled user")
	f.mustNotAuthToken(plain, "API token of a disabled user")
	if _, err := f.svc.Login(f.ctx, auth.LoginRequest{Username: "bob", Password: testPassword, IP: "192.0.2.1"}); !errors.Is(err, auth.ErrInvalidCredentials) {
		t.Fatalf("login of a disabled user: got %v, want ErrInvalidCredentials", err)
	}
	if n := f.count(`SELECT count(*) FROM sessions WHERE user_id = $1`, bob.ID); n != 0 {
		t.Errorf("bob's sessions after disabling: got %d, want 0", n)
	}
	if list, err := f.svc.ActiveUsers(f.ctx); err != nil || len(list) != 0 {
		t.Errorf("ActiveUsers after disabling bob: got %+v, %v; want none", list, err)
	}
	a := f.oneAudit("user.disable")
	if a.ActorID != root.ID || a.TargetID != bob.ID || a.Payload["username"] != "bob" {
		t.Errorf("user.disable audit: got %+v, want root disabling bob", a)
	}
	ev := f.events("session.ended")
	want := auth.SessionEvent{UserID: bob.ID, Username: "bob", Reason: "user disabled"}
	if len(ev) != 1 || ev[0].Topic != auth.SessionsTopic || ev[0].Payload != want {
		t.Errorf("session.ended events: got %+v, want one with %+v", ev, want)
	}
	// Disabling twice is a no-op.
	if _, err := f.svc.SetDisabled(f.ctx, actorOf(root), bob.ID, true); err != nil {
		t.Errorf("disabling again: got %v, want nil", err)
	}

	u, err = f.svc.SetDisabled(f.ctx, actorOf(root), bob.ID, false)
	if err != nil {
		t.Fatalf("re-enable: %v", err)
	}
	if u.Disabled() {
		t.Fatalf("re-enable result: got %+v, want enabled", u)
	}
	f.mustNotAuthToken(plain, "API token revoked by disabling, after re-enabling") // revoked for good
	f.mustNotAuth(s.Token, "session ended by disabling, after re-enabling")        // ended for good
	s2 := f.login("bob", testPassword)
	f.mustAuth(s2.Token, bob)
	if a := f.oneAudit("user.enable"); a.ActorID != root.ID || a.TargetID != bob.ID {
		t.Errorf("user.enable audit: got %+v, want root enabling bob", a)
	}
	if _, err := f.svc.SetDisabled(f.ctx, actorOf(root), "00000000-0000-4000-8000-000000000000", true); !errors.Is(err, auth.ErrNotFound) {
		t.Errorf("disabling an unknown user: got %v, want ErrNotFound", err)
	}
	// create×2, login, token.create, disable, token.revoke, login_failed, enable, login.
	f.verifyAudit(9)
}

func TestResetPassword(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	root := f.createUser("root", auth.RoleAdmin)
	bob := f.createUser("bob", auth.RoleToolUser)
	s := f.login("bob", testPassword)
	plain, _ := f.createToken(bob, "agent")

	const newPW = "a brand new password"
	generated, err := f.svc.ResetPassword(f.ctx, actorOf(root), bob.ID, newPW)
	if err != nil {
		t.Fatalf("ResetPassword: %v", err)
	}
	if generated != "" {
		t.Errorf("ResetPassword with a password: got generated %q, want none", generated)
	}
	f.mustNotAuth(s.Token, "session after a password reset")
	f.mustAuthToken(plain, bob) // tokens are not passwords: they stay
	if _, err := f.svc.Login(f.ctx, auth.LoginRequest{Username: "bob", Password: testPassword}); !errors.Is(err, auth.ErrInvalidCredentials) {
		t.Errorf("login with the old password: got %v, want ErrInvalidCredentials", err)
	}
	f.login("bob", newPW)

	a := f.oneAudit("user.password_reset")
	if a.ActorID != root.ID || a.TargetID != bob.ID || a.Payload["username"] != "bob" || a.Payload["generated"] != false {
		t.Errorf("user.password_reset audit: got %+v, want root resetting bob's password", a)
	}
	if strings.Contains(a.Raw, newPW) {
		t.Errorf("user.password_reset audit contains the password: %s", a.Raw)
	}
	ev := f.events("session.ended")
	want := auth.SessionEvent{UserID: bob.ID, Username: "bob", Reason: "password reset"}
	if len(ev) != 1 || ev[0].Payload != want {
		t.Errorf("session.ended events: got %+v, want one with %+v", ev, want)
	}

	// A generated one.
	generated, err = f.svc.ResetPassword(f.ctx, actorOf(root), bob.ID, "")
	if err != nil {
		t.Fatalf("ResetPassword generated: %v", err)
	}
	if len(generated) < auth.MinPasswordLength {
		t.Fatalf("generated password: got %q, want at least %d characters", generated, auth.MinPasswordLength)
	}
	f.login("bob", generated)
	if rows := f.audits("user.password_reset"); len(rows) != 2 || rows[1].Payload["generated"] != true || strings.Contains(rows[1].Raw, generated) {
		t.Errorf("second user.password_reset audit: got %+v, want generated true and no password", rows)
	}

	for _, tc := range []struct{ name, pw string }{
		{"too short", "short"},
		{"the username", "bob"},
	} {
		_, err := f.svc.ResetPassword(f.ctx, actorOf(root), bob.ID, tc.pw)
		if ve := fieldErr(t, err); ve.For("password") == "" {
			t.Errorf("%s: got %v, want a problem with password", tc.name, ve)
		}
	}
	if _, err := f.svc.ResetPassword(f.ctx, actorOf(root), "00000000-0000-4000-8000-000000000000", newPW); !errors.Is(err, auth.ErrNotFound) {
		t.Errorf("reset for an unknown user: got %v, want ErrNotFound", err)
	}
	// An administrator's own password changes where the current one is asked for.
	if _, err := f.svc.ResetPassword(f.ctx, actorOf(root), root.ID, newPW); !fault.Is(err, fault.KindConflict) || !strings.Contains(err.Error(), "current one") {
		t.Errorf("an administrator resetting their own password: got %v, want it refused", err)
	}
	f.login("bob", generated) // the refused resets changed nothing
	f.verifyAudit(-1)
}

func TestBootstrap(t *testing.T) {
	t.Parallel()
	t.Run("given password", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, nil)
		const pw = "the first admin password"
		got, err := f.svc.Bootstrap(f.ctx, pw)
		if err != nil || got != pw {
			t.Fatalf("Bootstrap: got %q, %v; want %q", got, err, pw)
		}
		admin, err := f.svc.GetUserByName(f.ctx, "admin")
		if err != nil {
			t.Fatal(err)
		}
		if admin.Role != auth.RoleAdmin || admin.Disabled() {
			t.Errorf("bootstrap user: got %+v, want an enabled admin", admin)
		}
		f.login("admin", pw)

		// Once there is a user, Bootstrap does nothing.
		got, err = f.svc.Bootstrap(f.ctx, "")
		if err != nil || got != "" {
			t.Fatalf("second Bootstrap: got %q, %v; want \"\"", got, err)
		}
		if total, _, _ := f.svc.CountUsers(f.ctx); total != 1 {
			t.Errorf("users after a second Bootstrap: got %d, want 1", total)
		}
		a := f.oneAudit("user.create")
		if a.ActorKind != audit.ActorSystem || a.TargetID != admin.ID || a.Payload["role"] != "admin" {
			t.Errorf("bootstrap audit: got %+v, want the system creating admin", a)
		}
		f.verifyAudit(2)
	})
	t.Run("generated password", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, nil)
		pw, err := f.svc.Bootstrap(f.ctx, "")
		if err != nil || len(pw) < auth.MinPasswordLength {
			t.Fatalf("Bootstrap: got %q, %v; want a generated password", pw, err)
		}
		f.login("admin", pw)
		if strings.Contains(f.oneAudit("user.create").Raw, pw) {
			t.Error("bootstrap audit contains the generated password")
		}
	})
	t.Run("users exist", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, nil)
		f.createUser("alice", auth.RoleGuest)
		got, err := f.svc.Bootstrap(f.ctx, "the first admin password")
		if err != nil || got != "" {
			t.Fatalf("Bootstrap: got %q, %v; want \"\"", got, err)
		}
		if _, err := f.svc.GetUserByName(f.ctx, "admin"); !errors.Is(err, auth.ErrNotFound) {
			t.Errorf("admin after Bootstrap with users: got %v, want ErrNotFound", err)
		}
	})
	t.Run("bad password", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, nil)
		_, err := f.svc.Bootstrap(f.ctx, "short")
		if ve := fieldErr(t, err); ve.For("password") == "" {
			t.Errorf("Bootstrap with a short password: got %v, want a problem with password", ve)
		}
		if total, _, _ := f.svc.CountUsers(f.ctx); total != 0 {
			t.Errorf("users: got %d, want 0", total)
		}
	})
}

// TestAuditTrail runs every audited user change once and checks the whole chain.
func TestAuditTrail(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	if _, err := f.svc.Bootstrap(f.ctx, "the first admin password"); err != nil {
		t.Fatal(err)
	}
	root, err := f.svc.GetUserByName(f.ctx, "admin")
	if err != nil {
		t.Fatal(err)
	}
	act := actorOf(root)
	bob, _, err := f.svc.CreateUser(f.ctx, act, auth.NewUser{Username: "bob", Role: auth.RoleGuest, Password: testPassword})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		action string
		run    func() error
	}{
		{"user.role_change", func() error { _, err := f.svc.SetRole(f.ctx, act, bob.ID, auth.RoleToolUser); return err }},
		{"user.disable", func() error { _, err := f.svc.SetDisabled(f.ctx, act, bob.ID, true); return err }},
		{"user.enable", func() error { _, err := f.svc.SetDisabled(f.ctx, act, bob.ID, false); return err }},
		{"user.password_reset", func() error { _, err := f.svc.ResetPassword(f.ctx, act, bob.ID, "bob's second password"); return err }},
	}
	for _, s := range steps {
		if err := s.run(); err != nil {
			t.Fatalf("%s: %v", s.action, err)
		}
		if a := f.oneAudit(s.action); a.ActorID != root.ID || a.ActorName != "admin" || a.TargetType != "user" || a.TargetID != bob.ID {
			t.Errorf("%s audit: got %+v, want admin acting on bob", s.action, a)
		}
	}
	if rows := f.audits("user.create"); len(rows) != 2 {
		t.Errorf("user.create audit rows: got %d, want 2", len(rows))
	}
	var actions []string
	recs, err := audit.Recent(f.ctx, f.pool, 100)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(recs) - 1; i >= 0; i-- {
		actions = append(actions, recs[i].Action)
	}
	if got, want := strings.Join(actions, ","), "user.create,user.create,user.role_change,user.disable,user.enable,user.password_reset"; got != want {
		t.Errorf("audit actions: got %s, want %s", got, want)
	}
	f.verifyAudit(6)
}

func TestBootstrapConcurrent(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	const pw = "the first admin password"
	var wg sync.WaitGroup
	got := make([]string, 2)
	errs := make([]error, 2)
	for i := range got {
		wg.Go(func() { got[i], errs[i] = f.svc.Bootstrap(f.ctx, pw) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Bootstrap %d: %v", i, err)
		}
	}
	if n := f.count(`SELECT count(*) FROM users`); n != 1 {
		t.Fatalf("users after two concurrent Bootstraps: got %d, want 1", n)
	}
	if (got[0] == pw) == (got[1] == pw) || got[0]+got[1] != pw {
		t.Errorf("concurrent Bootstraps: got %q and %q, want the password from one and \"\" from the other", got[0], got[1])
	}
}

// Two administrators demoting each other at once must not leave none.
func TestLastAdminConcurrent(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	a := f.createUser("a", auth.RoleAdmin)
	b := f.createUser("b", auth.RoleAdmin)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, u := range []auth.User{a, b} {
		wg.Go(func() { _, errs[i] = f.svc.SetRole(f.ctx, audit.System, u.ID, auth.RoleGuest) })
	}
	wg.Wait()
	if n := f.count(`SELECT count(*) FROM users WHERE role = 'admin' AND disabled_at IS NULL`); n != 1 {
		t.Fatalf("active admins after concurrent demotions: got %d, want 1", n)
	}
	if (errs[0] == nil) == (errs[1] == nil) {
		t.Fatalf("concurrent demotions: got errors %v and %v, want exactly one refused", errs[0], errs[1])
	}
	loser := errs[0]
	if loser == nil {
		loser = errs[1]
	}
	if !fault.Is(loser, fault.KindConflict) {
		t.Fatalf("the refused demotion: got %v, want a conflict (not a deadlock)", loser)
	}
	f.verifyAudit(3)
}

// An API token cannot give access: create a user, set a password, change a role or
// enable an account (each would let a leaked token make itself a person's session). It
// may disable one. Nothing it was refused changed or was recorded as done.
func TestTokenCannotGiveAccess(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	root := f.createUser("root", auth.RoleAdmin)
	bob := f.createUser("bob", auth.RoleToolUser)
	tok := actorOf(root)
	tok.Kind = audit.ActorToken
	admin, enable := auth.RoleAdmin, false
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, auth.ErrTokenGivesAccess) {
			t.Errorf("%s by a token: %v, want ErrTokenGivesAccess", what, err)
		}
	}
	_, _, err := f.svc.CreateUser(f.ctx, tok, auth.NewUser{Username: "mallory", Role: auth.RoleAdmin, Password: "long-enough-pass-1"})
	refused("create a user", err)
	_, err = f.svc.ResetPassword(f.ctx, tok, bob.ID, "long-enough-pass-2")
	refused("set a password", err)
	_, err = f.svc.UpdateUser(f.ctx, tok, bob.ID, auth.UserChange{Role: &admin})
	refused("give a role", err)
	if _, err := f.svc.SetDisabled(f.ctx, tok, bob.ID, true); err != nil {
		t.Fatalf("disable by a token: %v", err)
	}
	_, err = f.svc.UpdateUser(f.ctx, tok, bob.ID, auth.UserChange{Disabled: &enable})
	refused("enable an account", err)
	if u, err := f.svc.GetUser(f.ctx, bob.ID); err != nil || u.Role != auth.RoleToolUser || !u.Disabled() {
		t.Errorf("bob after the refusals: %+v, %v", u, err)
	}
	if _, err := f.svc.GetUserByName(f.ctx, "mallory"); !errors.Is(err, auth.ErrNotFound) {
		t.Errorf("mallory: %v, want not found", err)
	}
	for _, action := range []string{"user.role_change", "user.password_reset", "user.enable"} {
		if n := len(f.audits(action)); n != 0 {
			t.Errorf("%s audit rows: %d", action, n)
		}
	}
}
