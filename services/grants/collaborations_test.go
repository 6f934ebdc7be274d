package grants_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/grants"
)

// CancelAsked cancels the questions waiting for a disabled person: the call waiting for
// one returns cancelled, and two replicas doing it at once cancel and audit each question
// once, as the system's. Another person's question still waits.
func TestCancelAsked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	here, there := grants.New(pool, nil), grants.New(pool, nil) // two replicas
	alice := addUser(t, pool, "alice")
	bob := addUser(t, pool, "bob")
	if _, err := pool.Exec(ctx, `INSERT INTO collaborations (user_id, conversation_id, prompt) VALUES ($1, 'c', 'left waiting')`, alice.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO collaborations (user_id, conversation_id, prompt) VALUES ($1, 'c', 'for bob')`, bob.ID); err != nil {
		t.Fatal(err)
	}
	done := make(chan grants.Collaboration, 1)
	errs := make(chan error, 1)
	go func() {
		c, err := here.Ask(ctx, grants.Question{UserID: alice.ID, UserName: "alice", ConversationID: "c", Prompt: "May I deploy?"})
		errs <- err
		done <- c
	}()
	testkit.WaitFor(t, 10*time.Second, func() bool {
		list, err := here.Collaborations(ctx, alice.ID, grants.StatusPending)
		return err == nil && len(list) == 2
	}, "alice's two questions pending")

	var wg sync.WaitGroup
	counts := make([]int, 2)
	for i, s := range []*grants.Service{here, there} {
		wg.Go(func() {
			ended, err := s.CancelAsked(ctx, alice.ID)
			if err != nil {
				t.Error(err)
			}
			counts[i] = len(ended)
		})
	}
	wg.Wait()
	if counts[0]+counts[1] != 2 {
		t.Fatalf("cancelled %v, want the two questions once in all", counts)
	}
	select {
	case c := <-done:
		if err := <-errs; err != nil || c.Status != grants.StatusCancelled {
			t.Fatalf("the waiting call: %v %+v", err, c)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the call still waits for a cancelled question")
	}
	if ended, err := there.CancelAsked(ctx, alice.ID); err != nil || len(ended) != 0 {
		t.Fatalf("again: %v %+v", err, ended)
	}
	if n := testkit.Count(t, pool, `SELECT count(*) FROM audit_log WHERE action = 'collaboration.cancel' AND actor_kind = 'system'
		AND payload->>'reason' = 'the person asked was disabled'`); n != 2 {
		t.Fatalf("%d cancellations audited, want 2", n)
	}
	if list, err := here.Collaborations(ctx, bob.ID, grants.StatusPending); err != nil || len(list) != 1 {
		t.Fatalf("bob's question: %v %+v", err, list)
	}
}

// An agent may leave at most 20 questions waiting for one person: the next is
// refused at once (it would wait and heartbeat for a day), an answer frees a slot, and
// another person's questions do not count.
func TestAskCap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	s := grants.New(pool, nil)
	alice := addUser(t, pool, "alice")
	bob := addUser(t, pool, "bob")
	const most = 20 // grants.MaxPending, the number docs/api.md gives
	for i := range most {
		if _, err := pool.Exec(ctx, `INSERT INTO collaborations (user_id, conversation_id, prompt) VALUES ($1, 'c', $2)`,
			alice.ID, fmt.Sprintf("question %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `INSERT INTO collaborations (user_id, conversation_id, prompt) VALUES ($1, 'c', 'for bob')`, bob.ID); err != nil {
		t.Fatal(err)
	}
	// Bounded so that, without the cap, the call gives up instead of waiting a day.
	bounded, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	c, err := s.Ask(bounded, grants.Question{UserID: alice.ID, UserName: "alice", ConversationID: "c", Prompt: "one more?"})
	if f, ok := fault.As(err); !ok || f.Code != "too_many_questions" || f.Kind != fault.KindConflict ||
		!strings.Contains(f.Message, "answer or cancel") {
		t.Fatalf("the 21st question: %v %+v, want too_many_questions", err, c)
	}
	if n := testkit.Count(t, pool, `SELECT count(*) FROM collaborations WHERE user_id = $1`, alice.ID); n != most {
		t.Fatalf("%d questions stored, want %d: the refused one is not", n, most)
	}

	list, err := s.Collaborations(ctx, alice.ID, grants.StatusPending)
	if err != nil || len(list) != most {
		t.Fatalf("pending: %v %d", err, len(list))
	}
	if _, err := s.Respond(ctx, alice, list[0].ID, "yes"); err != nil {
		t.Fatal(err)
	}
	asking, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		c   grants.Collaboration
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := s.Ask(asking, grants.Question{UserID: alice.ID, UserName: "alice", ConversationID: "c", Prompt: "now?"})
		done <- result{c, err}
	}()
	testkit.WaitFor(t, 10*time.Second, func() bool {
		return testkit.Count(t, pool, `SELECT count(*) FROM collaborations WHERE user_id = $1 AND prompt = 'now?' AND status = 'pending'`, alice.ID) == 1
	}, "the question after an answer waits")
	cancel()
	if r := <-done; r.err != nil || r.c.Status != grants.StatusCancelled {
		t.Fatalf("the question after an answer: %v %+v", r.err, r.c)
	}
	// Bob has one question waiting, far from the cap.
	bobAsks, cancelBob := context.WithCancel(ctx)
	defer cancelBob()
	go func() {
		c, err := s.Ask(bobAsks, grants.Question{UserID: bob.ID, UserName: "bob", ConversationID: "c", Prompt: "bob too?"})
		done <- result{c, err}
	}()
	testkit.WaitFor(t, 10*time.Second, func() bool {
		return testkit.Count(t, pool, `SELECT count(*) FROM collaborations WHERE user_id = $1 AND status = 'pending'`, bob.ID) == 2
	}, "bob's second question waits")
	cancelBob()
	if r := <-done; r.err != nil || r.c.Status != grants.StatusCancelled {
		t.Fatalf("bob's question: %v %+v", r.err, r.c)
	}
}
