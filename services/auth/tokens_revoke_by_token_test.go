package auth_test

import (
	"errors"
	"testing"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
)

// RevokeToken refuses an API token, even an administrator's, another person's token,
// whatever owner the caller passes (the route's "" for an administrator included); its
// own user's it revokes as before.
func TestRevokeTokenByToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	admin := f.createUser("boss", auth.RoleAdmin)
	carol := f.createUser("carol", auth.RoleToolUser)
	_, carolTok := f.createToken(carol, "ci")
	_, adminOther := f.createToken(admin, "other")
	byToken := actorOf(admin)
	byToken.Kind = audit.ActorToken
	for _, owner := range []string{"", carol.ID} {
		if _, err := f.svc.RevokeToken(f.ctx, byToken, carolTok.ID, owner); !errors.Is(err, auth.ErrTokenManagesTokens) {
			t.Errorf("owner %q: got %v, want ErrTokenManagesTokens", owner, err)
		}
	}
	toks, err := f.svc.ListTokens(f.ctx, carol.ID)
	if err != nil || len(toks) != 1 || toks[0].RevokedAt != nil {
		t.Fatalf("carol's tokens: %+v %v, want hers unrevoked", toks, err)
	}
	if got, err := f.svc.RevokeToken(f.ctx, byToken, adminOther.ID, ""); err != nil || got.RevokedAt == nil {
		t.Fatalf("an administrator's token revoking its own user's: %+v %v", got, err)
	}
	// The administrator signed in still may.
	if _, err := f.svc.RevokeToken(f.ctx, actorOf(admin), carolTok.ID, ""); err != nil {
		t.Fatal(err)
	}
}
