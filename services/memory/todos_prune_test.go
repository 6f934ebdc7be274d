package memory_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/memory"
)

// A person at the todo limit is not refused for good: on /mcp each client session is a
// conversation of its own and nothing lists them, so the lists nobody changed for
// TodosKept are removed, and the refusal says so and when. A recent list, an old one
// with a recent completion, and another person's list of the same conversation id are
// kept. Not parallel: it lowers the limits.
func TestPruneTodosFreesTheLimit(t *testing.T) {
	defer memory.SetLimits(memory.MaxNotes, 6)()
	defer memory.SetPruneBatch(2)() // the four stale lists take two full batches and an empty one
	ctx := t.Context()
	pool := dbtest.New(t)
	s := memory.New(pool, nil)
	user := uuid.NewString()
	conv := func(id string) memory.Owner { return memory.Owner{UserID: user, ConversationID: id} }
	add := func(o memory.Owner, title string) memory.Todo {
		t.Helper()
		td, err := s.AddTodo(ctx, o, title)
		if err != nil {
			t.Fatal(err)
		}
		return td
	}
	age := func(o memory.Owner, created, done int) {
		t.Helper()
		if _, err := pool.Exec(ctx, `UPDATE todos SET created_at = created_at - make_interval(days => $3),
			done_at = done_at - make_interval(days => $4) WHERE user_id = $1 AND conversation_id = $2`,
			o.UserID, o.ConversationID, created, done); err != nil {
			t.Fatal(err)
		}
	}
	count := func(o memory.Owner) int {
		t.Helper()
		list, err := s.Todos(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		return len(list)
	}
	var stale []memory.Owner
	for i := range 4 {
		o := conv(fmt.Sprintf("mcp-session-%d", i))
		add(o, "old")
		age(o, 91, 91)
		stale = append(stale, o)
	}
	recent := conv("recent")
	add(recent, "current")
	completed := conv("completed-lately")
	td := add(completed, "old, but completed yesterday")
	if _, err := s.CompleteTodo(ctx, completed, td.ID); err != nil {
		t.Fatal(err)
	}
	age(completed, 120, 1)
	bob := memory.Owner{UserID: uuid.NewString(), ConversationID: stale[0].ConversationID}
	add(bob, "bob's, recent")

	// At the limit: the refusal says what happens and what the person can do.
	var oldest time.Time
	if err := pool.QueryRow(ctx, `SELECT min(created_at) FROM todos WHERE user_id = $1 AND status <> 'completed'`, user).Scan(&oldest); err != nil {
		t.Fatal(err)
	}
	_, err := s.AddTodo(ctx, conv("new"), "one more")
	if !fault.Is(err, fault.KindInvalid) {
		t.Fatalf("an add past the limit: %v", err)
	}
	for _, want := range []string{"unchanged for 90 days is removed", "manage_todos write with an empty list",
		"unchanged since " + oldest.UTC().Format(time.DateOnly), "goes after " + oldest.Add(memory.TodosKept).UTC().Format(time.DateOnly)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}

	removed, err := s.PruneTodos(ctx, memory.TodosKept)
	if err != nil || removed != 4 {
		t.Fatalf("prune: removed %d, %v; want the 4 stale lists' todos", removed, err)
	}
	for _, o := range stale {
		if n := count(o); n != 0 {
			t.Errorf("%s: %d todos left", o.ConversationID, n)
		}
	}
	if count(recent) != 1 || count(completed) != 1 || count(bob) != 1 {
		t.Fatalf("a list changed within 90 days was removed: recent %d, completed lately %d, bob's %d",
			count(recent), count(completed), count(bob))
	}
	add(conv("new"), "one more")
	if removed, err := s.PruneTodos(ctx, memory.TodosKept); err != nil || removed != 0 {
		t.Fatalf("a second prune: removed %d, %v", removed, err)
	}
}

// A list being changed while the prune runs is kept whole: the prune takes the list's
// lock (as AddTodo does) and checks the list again under it, so an add that commits
// meanwhile is seen, and the list's old items are not removed from under it.
func TestPruneTodosWaitsForAChange(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.New(t)
	s := memory.New(pool, nil)
	o := memory.Owner{UserID: uuid.NewString(), ConversationID: "conv-busy"}
	if _, err := s.AddTodo(ctx, o, "old"); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE todos SET created_at = created_at - interval '91 days' WHERE user_id = $1`, o.UserID); err != nil {
		t.Fatal(err)
	}
	// An add under way, as AddTodo makes it (lockList's key).
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('todos:' || $1 || ':' || $2, 0))`, o.UserID, o.ConversationID); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO todos (user_id, conversation_id, title) VALUES ($1, $2, 'new')`, o.UserID, o.ConversationID); err != nil {
		t.Fatal(err)
	}
	type result struct {
		n   int64
		err error
	}
	done := make(chan result, 1)
	go func() { n, err := s.PruneTodos(ctx, memory.TodosKept); done <- result{n, err} }()
	select {
	case r := <-done:
		t.Fatalf("the prune did not wait for the list's change: removed %d, %v", r.n, r.err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.err != nil || r.n != 0 {
		t.Fatalf("prune: removed %d, %v; want the list kept", r.n, r.err)
	}
	if list, err := s.Todos(ctx, o); err != nil || len(list) != 2 {
		t.Fatalf("the list after the prune: %+v %v", list, err)
	}
}

// A list whose items were only renamed or started within TodosKept is in use: the prune
// keeps it, and the limit's refusal counts those changes for when it goes. Before,
// only adds, writes and completions counted, and a list being worked on was removed.
func TestPruneTodosKeepsARenamedList(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.New(t)
	s := memory.New(pool, nil)
	user := uuid.NewString()
	renamed := memory.Owner{UserID: user, ConversationID: "renamed"}
	started := memory.Owner{UserID: user, ConversationID: "started"}
	idle := memory.Owner{UserID: user, ConversationID: "idle"}
	ids := map[string]string{}
	for _, o := range []memory.Owner{renamed, started, idle} {
		td, err := s.AddTodo(ctx, o, "old item")
		if err != nil {
			t.Fatal(err)
		}
		ids[o.ConversationID] = td.ID
	}
	if _, err := pool.Exec(ctx, `UPDATE todos SET created_at = created_at - interval '91 days' WHERE user_id = $1`, user); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateTodos(ctx, renamed, []memory.TodoChange{{ID: ids["renamed"], Title: "old item, renamed"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateTodos(ctx, started, []memory.TodoChange{{ID: ids["started"], Status: memory.TodoInProgress}}); err != nil {
		t.Fatal(err)
	}
	removed, err := s.PruneTodos(ctx, memory.TodosKept)
	if err != nil || removed != 1 {
		t.Fatalf("prune: removed %d, %v; want only the idle list's item", removed, err)
	}
	for _, o := range []memory.Owner{renamed, started} {
		if list, err := s.Todos(ctx, o); err != nil || len(list) != 1 {
			t.Errorf("%s: %d todos, %v; a list changed lately was removed", o.ConversationID, len(list), err)
		}
	}
}
