package assistant

import (
	"fmt"
	"testing"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// A person's API tokens keep maxConversations together, apart from the person's own:
// capped token by token, a person kept any number by creating, using and revoking tokens
// (a revoked token's conversations stay until they are 90 days old). Neither pool trims
// the other, whatever a token's id holds ("_" and "%" are LIKE's wildcards).
func TestTokenConversationsCappedTogether(t *testing.T) {
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
	count := func(where string) int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM assistant_conversations WHERE user_id = $1 AND `+where, ann).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	person := &auth.Principal{User: auth.User{ID: ann}, Kind: audit.ActorUser}
	tokens := []*auth.Principal{
		{User: auth.User{ID: ann}, Kind: audit.ActorToken, TokenID: "a_b"},
		{User: auth.User{ID: ann}, Kind: audit.ActorToken, TokenID: "a%"},
		{User: auth.User{ID: ann}, Kind: audit.ActorToken, TokenID: "axb"},
	}
	for i := range maxConversations {
		turn(person, fmt.Sprintf("mine-%d", i))
	}
	// Three tokens (one created, used and revoked after another) each write past the cap.
	for _, tk := range tokens {
		for i := range maxConversations + 5 {
			turn(tk, fmt.Sprintf("loop-%d", i))
		}
	}
	if n := count(`left(id, 1) = '~'`); n > maxConversations {
		t.Errorf("the person's tokens keep %d conversations together, want at most %d", n, maxConversations)
	}
	if n := count(`left(id, 5) = '~axb~'`); n != maxConversations {
		t.Errorf("the last token keeps %d conversations, want its newest %d", n, maxConversations)
	}
	if n := count(`left(id, 1) <> '~'`); n != maxConversations {
		t.Errorf("the person's own conversations are %d after their tokens' loops, want %d", n, maxConversations)
	}
	// And the person's own loop trims none of the tokens'.
	for i := range 5 {
		turn(person, fmt.Sprintf("more-%d", i))
	}
	if n := count(`left(id, 1) = '~'`); n != maxConversations {
		t.Errorf("the tokens' conversations are %d after the person's loop, want %d", n, maxConversations)
	}
}
