package assistant

import (
	"fmt"
	"testing"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// Each API token of a person keeps its maxConversations apart, as the person does: one
// token starting conversations in a loop trimmed another token's (all of a person's
// tokens shared one pool), whatever its id holds ("_" and "%" are LIKE's wildcards).
func TestTokenConversationsCappedApart(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := t.Context()
	var ann string
	if err := pool.QueryRow(ctx, `INSERT INTO users (username, role, password_hash) VALUES ('ann', 'admin', 'x') RETURNING id::text`).Scan(&ann); err != nil {
		t.Fatal(err)
	}
	s := New(pool, nil, nil, nil, nil, nil, nil)
	turn := func(p *auth.Principal, conv string) {
		t.Helper()
		if err := s.withConversation(ctx, p, conv, func(cur *State, save func(string, Reply) error) error {
			return save("list servers", Reply{Reply: "none"})
		}); err != nil {
			t.Fatal(err)
		}
	}
	exists := func(p *auth.Principal, conv string) bool {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM assistant_conversations WHERE user_id = $1 AND id = $2`, ann, storedID(p, conv)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	person := &auth.Principal{User: auth.User{ID: ann}, Kind: audit.ActorUser}
	quiet := &auth.Principal{User: auth.User{ID: ann}, Kind: audit.ActorToken, TokenID: "a_b"}
	other := &auth.Principal{User: auth.User{ID: ann}, Kind: audit.ActorToken, TokenID: "a%"}
	busy := &auth.Principal{User: auth.User{ID: ann}, Kind: audit.ActorToken, TokenID: "axb"}
	turn(person, "mine")
	turn(quiet, "kept")
	turn(other, "kept")
	for i := range maxConversations + 5 {
		turn(busy, fmt.Sprintf("loop-%d", i))
	}
	for _, c := range []struct {
		p    *auth.Principal
		conv string
	}{{person, "mine"}, {quiet, "kept"}, {other, "kept"}} {
		if !exists(c.p, c.conv) {
			t.Errorf("%s's conversation %q was trimmed by another token's loop", storedID(c.p, ""), c.conv)
		}
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM assistant_conversations WHERE user_id = $1 AND left(id, 5) = '~axb~'`, ann).Scan(&n); err != nil || n != maxConversations {
		t.Errorf("the looping token keeps %d conversations (%v), want %d", n, err, maxConversations)
	}
}
