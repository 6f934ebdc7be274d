package grants_test

import (
	"context"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/grants"
)

// A waiting question outlives heartbeats that fail for a while (here the database
// refuses them): the asker keeps waiting and gets the person's answer.
func TestAskSurvivesFailedHeartbeats(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	s := grants.New(pool, nil)
	alice := addUser(t, pool, "alice")
	type result struct {
		c   grants.Collaboration
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := s.Ask(ctx, grants.Question{UserID: alice.ID, UserName: "alice", ConversationID: "c", Prompt: "Go on?"})
		done <- result{c, err}
	}()
	var id string
	deadline := time.Now().Add(10 * time.Second)
	for id == "" && time.Now().Before(deadline) {
		_ = pool.QueryRow(ctx, `SELECT id::text FROM collaborations WHERE status = 'pending'`).Scan(&id)
		time.Sleep(20 * time.Millisecond)
	}
	if id == "" {
		t.Fatal("no question asked")
	}
	// Every heartbeat refused until the constraint goes, for more than one tick.
	if _, err := pool.Exec(ctx, `ALTER TABLE collaborations ADD CONSTRAINT no_heartbeats
		CHECK (heartbeat_at IS NULL OR heartbeat_at < '2000-01-01') NOT VALID`); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Second)
	if _, err := pool.Exec(ctx, `ALTER TABLE collaborations DROP CONSTRAINT no_heartbeats`); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		t.Fatalf("the wait ended while heartbeats failed: %+v %v", r.c, r.err)
	default:
	}
	if _, err := s.Respond(ctx, alice, id, "yes"); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.c.Status != grants.StatusAnswered {
		t.Fatalf("after the answer: %+v %v", r.c, r.err)
	}
}
