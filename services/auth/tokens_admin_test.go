package auth_test

import (
	"errors"
	"testing"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/fault"
)

// ListOthersTokens gives a person who manages users every other person's live tokens
// (not revoked, not expired) with their owner, bounded, and refuses API tokens and
// everyone else.
func TestListOthersTokens(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	admin := f.createUser("boss", auth.RoleAdmin)
	bob := f.createUser("bob", auth.RoleToolUser)
	carol := f.createUser("carol", auth.RoleAuditor)
	f.createToken(admin, "mine")
	_, bobLive := f.createToken(bob, "live")
	_, bobRevoked := f.createToken(bob, "revoked")
	_, bobExpired := f.createToken(bob, "expired")
	_, carolLive := f.createToken(carol, "live")
	if _, err := f.svc.RevokeToken(f.ctx, actorOf(bob), bobRevoked.ID, bob.ID); err != nil {
		t.Fatal(err)
	}
	f.exec(`UPDATE api_tokens SET expires_at = now() - interval '1 minute' WHERE id = $1::uuid`, bobExpired.ID)

	person := &auth.Principal{User: admin, Kind: audit.ActorUser}
	toks, total, err := f.svc.ListOthersTokens(f.ctx, person, "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, tk := range toks {
		got[tk.ID] = tk.Owner
	}
	if len(toks) != 2 || total != 2 || got[bobLive.ID] != "bob" || got[carolLive.ID] != "carol" {
		t.Fatalf("others' live tokens: %+v (total %d), want bob's live and carol's live with their owners", toks, total)
	}
	toks, total, err = f.svc.ListOthersTokens(f.ctx, person, bob.ID)
	if err != nil || len(toks) != 1 || total != 1 || toks[0].ID != bobLive.ID {
		t.Fatalf("bob's live tokens: %+v (total %d) %v, want his one live token", toks, total, err)
	}

	// Refused: an API token (even an administrator's), and a person who does not manage users.
	adminTok, _ := f.createToken(admin, "agent")
	byToken := f.mustAuthToken(adminTok, admin)
	if _, _, err := f.svc.ListOthersTokens(f.ctx, byToken, ""); !errors.Is(err, auth.ErrTokenManagesTokens) {
		t.Errorf("an administrator's API token: got %v, want ErrTokenManagesTokens", err)
	}
	if _, _, err := f.svc.ListOthersTokens(f.ctx, &auth.Principal{User: bob, Kind: audit.ActorUser}, ""); !fault.Is(err, fault.KindForbidden) {
		t.Errorf("a tool user: got %v, want forbidden", err)
	}

	// Bounded: past OthersTokensListed, the newest are listed and the total counts all.
	f.exec(`INSERT INTO api_tokens (user_id, name, prefix, token_hash)
		SELECT $1::uuid, 'bulk-' || g, 'tw_bulk', sha256(('bulk' || g)::bytea) FROM generate_series(1, $2::int) g`,
		carol.ID, auth.OthersTokensListed)
	toks, total, err = f.svc.ListOthersTokens(f.ctx, person, "")
	if err != nil || len(toks) != auth.OthersTokensListed || total != auth.OthersTokensListed+2 {
		t.Fatalf("past the bound: %d listed, total %d, %v; want %d listed of %d", len(toks), total, err,
			auth.OthersTokensListed, auth.OthersTokensListed+2)
	}
}
