package memory_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/memory"
)

// A person's notes are bounded in bytes, not only in number: a note that would take
// them past the budget is refused, saying how much they keep, the limit and what to do,
// and nothing of it is stored (nor audited). Content counts in bytes (é is two). Not
// parallel: it lowers the limit.
func TestNotesBytesBudget(t *testing.T) {
	defer memory.SetBytesLimit(1000)()
	ctx := t.Context()
	pool := dbtest.New(t)
	s := memory.New(pool, nil)
	alice := memory.Owner{UserID: uuid.NewString(), ConversationID: "c1"}
	if _, err := s.Store(ctx, alice, strings.Repeat("a", 600), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Store(ctx, alice, strings.Repeat("é", 150), nil); err != nil { // 300 bytes
		t.Fatal(err)
	}
	_, err := s.Store(ctx, alice, strings.Repeat("b", 101), nil)
	if !fault.Is(err, fault.KindInvalid) || !strings.Contains(err.Error(), "900 bytes") || !strings.Contains(err.Error(), "1000 bytes") ||
		!strings.Contains(err.Error(), "delete") {
		t.Fatalf("a note past the bytes a person may keep: %v", err)
	}
	var n, size int
	if err := pool.QueryRow(ctx, `SELECT count(*), coalesce(sum(octet_length(content)), 0) FROM memories WHERE user_id = $1`, alice.UserID).Scan(&n, &size); err != nil {
		t.Fatal(err)
	}
	if n != 2 || size != 900 {
		t.Fatalf("kept %d notes of %d bytes, want 2 of 900", n, size)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action = 'memory.store'`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("memory.store entries: %d %v, want 2", n, err)
	}
	// What still fits is stored; another person has their own budget.
	if _, err := s.Store(ctx, alice, strings.Repeat("c", 100), nil); err != nil {
		t.Fatalf("a note that fits exactly: %v", err)
	}
	if _, err := s.Store(ctx, memory.Owner{UserID: uuid.NewString(), ConversationID: "c1"}, strings.Repeat("d", 1000), nil); err != nil {
		t.Fatalf("another person's note: %v", err)
	}
}

// Stores racing for the last bytes cannot all pass the check: the budget holds however
// many arrive at once. Not parallel: it lowers the limit.
func TestNotesBytesBudgetConcurrent(t *testing.T) {
	defer memory.SetBytesLimit(1000)()
	ctx := t.Context()
	pool := dbtest.New(t)
	s := memory.New(pool, nil)
	user := uuid.NewString()
	const racers = 8
	var wg sync.WaitGroup
	errs := make([]error, racers)
	for i := range racers {
		wg.Go(func() {
			_, errs[i] = s.Store(ctx, memory.Owner{UserID: user, ConversationID: uuid.NewString()}, strings.Repeat("x", 300), nil)
		})
	}
	wg.Wait()
	stored := 0
	for _, err := range errs {
		switch {
		case err == nil:
			stored++
		case !fault.Is(err, fault.KindInvalid):
			t.Fatalf("a racing store: %v", err)
		}
	}
	var size int
	if err := pool.QueryRow(ctx, `SELECT coalesce(sum(octet_length(content)), 0) FROM memories WHERE user_id = $1`, user).Scan(&size); err != nil {
		t.Fatal(err)
	}
	if stored != 3 || size != 900 {
		t.Fatalf("%d of %d racing stores passed, keeping %d bytes; want 3 and 900 of the 1000 allowed", stored, racers, size)
	}
}
