package audit

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// waitingIn counts the goroutines blocked (on a channel or a select) with every one of
// fns on their stack.
func waitingIn(fns ...string) int {
	count := 0
	for _, g := range testkit.Goroutines() {
		head, _, _ := strings.Cut(g, "\n")
		blocked := strings.Contains(head, "[select") || strings.Contains(head, "[chan ")
		for _, fn := range fns {
			blocked = blocked && strings.Contains(g, fn)
		}
		if blocked {
			count++
		}
	}
	return count
}

// API checks asked for while one runs share the next check: however many ask, at most
// one more runs after the running one, and each caller gets a check that began after
// it asked.
func TestVerifyNowShared(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	chainOf(t, pool, 40)
	l := NewLog(pool)
	t.Cleanup(l.Close)

	const callers = 20
	l.checking <- struct{}{} // a check reads the chain: every caller has to wait
	var wg sync.WaitGroup
	got := make([]Verification, callers)
	errs := make([]error, callers)
	for i := range callers {
		wg.Go(func() { got[i], errs[i] = l.VerifyNow(ctx, "api") })
	}
	// Every caller is waiting before the chain is free (a wait, not a measure).
	waiting := func() int { return waitingIn("audit.(*Log).VerifyNow(", "audit.TestVerifyNowShared.func") }
	for deadline := time.Now().Add(time.Minute); waiting() < callers; {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d callers waiting", waiting(), callers)
		}
		time.Sleep(5 * time.Millisecond)
	}
	<-l.checking
	wg.Wait()
	for i := range callers {
		if errs[i] != nil || !got[i].OK || got[i].VerifiedThrough != 40 {
			t.Fatalf("caller %d: %+v, %v; want OK through 40", i, got[i], errs[i])
		}
	}
	var checks int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM audit_verifications`).Scan(&checks); err != nil {
		t.Fatal(err)
	}
	if checks > 2 {
		t.Fatalf("%d concurrent API checks ran %d checks of the chain; want at most 2 (the running one and one shared after it)", callers, checks)
	}
}
