package assistant

import (
	"fmt"
	"testing"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// A conversation keeps its newest messages only, and a person their most recently used
// conversations only (a token's apart from the person's): one kept in use, or a loop
// starting new ones, does not grow the store without end.
func TestConversationsBounded(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := t.Context()
	var ann string
	if err := pool.QueryRow(ctx, `INSERT INTO users (username, role, password_hash) VALUES ('ann', 'guest', 'x') RETURNING id::text`).Scan(&ann); err != nil {
		t.Fatal(err)
	}
	s := New(pool, nil, nil, nil, nil, nil, nil)
	p := &auth.Principal{User: auth.User{ID: ann}, Kind: audit.ActorUser}
	tok := &auth.Principal{User: auth.User{ID: ann}, Kind: audit.ActorToken, TokenID: "tok1"}
	turn := func(p *auth.Principal, conv, msg string) {
		t.Helper()
		if err := s.withConversation(ctx, p, conv, func(st *State, save func(string, Reply) error) error {
			st.Question++
			return save(msg, Reply{Reply: "re " + msg, Choices: []Choice{}, Actions: []Action{}})
		}); err != nil {
			t.Fatal(err)
		}
	}
	count := func(sql string, args ...any) int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	turn(tok, "t1", "list servers")
	turns := maxMessagesKept/2 + 5
	for i := range turns {
		turn(p, "long", fmt.Sprint("m", i))
	}
	if n := count(`SELECT count(*) FROM assistant_messages WHERE conversation_id = 'long'`); n != maxMessagesKept {
		t.Fatalf("%d messages kept of %d written, want the newest %d", n, 2*turns, maxMessagesKept)
	}
	h, err := s.History(ctx, ann, "long", maxMessagesKept+10)
	if err != nil || len(h) != maxMessagesKept || h[0].Body != "m5" || h[len(h)-1].Body != fmt.Sprint("re m", turns-1) {
		t.Fatalf("history after the trim: %d messages (%v), first %+v", len(h), err, h[0])
	}
	if n, err := s.Turn(ctx, ann, "long"); err != nil || n != int64(turns) {
		t.Fatalf("turn %d (%v), want %d: the state goes on past trimmed messages", n, err, turns)
	}

	for i := range maxConversations + 2 {
		turn(p, fmt.Sprint("c", i), "hi")
	}
	if n := count(`SELECT count(*) FROM assistant_conversations WHERE user_id = $1 AND id NOT LIKE '~%'`, ann); n != maxConversations {
		t.Fatalf("ann has %d conversations, want %d", n, maxConversations)
	}
	// The least recently used went, with their messages: the long one and the first two.
	for _, gone := range []string{"long", "c0", "c1"} {
		if n := count(`SELECT count(*) FROM assistant_conversations WHERE id = $1`, gone); n != 0 {
			t.Errorf("conversation %s is kept, want it gone", gone)
		}
		if n := count(`SELECT count(*) FROM assistant_messages WHERE conversation_id = $1`, gone); n != 0 {
			t.Errorf("%d messages of %s are kept", n, gone)
		}
	}
	if n := count(`SELECT count(*) FROM assistant_conversations WHERE id = 'c2'`); n != 1 {
		t.Errorf("c2, within the newest %d, is gone", maxConversations)
	}
	// The person's loop did not push out the token's conversation.
	if n := count(`SELECT count(*) FROM assistant_messages WHERE conversation_id = '~tok1~t1'`); n != 2 {
		t.Errorf("the token's conversation has %d messages, want its 2", n)
	}
}
