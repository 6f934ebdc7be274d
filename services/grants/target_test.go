package grants_test

import (
	"context"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/grants"
)

// A question's target is stored, shown and granted as given, a file operation's too:
// the asker puts it in the form the guard matches (builtin's user_collaboration), and
// grants, which know neither the workspace nor the guard's rule, change nothing. The
// grant then allows exactly that target.
func TestAskStoresTheTargetAsGiven(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	s := grants.New(pool, nil)
	alice := addUser(t, pool, "alice")

	// approve asks q, checks the question the person is shown names want, approves it
	// and returns the collaboration.
	approve := func(q grants.Question, want string) grants.Collaboration {
		t.Helper()
		q.UserID, q.UserName, q.ConversationID, q.Prompt = alice.ID, "alice", "conv-t", "May I?"
		done := make(chan grants.Collaboration, 1)
		go func() {
			c, err := s.Ask(ctx, q)
			if err != nil {
				t.Error(err)
			}
			done <- c
		}()
		var list []grants.Collaboration
		for deadline := time.Now().Add(10 * time.Second); len(list) == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			var err error
			if list, err = s.Collaborations(ctx, alice.ID, grants.StatusPending); err != nil {
				t.Fatal(err)
			}
		}
		if len(list) != 1 {
			t.Fatalf("pending: %+v", list)
		}
		if list[0].Target != want {
			t.Fatalf("the person is shown target %q, want %q", list[0].Target, want)
		}
		if _, err := s.Respond(ctx, alice, list[0].ID, "yes"); err != nil {
			t.Fatal(err)
		}
		return <-done
	}

	for _, q := range []grants.Question{
		{AuthorizeOperation: "file_operations.create_file", Target: "/root/ws/x"},
		{AuthorizeOperation: "file_operations.create_file", Target: "../ws/notes.md"},
		{AuthorizeOperation: "delete_file", Target: "/root/./ws/y/"},
		{AuthorizeOperation: "terminal_operations.run_command", Target: "make  test/./"},
	} {
		c := approve(q, q.Target)
		if !c.Approved() || c.GrantID == nil {
			t.Fatalf("%+v: %+v", q, c)
		}
		if g, err := s.Get(ctx, *c.GrantID); err != nil || g.Target != q.Target {
			t.Fatalf("%+v: the grant's target %q (%v)", q, g.Target, err)
		}
		if ok, err := s.Allow(ctx, "conv-t", q.AuthorizeOperation, q.Target); err != nil || !ok {
			t.Fatalf("%+v: the grant does not allow its target (%v)", q, err)
		}
	}
	c := approve(grants.Question{Target: "../somewhere/"}, "../somewhere/")
	if c.Status != grants.StatusAnswered {
		t.Fatalf("a question that authorizes nothing: %+v", c)
	}
}
