package memory_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/memory"
)

// An update's title is trimmed as a write's is: before, "y" and 2 MiB of spaces passed
// checkTitle (1 character once trimmed) and were stored whole, in the row and in the
// audit log's target_name. The caller's changes are left as they were given.
func TestUpdateTodosTrimsTitle(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.New(t)
	s := memory.New(pool, nil)
	o := memory.Owner{UserID: uuid.NewString(), ConversationID: "conv-trim"}
	todo, err := s.AddTodo(ctx, o, "x")
	if err != nil {
		t.Fatal(err)
	}
	padded := "  y" + strings.Repeat(" ", 2<<20)
	changes := []memory.TodoChange{{ID: todo.ID, Title: padded}}
	got, err := s.UpdateTodos(ctx, o, changes)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Title != "y" {
		t.Fatalf("the updated todo's title: %q…", got[0].Title[:min(len(got[0].Title), 20)])
	}
	if changes[0].Title != padded {
		t.Fatal("UpdateTodos changed the caller's slice")
	}
	var title, target string
	if err := pool.QueryRow(ctx, `SELECT title FROM todos WHERE id::text = $1`, todo.ID).Scan(&title); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT target_name FROM audit_log WHERE action = 'todo.update' AND target_id = $1`,
		todo.ID).Scan(&target); err != nil {
		t.Fatal(err)
	}
	if title != "y" || target != "y" {
		t.Fatalf("stored title %d bytes, audit target_name %d bytes; want both \"y\"", len(title), len(target))
	}
	// Padding does not count against the limit; the characters left do.
	if _, err := s.UpdateTodos(ctx, o, []memory.TodoChange{{ID: todo.ID, Title: " " + strings.Repeat("z", memory.MaxTitle) + " "}}); err != nil {
		t.Fatalf("a title of %d characters once trimmed: %v", memory.MaxTitle, err)
	}
	if _, err := s.UpdateTodos(ctx, o, []memory.TodoChange{{ID: todo.ID, Title: strings.Repeat("z", memory.MaxTitle+1)}}); !fault.Is(err, fault.KindInvalid) {
		t.Fatalf("a title of %d characters: %v", memory.MaxTitle+1, err)
	}
	if _, err := s.UpdateTodos(ctx, o, []memory.TodoChange{{ID: todo.ID, Title: "   "}}); !fault.Is(err, fault.KindInvalid) {
		t.Fatalf("a title of spaces only: %v", err)
	}
}

// A refused batch names the item at fault: a title of spaces only at todos[3] of a
// write, an unknown id (or another conversation's) at todos[7] of an update. Before,
// they said "title: between 1 and 1000 characters" and "todo not found". A single
// todo_add or todo_complete names its own argument (title, id).
func TestTodoBatchNamesTheItem(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.New(t)
	s := memory.New(pool, nil)
	o := memory.Owner{UserID: uuid.NewString(), ConversationID: "conv-batch"}
	other := memory.Owner{UserID: o.UserID, ConversationID: "conv-other"}
	items := make([]memory.TodoChange, 10)
	for i := range items {
		items[i] = memory.TodoChange{Title: "item"}
	}
	items[3].Title = " \t "
	_, err := s.WriteTodos(ctx, o, slices.Clone(items))
	if want := "todos[3].title: between 1 and 1000 characters once trimmed"; !fault.Is(err, fault.KindInvalid) || err.Error() != want {
		t.Fatalf("a write with a blank title at 3: %v, want %q", err, want)
	}
	items[3].Title, items[5].Status = "item", "done"
	if _, err := s.WriteTodos(ctx, o, slices.Clone(items)); !fault.Is(err, fault.KindInvalid) || !strings.HasPrefix(err.Error(), "todos[5].status: one of") {
		t.Fatalf("a write with a bad status at 5: %v", err)
	}
	items[5].Status = ""
	list, err := s.WriteTodos(ctx, o, slices.Clone(items))
	if err != nil {
		t.Fatal(err)
	}
	elsewhere, err := s.AddTodo(ctx, other, "another conversation's")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{uuid.NewString(), elsewhere.ID, "not-a-uuid"} {
		changes := make([]memory.TodoChange, len(list))
		for i, td := range list {
			changes[i] = memory.TodoChange{ID: td.ID, Status: memory.TodoCompleted}
		}
		changes[7].ID = id
		_, err := s.UpdateTodos(ctx, o, changes)
		want := `todos[7].id: no todo "` + id + `" in this conversation's list (a todo belongs to the conversation it was added in)`
		if !fault.Is(err, fault.KindNotFound) || err.Error() != want {
			t.Fatalf("an update with %q at 7: %v, want %q", id, err, want)
		}
	}
	changes := []memory.TodoChange{{ID: list[0].ID, Title: "ok"}, {ID: list[1].ID, Title: "   "}}
	if _, err := s.UpdateTodos(ctx, o, changes); err == nil || err.Error() != "todos[1].title: between 1 and 1000 characters once trimmed" {
		t.Fatalf("an update with a blank title at 1: %v", err)
	}
	// All or none: nothing of the refused updates was kept.
	if got, err := s.Todos(ctx, o); err != nil || got[0].Title != "item" || got[0].Done {
		t.Fatalf("after the refused updates: %+v %v", got[0], err)
	}
	if _, err := s.AddTodo(ctx, o, "  "); err == nil || err.Error() != "title: between 1 and 1000 characters once trimmed" {
		t.Fatalf("todo_add with a blank title: %v", err)
	}
	if _, err := s.CompleteTodo(ctx, o, elsewhere.ID); !fault.Is(err, fault.KindNotFound) ||
		err.Error() != `id: no todo "`+elsewhere.ID+`" in this conversation's list (a todo belongs to the conversation it was added in)` {
		t.Fatalf("todo_complete of another conversation's todo: %v", err)
	}
}
