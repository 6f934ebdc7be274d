package grants_test

import (
	"context"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/grants"
)

// Two one-time grants for one operation and two uses at once: the second use waits on
// the grant the first is consuming and, once the first commits, takes the other grant
// rather than being refused and audited as a reuse that never happened. The first use
// is played by a transaction that consumes the older grant and holds its row lock while
// Use runs, so the interleaving is the same every run. A real second use of a single
// one-time grant is still refused and audited.
func TestUseConcurrentOneTimeGrants(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	s := grants.New(pool, nil)
	alice := addUser(t, pool, "alice")
	const conv, op = "conv-race", "file_operations.delete_file"

	first, err := s.Create(ctx, grants.Spec{ConversationID: conv, Operation: op, OneTime: true, TTL: time.Minute, By: alice})
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.Create(ctx, grants.Spec{ConversationID: conv, Operation: op, OneTime: true, TTL: time.Minute, By: alice})
	if err != nil {
		t.Fatal(err)
	}
	// Use takes the oldest grant first: make that the first one whatever the clock's
	// resolution.
	if _, err := pool.Exec(ctx, `UPDATE grants SET created_at = created_at - interval '1 second' WHERE id = $1`, first.ID); err != nil {
		t.Fatal(err)
	}

	// The first use, in flight: the older grant consumed, not yet committed.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `UPDATE grants SET uses = uses + 1, consumed_at = now() WHERE id = $1`, first.ID); err != nil {
		t.Fatal(err)
	}

	type result struct {
		ok  bool
		err error
	}
	done := make(chan result, 1)
	go func() {
		ok, err := s.Allow(ctx, conv, op, "")
		done <- result{ok, err}
	}()
	// The second use waits on the first grant's row.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND wait_event_type = 'Lock' AND query LIKE '%grants.Allow%'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		select {
		case r := <-done:
			t.Fatalf("the second use did not wait for the first: %v %v", r.ok, r.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the second use never waited on the first grant's row")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || !r.ok {
		t.Fatalf("second use, with an unused grant left: got %v %v, want allowed", r.ok, r.err)
	}
	var consumed bool
	if err := pool.QueryRow(ctx, `SELECT consumed_at IS NOT NULL FROM grants WHERE id = $1`, second.ID).Scan(&consumed); err != nil || !consumed {
		t.Fatalf("the other grant: consumed %v %v, want consumed", consumed, err)
	}
	if n := auditCount(t, pool, "grant.reuse", audit.ResultDenied); n != 0 {
		t.Fatalf("grant.reuse entries: %d, want none (no grant was used twice)", n)
	}
	if n := auditCount(t, pool, "grant.use", audit.ResultSuccess); n != 1 {
		t.Fatalf("grant.use entries: %d, want 1", n)
	}

	// Both used now: a third use is a reuse, refused and audited as before.
	if ok, err := s.Allow(ctx, conv, op, ""); err != nil || ok {
		t.Fatalf("third use: got %v %v, want refused", ok, err)
	}
	if n := auditCount(t, pool, "grant.reuse", audit.ResultDenied); n != 1 {
		t.Fatalf("grant.reuse entries after a real reuse: %d, want 1", n)
	}
}
