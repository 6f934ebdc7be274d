package memory_test

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/memory"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var aliceID, bobID = uuid.NewString(), uuid.NewString()

// Search is full-text and ranked: a note that says the words more (and in its tags)
// comes first; stems match (deploying → deploy); another person's notes never show.
func TestSearchRanking(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	s := memory.New(pool, nil)
	alice := memory.Owner{UserID: aliceID, ConversationID: "conv-1"}
	bob := memory.Owner{UserID: bobID, ConversationID: "conv-9"}
	store := func(o memory.Owner, content string, tags ...string) memory.Memory {
		t.Helper()
		m, err := s.Store(ctx, o, content, tags)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	weak := store(alice, "Lunch is at noon; the deploy script lives in ops/")
	strong := store(alice, "Deploy with make deploy; deploys need the staging key first", "Deploy", "ops")
	store(alice, "The database password rotates monthly")
	store(bob, "deploy deploy deploy", "deploy")

	got, err := s.Search(ctx, alice, "deploying", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != strong.ID || got[1].ID != weak.ID || !(got[0].Rank > got[1].Rank) {
		t.Fatalf("search: %+v", got)
	}
	if got[0].Tags[0] != "deploy" {
		t.Fatalf("tags are kept lowercased: %v", got[0].Tags)
	}
	if got, _ := s.Search(ctx, alice, `"staging key" -lunch`, 10); len(got) != 1 || got[0].ID != strong.ID {
		t.Fatalf("phrase and not: %+v", got)
	}
	if got, _ := s.Search(ctx, alice, "kubernetes", 10); len(got) != 0 {
		t.Fatalf("no match: %+v", got)
	}
	// List (by tag), delete (one's own only).
	if list, _ := s.List(ctx, alice, "ops", 0); len(list) != 1 || list[0].ID != strong.ID {
		t.Fatalf("list by tag: %+v", list)
	}
	if err := s.Delete(ctx, bob, strong.ID); !fault.Is(err, fault.KindNotFound) {
		t.Fatalf("bob deletes alice's note: %v", err)
	}
	if err := s.Delete(ctx, alice, strong.ID); err != nil {
		t.Fatal(err)
	}
	if list, _ := s.List(ctx, alice, "", 0); len(list) != 2 {
		t.Fatalf("after delete: %+v", list)
	}
	if _, err := s.Store(ctx, memory.Owner{}, "x", nil); err == nil {
		t.Fatal("a note of nobody")
	}
	// Every change is audited, without the note's text.
	for action, want := range map[string]int{"memory.store": 4, "memory.delete": 1} {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action = $1 AND payload::text NOT LIKE '%staging key%'`, action).Scan(&n); err != nil || n != want {
			t.Errorf("%s audit entries: %d %v, want %d", action, n, err, want)
		}
	}
}

// The todo list is the conversation's: add, complete, list in order.
func TestTodos(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := memory.New(dbtest.New(t), nil)
	o := memory.Owner{UserID: aliceID, ConversationID: "conv-1"}
	a, err := s.AddTodo(ctx, o, "write the tests")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddTodo(ctx, o, "ship it"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddTodo(ctx, memory.Owner{UserID: aliceID, ConversationID: "conv-2"}, "elsewhere"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CompleteTodo(ctx, memory.Owner{UserID: aliceID, ConversationID: "conv-2"}, a.ID); !fault.Is(err, fault.KindNotFound) {
		t.Fatalf("completing another conversation's todo: %v", err)
	}
	if done, err := s.CompleteTodo(ctx, o, a.ID); err != nil || !done.Done {
		t.Fatalf("complete: %+v %v", done, err)
	}
	list, err := s.Todos(ctx, o)
	if err != nil || len(list) != 2 || list[0].Title != "write the tests" || !list[0].Done || list[1].Done {
		t.Fatalf("todos: %+v %v", list, err)
	}
}
