package builtin_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/router"
)

// memory_operations through the router: store, search (best first), the dotted form,
// todos, and the display lines.
func TestMemoryOperations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	srv.App.Enable(t, "builtin__memory_operations")
	alice := srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	call := func(tool, args string) string {
		t.Helper()
		res, err := srv.Router.Call(ctx, router.Call{Tool: tool, Arguments: json.RawMessage(args),
			Actor: audit.Actor{Kind: audit.ActorUser, ID: alice.ID, Name: "alice"}, Role: auth.RoleToolUser,
			Source: router.SourceTestPanel, ConversationID: "conv-1", Approval: router.Approval{Confirmed: true}}) // MEDIUM: confirmed in a page
		if err != nil || res.IsError {
			t.Fatalf("%s %s: %v %+v", tool, args, err, res)
		}
		return router.TextOf(res.Content)
	}
	call("builtin__memory_operations", `{"operation":"store","content":"the staging server is db-2"}`)
	call("builtin__memory_operations", `{"operation":"store","content":"staging deploys go through db-2 staging","tags":["staging"]}`)
	got := call("builtin__memory_operations.search", `{"query":"staging"}`)
	lines := strings.Split(got, "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "deploys") {
		t.Fatalf("search: %q", got)
	}
	call("builtin__memory_operations", `{"operation":"todo_add","title":"check db-2"}`)
	if got := call("builtin__memory_operations", `{"operation":"todo_list"}`); !strings.HasPrefix(got, "[ ] check db-2") {
		t.Fatalf("todo_list: %q", got)
	}
	// Seed 000's manage_todos: write the list, start and complete items, read it.
	got = call("builtin__memory_operations.manage_todos", `{"action":"write","todos":[{"title":"plan"},{"title":"build","status":"in-progress"}]}`)
	if !strings.HasPrefix(got, "[ ] plan") || !strings.Contains(got, "[~] build") {
		t.Fatalf("manage_todos write: %q", got)
	}
	var id string
	if err := srv.Pool.QueryRow(ctx, `SELECT id::text FROM todos WHERE title = 'plan'`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	call("builtin__memory_operations", `{"operation":"manage_todos","action":"update","todos":[{"id":"`+id+`","status":"completed"}]}`)
	if got := call("builtin__memory_operations", `{"operation":"manage_todos","action":"read"}`); !strings.HasPrefix(got, "[x] plan") ||
		!strings.Contains(got, "[~] build") || strings.Contains(got, "check db-2") {
		t.Fatalf("manage_todos read: %q", got)
	}
	b := srv.App.Builtin
	for args, want := range map[string]string{
		`{"operation":"search","query":"staging"}`:                                                               "Searching memory: staging",
		`{"operation":"todo_list"}`:                                                                              "Reading todo list",
		`{"operation":"store","content":"x"}`:                                                                    "Remembering: x",
		`{"operation":"manage_todos","action":"write","todos":[{"title":"a"},{"title":"b"}]}`:                    "Creating todo list: 2 tasks",
		`{"operation":"manage_todos","action":"update","todos":[{"id":"1","title":"a","status":"completed"}]}`:   "Completed: a",
		`{"operation":"manage_todos","action":"update","todos":[{"id":"1","title":"a","status":"in-progress"}]}`: "Starting: a",
		`{"operation":"manage_todos","action":"update","todos":[{"id":"1"},{"id":"2"}]}`:                         "Updating 2 todos",
		`{"operation":"manage_todos","action":"read"}`:                                                           "Reading todo list",
	} {
		if d := b.Display("memory_operations", json.RawMessage(args)); d != want {
			t.Errorf("display of %s: %q, want %q", args, d, want)
		}
	}
	if d := b.Display("user_collaboration", json.RawMessage(`{"prompt":"May I?"}`)); d != "Asking the user: May I?" {
		t.Errorf("display: %q", d)
	}
}
