package auth_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/verr"
)

// A person has at most auth.MaxLiveTokens tokens that are not revoked (a loop minted
// them without end, and every page reads them); their list shows every one of those and
// the newest revoked ones only; ids in another spelling name no token or user.
func TestTokensBounded(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	alice := f.createUser("alice", auth.RoleToolUser)
	var ids []string
	for i := range auth.MaxLiveTokens {
		_, tok := f.createToken(alice, fmt.Sprintf("t%03d", i))
		ids = append(ids, tok.ID)
	}
	_, _, err := f.svc.CreateToken(f.ctx, actorOf(alice), alice.ID, auth.NewToken{Name: "one-more"})
	var ve *verr.Error
	if !errors.As(err, &ve) || len(ve.Fields) != 1 || ve.Fields[0].Field != "name" || !strings.Contains(ve.Fields[0].Message, "revoke") {
		t.Fatalf("token %d: %v, want a field error on name saying to revoke some", auth.MaxLiveTokens+1, err)
	}
	// Revoking frees a place; the revoked ones listed are the newest 100.
	for _, id := range ids {
		if _, err := f.svc.RevokeToken(f.ctx, actorOf(alice), id, alice.ID); err != nil {
			t.Fatal(err)
		}
	}
	_, live := f.createToken(alice, "one-more")
	list, err := f.svc.ListTokens(f.ctx, alice.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 101 || list[0].ID != live.ID || list[len(list)-1].ID != ids[0] {
		t.Errorf("list: %d tokens, first %s, last %s; want the live one first and the 100 revoked", len(list), list[0].Name, list[len(list)-1].Name)
	}
	_, again := f.createToken(alice, "again")
	if _, err := f.svc.RevokeToken(f.ctx, actorOf(alice), again.ID, alice.ID); err != nil {
		t.Fatal(err)
	}
	list, _ = f.svc.ListTokens(f.ctx, alice.ID)
	if len(list) != 101 || list[len(list)-1].ID == ids[0] {
		t.Errorf("list after one more revoked: %d tokens, want 101 without the oldest revoked", len(list))
	}
	if _, err := f.svc.RevokeToken(f.ctx, actorOf(alice), strings.ToUpper(live.ID), alice.ID); !errors.Is(err, auth.ErrTokenNotFound) {
		t.Errorf("revoke in upper case: %v, want not found", err)
	}
	if _, err := f.svc.GetUser(f.ctx, strings.ToUpper(alice.ID)); !errors.Is(err, auth.ErrNotFound) {
		t.Errorf("get user in upper case: %v, want not found", err)
	}
}
