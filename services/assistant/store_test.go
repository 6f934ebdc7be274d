package assistant

import (
	"context"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// Conversations are a person's own, keep their state and messages, and go when nobody
// wrote in them for the retention.
func TestConversationStore(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := t.Context()
	var ann, bob string
	for _, u := range []struct {
		name string
		id   *string
	}{{"ann", &ann}, {"bob", &bob}} {
		if err := pool.QueryRow(ctx, `INSERT INTO users (username, role, password_hash) VALUES ($1, 'admin', 'x') RETURNING id::text`,
			u.name).Scan(u.id); err != nil {
			t.Fatal(err)
		}
	}
	s := New(pool, nil, nil, nil, nil, nil, nil)
	person := func(id string) *auth.Principal {
		return &auth.Principal{User: auth.User{ID: id}, Kind: audit.ActorUser}
	}
	turn := func(p *auth.Principal, conv, msg string, st State, out Reply) {
		t.Helper()
		if err := s.withConversation(ctx, p, conv, func(cur *State, save func(string, Reply) error) error {
			*cur = st
			return save(msg, out)
		}); err != nil {
			t.Fatal(err)
		}
	}
	read := func(p *auth.Principal, conv string) State {
		t.Helper()
		var got State
		if err := s.withConversation(ctx, p, conv, func(cur *State, _ func(string, Reply) error) error {
			got = *cur
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	turn(person(ann), "c1", "list tools", State{LastKind: "tool", LastIDs: []string{"a", "b"}},
		Reply{Reply: "Here are 2", Choices: []Choice{{"1. a", "1"}}, Question: 3})
	if got := read(person(ann), "c1"); got.LastKind != "tool" || len(got.LastIDs) != 2 {
		t.Fatalf("state: %+v", got)
	}
	// The same id is another conversation for someone else, and for a token of ann's.
	if other := read(person(bob), "c1"); other.LastKind != "" {
		t.Fatalf("bob sees ann's state: %+v", other)
	}
	tok := &auth.Principal{User: auth.User{ID: ann}, Kind: audit.ActorToken, TokenID: "tok1"}
	if got := read(tok, "c1"); got.LastKind != "" {
		t.Fatalf("ann's token sees her conversation: %+v", got)
	}
	if h, err := s.History(ctx, bob, "c1", 10); err != nil || len(h) != 0 {
		t.Fatalf("bob sees ann's messages: %+v %v", h, err)
	}
	h, err := s.History(ctx, ann, "c1", 10)
	if err != nil || len(h) != 2 || h[0].Author != "person" || h[1].Body != "Here are 2" || len(h[1].Choices) != 1 || h[1].Question != 3 {
		t.Fatalf("history: %+v %v", h, err)
	}
	turn(tok, "later", "list servers", State{}, Reply{Reply: "none"})
	if last, err := s.LatestConversation(ctx, ann); err != nil || last != "c1" {
		t.Fatalf("latest: %q %v", last, err)
	}
	if _, err := pool.Exec(ctx, `UPDATE assistant_conversations SET updated_at = now() - interval '100 days'`); err != nil {
		t.Fatal(err)
	}
	turn(person(bob), "c2", "hi", State{}, Reply{Reply: "Hello"})
	n, err := s.Prune(ctx, 90*24*time.Hour)
	if err != nil || n != 4 {
		t.Fatalf("pruned %d (%v), want the four old ones (reading a conversation opens it)", n, err)
	}
	var left int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM assistant_messages`).Scan(&left); err != nil || left != 2 {
		t.Fatalf("%d messages left (%v), want bob's 2", left, err)
	}
}

// A turn whose request ends while it runs (the person closed the page after their yes)
// is still saved: its act has committed in a transaction of its own, and a state left
// unsaved would keep the yes that asked for it, for the old Yes button to run again.
func TestConversationSavedAfterRequestEnds(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	var ann string
	if err := pool.QueryRow(t.Context(), `INSERT INTO users (username, role, password_hash) VALUES ('ann', 'admin', 'x') RETURNING id::text`).Scan(&ann); err != nil {
		t.Fatal(err)
	}
	s := New(pool, nil, nil, nil, nil, nil, nil)
	p := &auth.Principal{User: auth.User{ID: ann}, Kind: audit.ActorUser}
	pending := State{Pending: &Op{Intent: IntentRemoveServer, Kind: "server", IDs: []string{"s1"}, Confirm: true}, Question: 1}
	if err := s.withConversation(t.Context(), p, "c1", func(cur *State, save func(string, Reply) error) error {
		*cur = pending
		return save("remove s1", Reply{Reply: "Say yes"})
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if err := s.withConversation(ctx, p, "c1", func(cur *State, save func(string, Reply) error) error {
		cur.Pending, cur.Question = nil, 2
		cancel() // the act ran; the person's request is gone
		return save("yes", Reply{Reply: "removed"})
	}); err != nil {
		t.Fatalf("the turn after its request ended: %v", err)
	}
	var still bool
	if err := pool.QueryRow(t.Context(), `SELECT state ? 'pending' FROM assistant_conversations WHERE user_id = $1 AND id = 'c1'`, ann).Scan(&still); err != nil || still {
		t.Fatalf("the spent yes is still pending (%v)", err)
	}
}

// A revoked or expired API token's conversations are removed by the next prune, however
// recent: nothing can read them any more. A live token's stay.
func TestPruneRevokedTokensConversations(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.New(t)
	var ann string
	if err := pool.QueryRow(ctx, `INSERT INTO users (username, role, password_hash) VALUES ('ann', 'admin', 'x') RETURNING id::text`).Scan(&ann); err != nil {
		t.Fatal(err)
	}
	token := func(name, state string) string {
		t.Helper()
		var id string
		if err := pool.QueryRow(ctx, `INSERT INTO api_tokens (user_id, name, prefix, token_hash, revoked_at, expires_at)
			VALUES ($1, $2, 'tw_x', convert_to(gen_random_uuid()::text, 'UTF8'), CASE WHEN $3 = 'revoked' THEN now() END,
				CASE WHEN $3 = 'expired' THEN now() - interval '1 hour' END) RETURNING id::text`, ann, name, state).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	live, revoked, expired := token("live", ""), token("revoked", "revoked"), token("expired", "expired")
	s := New(pool, nil, nil, nil, nil, nil, nil)
	for _, id := range []string{live, revoked, expired} {
		p := &auth.Principal{User: auth.User{ID: ann}, Kind: audit.ActorToken, TokenID: id}
		if err := s.withConversation(ctx, p, "c1", func(st *State, save func(string, Reply) error) error {
			return save("hi", Reply{Reply: "hello"})
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.withConversation(ctx, &auth.Principal{User: auth.User{ID: ann}, Kind: audit.ActorUser}, "c1", func(st *State, save func(string, Reply) error) error {
		return save("hi", Reply{Reply: "hello"})
	}); err != nil {
		t.Fatal(err)
	}
	n, err := s.Prune(ctx, 90*24*time.Hour)
	if err != nil || n != 2 {
		t.Fatalf("pruned %d (%v), want the revoked and the expired token's", n, err)
	}
	var left []string
	rows, _ := pool.Query(ctx, `SELECT id FROM assistant_conversations ORDER BY id`)
	for rows.Next() {
		var id string
		_ = rows.Scan(&id)
		left = append(left, id)
	}
	if len(left) != 2 || left[0] != "c1" || left[1] != "~"+live+"~c1" {
		t.Fatalf("conversations left: %v", left)
	}
}
