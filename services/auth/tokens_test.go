package auth_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/events"
)

// createToken issues an API token for u, acting as u, and fails the test on error.
func (f *fixture) createToken(u auth.User, name string) (string, auth.Token) {
	f.t.Helper()
	plain, tok, err := f.svc.CreateToken(f.ctx, actorOf(u), u.ID, auth.NewToken{Name: name})
	if err != nil {
		f.t.Fatalf("create token %q for %s: %v", name, u.Username, err)
	}
	return plain, tok
}

// mustAuthToken checks that the API token authenticates as u.
func (f *fixture) mustAuthToken(plain string, u auth.User) *auth.Principal {
	f.t.Helper()
	p, err := f.svc.AuthenticateToken(f.ctx, plain)
	if err != nil {
		f.t.Fatalf("authenticate token of %s: got %v, want a principal", u.Username, err)
	}
	if p.User.ID != u.ID || p.Kind != audit.ActorToken {
		f.t.Fatalf("authenticate token: got user %s kind %q, want %s kind %q", p.User.Username, p.Kind, u.Username, audit.ActorToken)
	}
	return p
}

func TestCreateToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	alice := f.createUser("alice", auth.RoleToolUser)

	plain, tok, err := f.svc.CreateToken(f.ctx, actorOf(alice), alice.ID, auth.NewToken{Name: "  ci  "})
	if err != nil {
		t.Fatalf("CreateToken: %v", err)
	}
	if !strings.HasPrefix(plain, "tw_") || len(plain) != 3+43 {
		t.Fatalf("token: got %q, want tw_ and 43 base64url characters", plain)
	}
	if strings.HasPrefix(plain, "tws_") {
		t.Fatalf("token %q looks like a session cookie", plain)
	}
	if tok.ID == "" || tok.UserID != alice.ID || tok.Name != "ci" || tok.Prefix != plain[:12] || tok.CreatedAt.IsZero() {
		t.Errorf("token record: got %+v, want name ci for alice with the token's first 12 characters as prefix", tok)
	}
	if tok.ExpiresAt != nil || tok.RevokedAt != nil || tok.LastUsedAt != nil || tok.Status() != "active" {
		t.Errorf("new token: got %+v (status %s), want active, never used, no expiry", tok, tok.Status())
	}

	// The table keeps the SHA-256 and nothing from which the token can be recovered.
	var hash []byte
	if err := f.pool.QueryRow(f.ctx, `SELECT token_hash FROM api_tokens WHERE id = $1`, tok.ID).Scan(&hash); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(hash, sha(plain)) {
		t.Errorf("token_hash: got %x, want sha256 of the token %x", hash, sha(plain))
	}
	secret := strings.TrimPrefix(plain, "tw_")
	rows, err := f.pool.Query(f.ctx, `SELECT c.key, coalesce(c.value, '') FROM api_tokens t, jsonb_each_text(to_jsonb(t)) c WHERE t.id = $1`, tok.ID)
	if err != nil {
		t.Fatal(err)
	}
	columns := 0
	for rows.Next() {
		var col, val string
		if err := rows.Scan(&col, &val); err != nil {
			t.Fatal(err)
		}
		columns++
		if strings.Contains(val, plain) || strings.Contains(val, secret) || strings.Contains(val, hex.EncodeToString([]byte(plain))) {
			t.Errorf("api_tokens.%s = %q contains the token", col, val)
		}
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	if columns < 9 {
		t.Errorf("api_tokens columns checked: got %d, want every column (9)", columns)
	}

	// Nor do the audit log or the events.
	a := f.oneAudit("token.create")
	if a.ActorID != alice.ID || a.TargetType != "token" || a.TargetID != tok.ID || a.Payload["name"] != "ci" || a.Payload["prefix"] != tok.Prefix || a.Payload["user"] != "alice" {
		t.Errorf("token.create audit: got %+v, want alice creating token ci", a)
	}
	for _, table := range []string{"audit_log", "events"} {
		if n := f.count(`SELECT count(*) FROM `+table+` x WHERE strpos(x::text, $1) > 0`, secret); n != 0 {
			t.Errorf("%s: got %d rows containing the token, want 0", table, n)
		}
	}

	list, err := f.svc.ListTokens(f.ctx, alice.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != tok.ID {
		t.Errorf("ListTokens: got %+v, want the one token", list)
	}
	f.verifyAudit(2)
}

func TestCreateTokenExpiry(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	alice := f.createUser("alice", auth.RoleToolUser)
	before := time.Now()
	_, tok, err := f.svc.CreateToken(f.ctx, actorOf(alice), alice.ID, auth.NewToken{Name: "month", ExpiresInDays: auth.Days(30)})
	if err != nil {
		t.Fatal(err)
	}
	if tok.ExpiresAt == nil {
		t.Fatal("ExpiresInDays 30: got no expiry, want one")
	}
	if d := tok.ExpiresAt.Sub(before); d < 30*24*time.Hour-time.Minute || d > 30*24*time.Hour+time.Minute {
		t.Errorf("ExpiresInDays 30: got expiry in %s, want 720h", d)
	}
	if a := f.oneAudit("token.create"); a.Payload["expires_at"] == nil {
		t.Errorf("token.create audit: got %+v, want expires_at", a.Payload)
	}
}

func TestCreateTokenValidation(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	alice := f.createUser("alice", auth.RoleToolUser)
	for _, tc := range []struct {
		name  string
		in    auth.NewToken
		field string
	}{
		{"empty name", auth.NewToken{Name: ""}, "name"},
		{"blank name", auth.NewToken{Name: "   "}, "name"},
		{"name too long", auth.NewToken{Name: strings.Repeat("x", 65)}, "name"},
		{"negative expiry", auth.NewToken{Name: "a", ExpiresInDays: auth.Days(-1)}, "expires_in_days"},
		{"expiry over ten years", auth.NewToken{Name: "a", ExpiresInDays: auth.Days(3651)}, "expires_in_days"},
	} {
		_, _, err := f.svc.CreateToken(f.ctx, actorOf(alice), alice.ID, tc.in)
		if ve := fieldErr(t, err); ve.For(tc.field) == "" {
			t.Errorf("%s: got %v, want a problem with %q", tc.name, ve, tc.field)
		}
	}
	// The limits themselves are fine: 64 characters (not bytes) and ten years.
	for _, in := range []auth.NewToken{{Name: strings.Repeat("é", 64)}, {Name: "decade", ExpiresInDays: auth.Days(3650)}} {
		if _, _, err := f.svc.CreateToken(f.ctx, actorOf(alice), alice.ID, in); err != nil {
			t.Errorf("CreateToken(%+v): got %v, want success", in, err)
		}
	}
	if _, _, err := f.svc.CreateToken(f.ctx, actorOf(alice), "00000000-0000-4000-8000-000000000000", auth.NewToken{Name: "x"}); !errors.Is(err, auth.ErrNotFound) {
		t.Errorf("token for an unknown user: got %v, want ErrNotFound", err)
	}
	if n := f.count(`SELECT count(*) FROM audit_log WHERE action = 'token.create'`); n != 2 {
		t.Errorf("token.create audit rows: got %d, want 2 (only for tokens made)", n)
	}
}

func TestAuthenticateToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	alice := f.createUser("alice", auth.RoleToolManager)
	plain, tok := f.createToken(alice, "ci")

	p := f.mustAuthToken(plain, alice)
	if p.TokenID != tok.ID || p.SessionID != nil || p.User.Role != auth.RoleToolManager {
		t.Errorf("principal: got %+v, want token %s of a tool_manager and no session", p, tok.ID)
	}
	if !p.Can(auth.PermServerCreate) || p.Can(auth.PermUsers) {
		t.Errorf("token principal: got Can(server.create) %v, Can(users) %v; want the role's permissions", p.Can(auth.PermServerCreate), p.Can(auth.PermUsers))
	}
	list, err := f.svc.ListTokens(f.ctx, alice.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].LastUsedAt == nil || time.Since(*list[0].LastUsedAt) > time.Minute {
		t.Fatalf("after use: got %+v, want last_used_at set to now", list)
	}
	// Used again later: the clock moves on.
	f.exec(`UPDATE api_tokens SET last_used_at = now() - interval '2 hours'`)
	f.mustAuthToken(plain, alice)
	if n := f.count(`SELECT count(*) FROM api_tokens WHERE last_used_at > now() - interval '1 minute'`); n != 1 {
		t.Errorf("last_used_at after a use 2h later: got %d tokens used in the last minute, want 1", n)
	}

	for _, tc := range []struct{ name, token string }{
		{"empty", ""},
		{"prefix only", "tw_"},
		{"unknown", "tw_" + strings.Repeat("A", 43)},
		{"without prefix", strings.TrimPrefix(plain, "tw_")},
		{"changed last character", plain[:len(plain)-1] + string(plain[len(plain)-1]^1)},
		{"session prefix", "tws_" + strings.TrimPrefix(plain, "tw_")},
	} {
		f.mustNotAuthToken(tc.token, tc.name)
	}
}

func TestExpiredToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	alice := f.createUser("alice", auth.RoleToolUser)
	plain, tok := f.createToken(alice, "ci")
	f.mustAuthToken(plain, alice)
	f.exec(`UPDATE api_tokens SET expires_at = now() - interval '1 second' WHERE id = $1`, tok.ID)
	f.mustNotAuthToken(plain, "expired")
	list, err := f.svc.ListTokens(f.ctx, alice.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Status() != "expired" {
		t.Errorf("expired token: got %+v, want status expired", list)
	}
	if n, err := f.svc.CountTokens(f.ctx); err != nil || n != 0 {
		t.Errorf("CountTokens with only an expired token: got %d, %v; want 0", n, err)
	}
	// Expiring in the future is fine.
	f.exec(`UPDATE api_tokens SET expires_at = now() + interval '1 hour' WHERE id = $1`, tok.ID)
	f.mustAuthToken(plain, alice)
}

func TestRevokeToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	admin := f.createUser("root", auth.RoleAdmin)
	alice := f.createUser("alice", auth.RoleToolUser)
	bob := f.createUser("bob", auth.RoleToolUser)
	alicePlain, aliceTok := f.createToken(alice, "ci")
	bobPlain, bobTok := f.createToken(bob, "ci") // names are per user
	carol := f.createUser("carol", auth.RoleToolUser)
	f.createToken(carol, "ci")

	if n, err := f.svc.CountTokens(f.ctx); err != nil || n != 3 {
		t.Fatalf("CountTokens: got %d, %v; want 3", n, err)
	}
	// Disabling a user revokes their tokens: they are not counted as active, nor once
	// the user is enabled again.
	if _, err := f.svc.SetDisabled(f.ctx, actorOf(admin), carol.ID, true); err != nil {
		t.Fatal(err)
	}
	if n, err := f.svc.CountTokens(f.ctx); err != nil || n != 2 {
		t.Fatalf("CountTokens with carol disabled: got %d, %v; want 2", n, err)
	}
	if _, err := f.svc.SetDisabled(f.ctx, actorOf(admin), carol.ID, false); err != nil {
		t.Fatal(err)
	}
	if n, err := f.svc.CountTokens(f.ctx); err != nil || n != 2 {
		t.Fatalf("CountTokens with carol enabled again: got %d, %v; want 2", n, err)
	}

	// Alice cannot revoke bob's token, nor one that does not exist.
	for _, tc := range []struct{ name, id string }{
		{"someone else's", bobTok.ID},
		{"unknown", "00000000-0000-4000-8000-000000000000"},
		{"not a uuid", "nope"},
	} {
		if _, err := f.svc.RevokeToken(f.ctx, actorOf(alice), tc.id, alice.ID); !errors.Is(err, auth.ErrTokenNotFound) || err.Error() != "token not found" {
			t.Errorf("alice revoking %s token: got %v, want ErrTokenNotFound (token not found)", tc.name, err)
		}
	}
	f.mustAuthToken(bobPlain, bob)

	got, err := f.svc.RevokeToken(f.ctx, actorOf(alice), aliceTok.ID, alice.ID)
	if err != nil {
		t.Fatalf("RevokeToken own: %v", err)
	}
	if got.RevokedAt == nil || got.Status() != "revoked" {
		t.Errorf("revoked token: got %+v, want revoked_at set", got)
	}
	f.mustNotAuthToken(alicePlain, "revoked")
	// Revoking twice is not an error and is audited once.
	if _, err := f.svc.RevokeToken(f.ctx, actorOf(alice), aliceTok.ID, alice.ID); err != nil {
		t.Errorf("revoking again: got %v, want nil", err)
	}

	// An administrator (empty owner) may revoke anyone's.
	if _, err := f.svc.RevokeToken(f.ctx, actorOf(admin), bobTok.ID, ""); err != nil {
		t.Fatalf("admin revoking bob's token: %v", err)
	}
	f.mustNotAuthToken(bobPlain, "revoked by an admin")

	revokes := f.audits("token.revoke")[1:] // the first: carol's, by her disable
	if len(revokes) != 2 {
		t.Fatalf("token.revoke audit rows: got %d, want 2", len(revokes))
	}
	if r := revokes[0]; r.ActorID != alice.ID || r.TargetID != aliceTok.ID || r.Payload["name"] != "ci" || r.Payload["prefix"] != aliceTok.Prefix {
		t.Errorf("alice's token.revoke: got %+v", r)
	}
	// The administrator's row names whose token it was.
	if r := revokes[1]; r.ActorID != admin.ID || r.TargetID != bobTok.ID || r.Payload["user"] != "bob" {
		t.Errorf("admin's token.revoke: got %+v", r)
	}
	for _, plain := range []string{alicePlain, bobPlain} {
		if n := f.count(`SELECT count(*) FROM audit_log x WHERE strpos(x::text, $1) > 0`, strings.TrimPrefix(plain, "tw_")); n != 0 {
			t.Errorf("audit_log: got %d rows containing a token, want 0", n)
		}
	}
	if n, err := f.svc.CountTokens(f.ctx); err != nil || n != 0 {
		t.Errorf("CountTokens after revoking both: got %d, %v; want 0", n, err)
	}
	f.verifyAudit(4 + 3 + 3 + 2) // users, tokens, carol disabled (her token revoked) and enabled, revokes
}

