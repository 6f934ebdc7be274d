package auth_test

import (
	"testing"

	"github.com/toolwarden/toolwarden/services/auth"
)

// Disabling a user revokes their live API tokens in the disable's own transaction, each
// audited as token.revoke saying why: re-enabling the account brings none of them back
// (one a thief made with a stolen session among them). Before, the tokens were only
// refused while the account stayed disabled, and all came back with it.
func TestDisableRevokesTokens(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	root := f.createUser("root", auth.RoleAdmin)
	bob := f.createUser("bob", auth.RoleToolUser)
	plain, agent := f.createToken(bob, "agent")
	plain2, stolen := f.createToken(bob, "made-by-a-thief")
	_, old := f.createToken(bob, "old")
	_, gone := f.createToken(bob, "gone")
	f.exec(`UPDATE api_tokens SET expires_at = now() - interval '1 day' WHERE id = $1`, old.ID)
	if _, err := f.svc.RevokeToken(f.ctx, actorOf(bob), gone.ID, bob.ID); err != nil {
		t.Fatal(err)
	}
	f.mustAuthToken(plain, bob) // cached: the disable must drop it from memory too

	if _, err := f.svc.SetDisabled(f.ctx, actorOf(root), bob.ID, true); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.SetDisabled(f.ctx, actorOf(root), bob.ID, false); err != nil {
		t.Fatal(err)
	}
	f.mustNotAuthToken(plain, "bob's token after a disable and re-enable")
	f.mustNotAuthToken(plain2, "the thief's token after a disable and re-enable")

	// The live ones are revoked by the disable's transaction (the one that wrote its
	// audit entry); the expired one is left expired, the one revoked before as it was.
	if n := f.count(`SELECT count(*) FROM api_tokens WHERE id = ANY($1::uuid[]) AND revoked_at IS NOT NULL
		AND xmin::text = (SELECT xmin::text FROM audit_log WHERE action = 'user.disable')`, []string{agent.ID, stolen.ID}); n != 2 {
		t.Errorf("live tokens revoked by the disable's transaction: %d, want 2", n)
	}
	if n := f.count(`SELECT count(*) FROM api_tokens WHERE id = $1 AND revoked_at IS NULL`, old.ID); n != 1 {
		t.Errorf("the expired token: revoked by the disable, want it left expired")
	}

	revokes := f.audits("token.revoke")
	if len(revokes) != 3 {
		t.Fatalf("token.revoke audit rows: got %d, want 3 (gone by bob, agent and the thief's by the disable): %+v", len(revokes), revokes)
	}
	for i, tok := range []auth.Token{agent, stolen} {
		a := revokes[i+1]
		if a.ActorID != root.ID || a.TargetType != "token" || a.TargetID != tok.ID || a.Payload["reason"] != "user disabled" ||
			a.Payload["name"] != tok.Name || a.Payload["prefix"] != tok.Prefix || a.Payload["user"] != "bob" {
			t.Errorf("token.revoke of %s: got %+v, want root revoking it, reason user disabled", tok.Name, a)
		}
	}
	if _, ok := revokes[0].Payload["reason"]; ok {
		t.Errorf("token.revoke by its owner: got %+v, want no reason", revokes[0].Payload)
	}
	if d := f.oneAudit("user.disable"); d.Payload["tokens_revoked"] != float64(2) {
		t.Errorf("user.disable payload: got %+v, want tokens_revoked 2", d.Payload)
	}
	// Written by the disable's transaction, with the user's row: one transaction id.
	if n := f.count(`SELECT count(DISTINCT xmin::text) FROM audit_log
		WHERE action = 'user.disable' OR (action = 'token.revoke' AND payload->>'reason' = 'user disabled')`); n != 1 {
		t.Errorf("the disable's audit rows come from %d transactions, want 1", n)
	}
	// Nothing comes back: bob signs in again, and needs new tokens.
	f.login("bob", testPassword)
	plain3, _ := f.createToken(bob, "agent")
	f.mustAuthToken(plain3, bob)
	f.verifyAudit(-1)
}
