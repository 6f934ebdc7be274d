package grants_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/grants"
)

// A credential written into a question, its answer or a grant's target never reaches
// the append-only audit log (docs/audit.md: payloads never hold secret values) — in no
// row's target name or payload, whether the question is answered, declined, cancelled
// by its caller or the system, or expired, nor when its grant is made, used, used again
// or revoked — while the question's and the grant's own rows keep it for their person.
// A prompt with the credential across the 80th character shows it is masked before the
// name is clipped.
func TestAuditHoldsNoSecrets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	s := grants.New(pool, nil)
	alice := addUser(t, pool, "alice")

	const token = "ghp_Q8d2Lm4Zt7Xw1Vb9Kc3Nf6Hj0Rp5Sy2Ua8Ee"
	prompt := "May I push with " + token + "?"
	long := strings.Repeat("x ", 35) + token + " now?" // the token spans the 80th character
	target := "git push https://" + token + "@github.com/x"

	// ask asks q of alice in the background, waits until it is pending, and returns its id
	// and what the waiting call ends with.
	ask := func(ctx context.Context, q grants.Question) (string, chan grants.Collaboration) {
		t.Helper()
		q.UserID, q.UserName, q.ConversationID = alice.ID, "alice", "conv-s"
		done := make(chan grants.Collaboration, 1)
		go func() {
			c, err := s.Ask(ctx, q)
			if err != nil && ctx.Err() == nil {
				t.Error(err)
			}
			done <- c
		}()
		var id string
		testkit.WaitFor(t, 10*time.Second, func() bool {
			list, err := s.Collaborations(ctx, alice.ID, grants.StatusPending)
			if err != nil || len(list) != 1 {
				return false
			}
			id = list[0].ID
			return true
		}, "the question waits")
		return id, done
	}

	// Approved: collaboration.request, grant.create, collaboration.respond; then the
	// one-time grant's use and its refused second use.
	id, done := ask(ctx, grants.Question{Prompt: prompt, AuthorizeOperation: "terminal_operations.run", Target: target, OneTime: true})
	if _, err := s.Respond(ctx, alice, id, "yes, the token is "+token); err != nil {
		t.Fatal(err)
	}
	answered := <-done
	if !answered.Approved() || answered.GrantID == nil {
		t.Fatalf("answered: %+v", answered)
	}
	for i, want := range []bool{true, false} {
		if ok, err := s.Allow(ctx, "conv-s", "terminal_operations.run", target); err != nil || ok != want {
			t.Fatalf("use %d: %v %v, want %v", i+1, ok, err, want)
		}
	}

	// A grant made and revoked.
	g, err := s.Create(ctx, grants.Spec{ConversationID: "conv-s", Operation: "terminal_operations.run", Target: target, By: alice})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Revoke(ctx, alice, g.ID, true); err != nil {
		t.Fatal(err)
	}

	// Declined.
	id, done = ask(ctx, grants.Question{Prompt: long, AuthorizeOperation: "terminal_operations.run", Target: target})
	if _, err := s.Respond(ctx, alice, id, "no, not with "+token); err != nil {
		t.Fatal(err)
	}
	if c := <-done; c.Status != grants.StatusDeclined {
		t.Fatalf("declined: %+v", c)
	}

	// Cancelled by its caller, for a reason that holds the token too.
	cctx, cancel := context.WithCancelCause(ctx)
	_, done = ask(cctx, grants.Question{Prompt: prompt, Target: target})
	cancel(errors.New("gave up waiting to push with " + token))
	if c := <-done; c.Status != grants.StatusCancelled {
		t.Fatalf("cancelled: %+v", c)
	}

	// Cancelled by the system (the person disabled), expired, and cancelled as abandoned.
	testkit.Exec(t, pool, `INSERT INTO collaborations (user_id, conversation_id, prompt, target) VALUES ($1, 'c', $2, $3)`, alice.ID, long, target)
	if ended, err := s.CancelAsked(ctx, alice.ID); err != nil || len(ended) != 1 {
		t.Fatalf("cancel asked: %v %+v", err, ended)
	}
	for _, age := range []string{"25 hours", "5 minutes"} {
		testkit.Exec(t, pool, `INSERT INTO collaborations (user_id, conversation_id, prompt, target, created_at, heartbeat_at)
			VALUES ($1, 'c', $2, $3, now() - $4::interval, now() - $4::interval)`, alice.ID, long, target, age)
	}
	if _, err := s.Prune(ctx); err != nil {
		t.Fatal(err)
	}

	rows, err := pool.Query(ctx, `SELECT action, target_name, payload::text FROM audit_log ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := map[string]int{}
	for rows.Next() {
		var action, name, payload string
		if err := rows.Scan(&action, &name, &payload); err != nil {
			t.Fatal(err)
		}
		seen[action]++
		// "ghp_" also catches what is left of a token clipped before it was masked.
		if strings.Contains(name, "ghp_") || strings.Contains(payload, "ghp_") || strings.Contains(payload, token[4:]) {
			t.Errorf("%s audited with the token: target_name %q, payload %s", action, name, payload)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for action, want := range map[string]int{"collaboration.request": 3, "collaboration.respond": 1, "collaboration.decline": 1,
		"collaboration.cancel": 3, "collaboration.expire": 1, "grant.create": 2, "grant.use": 1, "grant.reuse": 1, "grant.revoke": 1} {
		if seen[action] != want {
			t.Errorf("%d %s entries, want %d (all: %v)", seen[action], action, want, seen)
		}
	}

	// The person's own rows keep what was written.
	if c, err := s.GetCollaboration(ctx, answered.ID); err != nil || c.Prompt != prompt || c.Target != target || !strings.Contains(c.Response, token) {
		t.Fatalf("the question kept: %v %+v", err, c)
	}
	if g, err := s.Get(ctx, g.ID); err != nil || g.Target != target {
		t.Fatalf("the grant kept: %v %+v", err, g)
	}
}
