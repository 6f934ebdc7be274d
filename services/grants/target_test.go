package grants_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/grants"
)

// A question's file target is stored, shown and granted as the path guard matches it:
// the absolute, clean path. Before, "/root/./ws/x/" was stored as written and the
// approved grant never matched the guard's "/root/ws/x", so the retry was refused
// again; a relative target ("../ws/notes.md", which grants cannot resolve) is refused
// with the form expected instead of asked. Other targets (a command) stay as written.
func TestAskFileTargetIsTheGuardsPath(t *testing.T) {
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

	for _, tc := range []struct{ op, target, want string }{
		{"file_operations.create_file", "/root/./ws/x/", "/root/ws/x"},
		{"builtin__file_operations.create_file", "/root/other/../ws/y", "/root/ws/y"},
		{"delete_file", "/root/ws//z", "/root/ws/z"},           // a bare name of file_operations' allows it too
		{"file_operations", "/root/ws/d/./e/", "/root/ws/d/e"}, // the whole tool
	} {
		c := approve(grants.Question{AuthorizeOperation: tc.op, Target: tc.target}, tc.want)
		if !c.Approved() || c.GrantID == nil {
			t.Fatalf("%s %s: %+v", tc.op, tc.target, c)
		}
		g, err := s.Get(ctx, *c.GrantID)
		if err != nil || g.Target != tc.want {
			t.Fatalf("%s %s: the grant's target %q (%v), want %q", tc.op, tc.target, g.Target, err, tc.want)
		}
		guardOp := "file_operations." + strings.TrimPrefix(strings.TrimPrefix(tc.op, "builtin__"), "file_operations.")
		if tc.op == "file_operations" {
			guardOp = "file_operations.create_file"
		}
		if ok, err := s.Allow(ctx, "conv-t", guardOp, tc.want); err != nil || !ok {
			t.Fatalf("%s %s: the guard's retry on %s was refused (%v)", tc.op, tc.target, tc.want, err)
		}
	}

	for _, rel := range []string{"../ws/notes.md", "notes.md", "./x", "~/x"} {
		_, err := s.Ask(ctx, grants.Question{UserID: alice.ID, ConversationID: "conv-t", Prompt: "May I?",
			AuthorizeOperation: "file_operations.create_file", Target: rel})
		if !fault.Is(err, fault.KindInvalid) || !strings.Contains(err.Error(), "absolute path") || !strings.Contains(err.Error(), rel) {
			t.Fatalf("a relative target %q: %v", rel, err)
		}
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM collaborations WHERE target NOT LIKE '/root/ws/%'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("refused questions were recorded: %d %v", n, err)
	}

	// A command is not a path: kept as written, and so is the target of a question that
	// authorizes nothing.
	for _, q := range []grants.Question{
		{AuthorizeOperation: "terminal_operations.run_command", Target: "make  test/./"},
		{Target: "../somewhere/"},
	} {
		c := approve(q, q.Target)
		if c.Status != grants.StatusAnswered {
			t.Fatalf("%+v: %+v", q, c)
		}
	}
}
