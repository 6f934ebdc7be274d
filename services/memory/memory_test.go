package memory_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/toolwarden/toolwarden/services/audit"
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

// A bulk update waiting for a todo another transaction holds must not hold the journal
// lock while it waits: that transaction (a todo_complete of the same item) appends its
// audit entry next, and the two would deadlock (40P01). Both must succeed.
func TestUpdateTodosWaitsWithoutJournalLock(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.New(t)
	s := memory.New(pool, nil)
	o := memory.Owner{UserID: aliceID, ConversationID: "conv-1"}
	a, err := s.AddTodo(ctx, o, "first")
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.AddTodo(ctx, o, "second")
	if err != nil {
		t.Fatal(err)
	}

	raw, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = raw.Rollback(context.WithoutCancel(ctx)) }()
	var rawPID int
	if err := raw.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&rawPID); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(ctx, `UPDATE todos SET status = 'in-progress' WHERE id = $1`, b.ID); err != nil {
		t.Fatal(err)
	}

	type result struct {
		todos []memory.Todo
		err   error
	}
	done := make(chan result, 1)
	go func() {
		ts, err := s.UpdateTodos(ctx, o, []memory.TodoChange{{ID: a.ID, Status: memory.TodoCompleted}, {ID: b.ID, Status: memory.TodoCompleted}})
		done <- result{ts, err}
	}()
	// Wait until the update is blocked on the raw transaction's row lock.
	deadline := time.Now().Add(time.Minute)
	for {
		var waiting int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, rawPID).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		select {
		case r := <-done:
			t.Fatalf("the update finished without waiting for the held todo: %+v %v", r.todos, r.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the update never waited for the held todo")
		}
		time.Sleep(10 * time.Millisecond)
	}

	if _, err := audit.Append(ctx, raw, audit.Entry{Actor: audit.Actor{Kind: audit.ActorUser, ID: aliceID},
		Action: "todo.update", TargetType: "todo", TargetID: b.ID}); err != nil {
		t.Fatalf("the holder's audit entry: %v", err)
	}
	if err := raw.Commit(ctx); err != nil {
		t.Fatalf("the holder's commit: %v", err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("the bulk update: %v", r.err)
	}
	if len(r.todos) != 2 || r.todos[0].ID != a.ID || r.todos[1].ID != b.ID || !r.todos[0].Done || !r.todos[1].Done {
		t.Fatalf("updated: %+v", r.todos)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action = 'todo.complete' AND target_id = ANY($1)`,
		[]string{a.ID, b.ID}).Scan(&n); err != nil || n != 2 {
		t.Fatalf("todo.complete entries: %d %v, want 2", n, err)
	}
}

// A todo list holds at most 500 items: the 501st add is refused (it would be stored but
// never listed), saying the list is full.
func TestAddTodoToFullList(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := memory.New(dbtest.New(t), nil)
	o := memory.Owner{UserID: aliceID, ConversationID: "conv-1"}
	items := make([]memory.TodoChange, memory.MaxTodos)
	for i := range items {
		items[i] = memory.TodoChange{Title: fmt.Sprintf("item %d", i)}
	}
	if _, err := s.WriteTodos(ctx, o, items); err != nil {
		t.Fatal(err)
	}
	_, err := s.AddTodo(ctx, o, "one too many")
	if !fault.Is(err, fault.KindInvalid) || !strings.Contains(err.Error(), "full") {
		t.Fatalf("adding to a full list: %v", err)
	}
	if list, err := s.Todos(ctx, o); err != nil || len(list) != memory.MaxTodos {
		t.Fatalf("todos: %d %v", len(list), err)
	}
	// Another conversation's list is its own.
	if _, err := s.AddTodo(ctx, memory.Owner{UserID: aliceID, ConversationID: "conv-2"}, "elsewhere"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WriteTodos(ctx, o, append(items, memory.TodoChange{Title: "over"})); !fault.Is(err, fault.KindInvalid) {
		t.Fatalf("writing 501: %v", err)
	}
}

// A person keeps at most so many notes and todos across their conversations (whose ids
// callers choose): past that, storing or adding is refused with what to do, in any
// conversation, while another person is not affected. Not parallel: it lowers the limits.
func TestPersonLimits(t *testing.T) {
	defer memory.SetLimits(3, 5)()
	ctx := t.Context()
	s := memory.New(dbtest.New(t), nil)
	alice := func(conv string) memory.Owner { return memory.Owner{UserID: aliceID, ConversationID: conv} }
	for i := range 3 {
		if _, err := s.Store(ctx, alice(fmt.Sprintf("c%d", i)), "note", nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Store(ctx, alice("c9"), "a long tag", []string{strings.Repeat("t", memory.MaxTag+1)}); !fault.Is(err, fault.KindInvalid) || !strings.Contains(err.Error(), "each at most 100 characters") {
		t.Fatalf("a tag of %d characters: %v", memory.MaxTag+1, err)
	}
	if _, err := s.Store(ctx, alice("c9"), "one too many", nil); !fault.Is(err, fault.KindInvalid) || !strings.Contains(err.Error(), "3 notes") {
		t.Fatalf("a fourth note in a new conversation: %v", err)
	}
	if _, err := s.Store(ctx, memory.Owner{UserID: bobID, ConversationID: "c9"}, "bob's", nil); err != nil {
		t.Fatalf("another person's note: %v", err)
	}
	if _, err := s.WriteTodos(ctx, alice("c1"), []memory.TodoChange{{Title: "a"}, {Title: "b"}, {Title: "c"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WriteTodos(ctx, alice("c2"), []memory.TodoChange{{Title: "d"}, {Title: "e"}, {Title: "f"}}); !fault.Is(err, fault.KindInvalid) {
		t.Fatalf("a list past the person's todos: %v", err)
	}
	if _, err := s.AddTodo(ctx, alice("c2"), "d"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddTodo(ctx, alice("c3"), "e"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddTodo(ctx, alice("c4"), "f"); !fault.Is(err, fault.KindInvalid) || !strings.Contains(err.Error(), "5 is the most") {
		t.Fatalf("a sixth todo: %v", err)
	}
	// Writing a list again counts it without its old items.
	if _, err := s.WriteTodos(ctx, alice("c1"), []memory.TodoChange{{Title: "x"}, {Title: "y"}, {Title: "z"}}); err != nil {
		t.Fatalf("writing a full list again: %v", err)
	}
}
