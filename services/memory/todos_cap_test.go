package memory_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/memory"
)

// Writes and adds racing in different conversations of one person cannot together pass
// the person's todos: each conversation's list is locked apart, so the count must be
// serialized per person too. Not parallel: it lowers the limit.
func TestPersonTodosCapConcurrent(t *testing.T) {
	const limit, racers, items = 10, 16, 3
	defer memory.SetLimits(memory.MaxNotes, limit)()
	ctx := t.Context()
	pool := dbtest.New(t)
	s := memory.New(pool, nil)
	user := uuid.NewString()
	list := make([]memory.TodoChange, items)
	for i := range list {
		list[i] = memory.TodoChange{Title: fmt.Sprintf("item %d", i)}
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, racers)
	for i := range racers {
		wg.Go(func() {
			o := memory.Owner{UserID: user, ConversationID: uuid.NewString()}
			<-start
			if i%4 == 3 {
				_, errs[i] = s.AddTodo(ctx, o, "one more")
				return
			}
			_, errs[i] = s.WriteTodos(ctx, o, slices.Clone(list)) // WriteTodos cleans its items in place
		})
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		if err != nil && !fault.Is(err, fault.KindInvalid) {
			t.Fatalf("a racing write: %v", err)
		}
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM todos WHERE user_id = $1`, user).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n > limit || n < limit-items+1 {
		t.Fatalf("racing writes left the person %d todos; the most is %d, and nothing that fitted should be refused", n, limit)
	}
}
