package grants_test

import (
	"context"
	"errors"
	"testing"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/grants"
)

// A question over by the rules — nobody answered it for a day, or its waiting call
// stopped heartbeating — is not answerable even before a prune marks it: an approving
// answer is refused as not pending, creates no grant, and ends the question there, with
// its audit entry, as the prune would.
func TestRespondToStaleQuestion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	s := grants.New(pool, nil)
	alice := addUser(t, pool, "alice")
	for _, tc := range []struct{ age, status, action string }{
		{"25 hours", grants.StatusExpired, "collaboration.expire"},
		{"10 minutes", grants.StatusCancelled, "collaboration.cancel"},
	} {
		var id string
		// Both times on the database's clock, which is the one the rule reads.
		if err := pool.QueryRow(ctx, `INSERT INTO collaborations (user_id, conversation_id, prompt, authorize_operation, created_at, heartbeat_at)
			VALUES ($1, 'c1', 'May I?', 'file_operations', now() - $2::interval, now() - $2::interval) RETURNING id`, alice.ID, tc.age).Scan(&id); err != nil {
			t.Fatal(err)
		}
		if c, err := s.RespondAs(ctx, alice, id, "yes", grants.Approve); !errors.Is(err, grants.ErrNotPending) {
			t.Fatalf("%s old: answering gave %+v, %v; want ErrNotPending", tc.age, c, err)
		}
		if n := testkit.Count(t, pool, `SELECT count(*) FROM grants WHERE collaboration_id = $1`, id); n != 0 {
			t.Fatalf("%s old: %d grants from the answer", tc.age, n)
		}
		c, err := s.GetCollaboration(ctx, id)
		if err != nil || c.Status != tc.status || c.AnsweredAt == nil || c.GrantID != nil || c.Response != "" {
			t.Fatalf("%s old: the question is now %+v, %v; want %s, unanswered", tc.age, c, err, tc.status)
		}
		if n := testkit.Count(t, pool, `SELECT count(*) FROM audit_log WHERE action = $1 AND target_id = $2 AND actor_kind = 'system'`,
			tc.action, id); n != 1 {
			t.Fatalf("%s old: %d %s audit entries", tc.age, n, tc.action)
		}
		if n := testkit.Count(t, pool, `SELECT count(*) FROM audit_log WHERE action LIKE 'collaboration.respond%' AND target_id = $1`, id); n != 0 {
			t.Fatalf("%s old: %d answers audited", tc.age, n)
		}
	}
	if ok, err := s.Has(ctx, "c1", "file_operations.delete_file", "/x"); err != nil || ok {
		t.Fatalf("a grant for delete_file after answering stale questions: %v %v", ok, err)
	}

	// A question still waiting, its call alive, is answered as before.
	var live string
	if err := pool.QueryRow(ctx, `INSERT INTO collaborations (user_id, conversation_id, prompt, authorize_operation, heartbeat_at)
		VALUES ($1, 'c2', 'May I?', 'file_operations.create_file', now()) RETURNING id`, alice.ID).Scan(&live); err != nil {
		t.Fatal(err)
	}
	if c, err := s.RespondAs(ctx, alice, live, "yes", grants.Approve); err != nil || !c.Approved() || c.GrantID == nil {
		t.Fatalf("a live question: %+v %v", c, err)
	}
}
