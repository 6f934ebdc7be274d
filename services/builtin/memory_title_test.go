package builtin_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/memory"
	"github.com/toolwarden/toolwarden/services/router"
)

// manage_todos' titles are bounded by its schema as todo_add's is (memory.MaxTitle):
// before, an update's title had no maxLength, and 500 items of megabytes each reached
// memory, where padding trimmed away passed. A title at the limit passes; one past it,
// padding included, is refused before it runs.
func TestManageTodosTitleBound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	srv.App.Enable(t, "builtin__memory_operations")
	alice := srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	call := func(args string) (*router.Result, error) {
		return srv.Router.Call(ctx, router.Call{Tool: "builtin__memory_operations.manage_todos", Arguments: json.RawMessage(args),
			Actor: audit.Actor{Kind: audit.ActorUser, ID: alice.ID, Name: "alice"}, Role: auth.RoleToolUser,
			Source: router.SourceTestPanel, ConversationID: "conv-1", Approval: router.Approval{Confirmed: true}})
	}
	if res, err := call(`{"action":"write","todos":[{"title":"plan"}]}`); err != nil || res.IsError {
		t.Fatalf("write: %v %+v", err, res)
	}
	var id string
	if err := srv.Pool.QueryRow(ctx, `SELECT id::text FROM todos WHERE title = 'plan'`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	update := func(title string) (*router.Result, error) {
		args, _ := json.Marshal(map[string]any{"action": "update", "todos": []any{map[string]any{"id": id, "title": title}}})
		return call(string(args))
	}
	atLimit := strings.Repeat("z", memory.MaxTitle)
	if res, err := update(atLimit); err != nil || res.IsError {
		t.Fatalf("a title of %d characters: %v %+v", memory.MaxTitle, err, res)
	}
	for _, title := range []string{atLimit + "z", "y" + strings.Repeat(" ", 1<<20)} {
		if res, err := update(title); err == nil && !res.IsError {
			t.Fatalf("a title of %d characters was taken", len(title))
		}
	}
	if res, err := call(`{"action":"write","todos":[{"title":"` + atLimit + `z"}]}`); err == nil && !res.IsError {
		t.Fatal("a write with a title past the limit was taken")
	}
	var title string
	if err := srv.Pool.QueryRow(ctx, `SELECT title FROM todos WHERE id::text = $1`, id).Scan(&title); err != nil || title != atLimit {
		t.Fatalf("the todo's title is %d characters (%v), want the %d it was given last", len(title), err, memory.MaxTitle)
	}
}