func TestTokenNameUnique(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	alice := f.createUser("alice", auth.RoleToolUser)
	_, first := f.createToken(alice, "ci")

	_, _, err := f.svc.CreateToken(f.ctx, actorOf(alice), alice.ID, auth.NewToken{Name: " ci"})
	if ve := fieldErr(t, err); ve.For("name") == "" {
		t.Fatalf("duplicate live name: got %v, want a problem with name", ve)
	}
	if _, err := f.svc.RevokeToken(f.ctx, actorOf(alice), first.ID, alice.ID); err != nil {
		t.Fatal(err)
	}
	plain, second := f.createToken(alice, "ci")
	if second.ID == first.ID {
		t.Fatal("reused name: got the old token back, want a new one")
	}
	f.mustAuthToken(plain, alice)
	list, err := f.svc.ListTokens(f.ctx, alice.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 {
		t.Fatalf("ListTokens: got %d tokens, want 2 (one revoked)", len(list))
	}
	if n := len(f.audits("token.create")); n != 2 {
		t.Errorf("token.create audit rows: got %d, want 2 (the refused duplicate is not audited)", n)
	}
	f.verifyAudit(-1)
}

func TestCreateTokenDisabledUser(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	admin := f.createUser("root", auth.RoleAdmin)
	alice := f.createUser("alice", auth.RoleToolUser)
	if _, err := f.svc.SetDisabled(f.ctx, actorOf(admin), alice.ID, true); err != nil {
		t.Fatal(err)
	}
	_, _, err := f.svc.CreateToken(f.ctx, actorOf(admin), alice.ID, auth.NewToken{Name: "ci"})
	conflictErr(t, err)
	if n := f.count(`SELECT count(*) FROM api_tokens`); n != 0 {
		t.Errorf("api_tokens: got %d, want 0", n)
	}
}

// A token is answered from memory once seen: a change behind the service's back is not
// noticed, but a revoke, a new role or a disabled user take effect on the next request,
// through this service or (over the event bus) through another replica's.
func TestTokenCache(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx, cancel := context.WithCancel(f.ctx)
	local := events.NewLocal(f.pool)
	bus := events.NewBus(f.pool, &events.BusOptions{Local: local})
	done := make(chan struct{})
	go func() { _ = bus.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	<-bus.Ready()
	// The service writes through the bus's Local, as serve wires it: the replica's
	// cache hears of each change before the change returns.
	f.svc = auth.New(f.pool, &auth.Options{Logger: slog.New(slog.DiscardHandler), Local: local})
	replica := auth.New(f.pool, nil) // another server on the same database
	replica.Follow(bus)
	admin := f.createUser("root", auth.RoleAdmin)
	alice := f.createUser("alice", auth.RoleToolManager)
	plain, tok := f.createToken(alice, "ci")
	role := func(svc *auth.Service) auth.Role {
		t.Helper()
		p, err := svc.AuthenticateToken(f.ctx, plain)
		if errors.Is(err, auth.ErrUnauthenticated) {
			return ""
		}
		if err != nil {
			t.Fatal(err)
		}
		return p.User.Role
	}
	if role(f.svc) != auth.RoleToolManager || role(replica) != auth.RoleToolManager {
		t.Fatal("a fresh token does not authenticate")
	}
	if _, err := f.pool.Exec(f.ctx, `UPDATE users SET role = 'guest' WHERE id::text = $1`, alice.ID); err != nil {
		t.Fatal(err)
	}
	if role(f.svc) != auth.RoleToolManager || role(replica) != auth.RoleToolManager {
		t.Fatal("the token was looked up again: want it answered from memory")
	}
	if _, err := f.svc.SetRole(f.ctx, actorOf(admin), alice.ID, auth.RoleToolUser); err != nil {
		t.Fatal(err)
	}
	if a, b := role(f.svc), role(replica); a != auth.RoleToolUser || b != auth.RoleToolUser {
		t.Fatalf("after SetRole: got %q here and %q on the replica, want tool_user on both at once", a, b)
	}
	if _, err := f.svc.RevokeToken(f.ctx, actorOf(alice), tok.ID, alice.ID); err != nil {
		t.Fatal(err)
	}
	if a, b := role(f.svc), role(replica); a != "" || b != "" {
		t.Fatalf("after the revoke: got %q here and %q on the replica, want refused on both at once", a, b)
	}
	plain2, _ := f.createToken(alice, "ci2")
	plain = plain2
	if role(replica) != auth.RoleToolUser {
		t.Fatal("the second token does not authenticate")
	}
	if _, err := f.svc.SetDisabled(f.ctx, actorOf(admin), alice.ID, true); err != nil {
		t.Fatal(err)
	}
	if a, b := role(f.svc), role(replica); a != "" || b != "" {
		t.Fatalf("after disabling the user: got %q here and %q on the replica, want refused on both", a, b)
	}
}
