package memory_test

import (
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
