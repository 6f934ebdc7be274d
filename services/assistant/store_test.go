package assistant

import (
	"testing"
	"time"

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
	st := State{LastKind: "tool", LastIDs: []string{"a", "b"}}
	if err := s.save(ctx, ann, "c1", "list tools", st, Reply{Reply: "Here are 2", Choices: []Choice{{"1. a", "1"}}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.state(ctx, ann, "c1")
	if err != nil || got.LastKind != "tool" || len(got.LastIDs) != 2 {
		t.Fatalf("state: %+v %v", got, err)
	}
	// The same id is another conversation for someone else.
	if other, err := s.state(ctx, bob, "c1"); err != nil || other.LastKind != "" {
		t.Fatalf("bob sees ann's state: %+v %v", other, err)
	}
	if h, err := s.History(ctx, bob, "c1", 10); err != nil || len(h) != 0 {
		t.Fatalf("bob sees ann's messages: %+v %v", h, err)
	}
	h, err := s.History(ctx, ann, "c1", 10)
	if err != nil || len(h) != 2 || h[0].Author != "person" || h[1].Body != "Here are 2" || len(h[1].Choices) != 1 {
		t.Fatalf("history: %+v %v", h, err)
	}
	if last, err := s.LatestConversation(ctx, ann); err != nil || last != "c1" {
		t.Fatalf("latest: %q %v", last, err)
	}
	if _, err := pool.Exec(ctx, `UPDATE assistant_conversations SET updated_at = now() - interval '100 days'`); err != nil {
		t.Fatal(err)
	}
	if err := s.save(ctx, bob, "c2", "hi", State{}, Reply{Reply: "Hello"}); err != nil {
		t.Fatal(err)
	}
	n, err := s.Prune(ctx, 90*24*time.Hour)
	if err != nil || n != 1 {
		t.Fatalf("pruned %d (%v), want ann's old one", n, err)
	}
	var left int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM assistant_messages`).Scan(&left); err != nil || left != 2 {
		t.Fatalf("%d messages left (%v), want bob's 2", left, err)
	}
}
