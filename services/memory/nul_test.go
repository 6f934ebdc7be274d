package memory_test

import (
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/memory"
)

// A NUL character (\u0000, valid JSON) in a memory argument is refused naming its field:
// before, it reached PostgreSQL, whose "invalid byte sequence for encoding UTF8: 0x00"
// came back naming none (search's and list's from reading the rows, unwrapped).
func TestNULRefused(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.New(t)
	s := memory.New(pool, nil)
	o := memory.Owner{UserID: uuid.NewString(), ConversationID: "conv-nul"}
	todo, err := s.AddTodo(ctx, o, "x")
	if err != nil {
		t.Fatal(err)
	}
	calls := []struct {
		field string
		call  func() error
	}{
		{"content", func() error { _, err := s.Store(ctx, o, "a\x00b", nil); return err }},
		{"tags[1]", func() error { _, err := s.Store(ctx, o, "a note", []string{"ok", "t\x00g"}); return err }},
		{"title", func() error { _, err := s.AddTodo(ctx, o, "do\x00it"); return err }},
		{"query", func() error { _, err := s.Search(ctx, o, "find\x00me", 0); return err }},
		{"tag", func() error { _, err := s.List(ctx, o, "t\x00g", 0); return err }},
		{"todos[1].title", func() error {
			_, err := s.WriteTodos(ctx, o, []memory.TodoChange{{Title: "fine"}, {Title: "\x00"}})
			return err
		}},
		{"todos[0].title", func() error {
			_, err := s.UpdateTodos(ctx, o, []memory.TodoChange{{ID: todo.ID, Title: "a\x00"}})
			return err
		}},
		{"todos[0].id", func() error {
			_, err := s.UpdateTodos(ctx, o, []memory.TodoChange{{ID: "\x00", Status: "completed"}})
			return err
		}},
		{"id", func() error { return s.Delete(ctx, o, "\x00") }},
		{"conversation_id", func() error {
			_, err := s.Todos(ctx, memory.Owner{UserID: o.UserID, ConversationID: "c\x00"})
			return err
		}},
	}
	for _, c := range calls {
		err := c.call()
		if !fault.Is(err, fault.KindInvalid) || !strings.HasPrefix(err.Error(), c.field+`: contains a NUL character (\u0000)`) {
			t.Errorf("%s with a NUL: %v", c.field, err)
		}
	}
	if list, err := s.Todos(ctx, o); err != nil || len(list) != 1 || list[0].Title != "x" {
		t.Fatalf("the list after the refusals: %+v %v", list, err)
	}
}
