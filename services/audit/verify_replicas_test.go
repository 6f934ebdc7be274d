package audit

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// The running check is recorded when it starts: another replica shows it, with how far
// it got, and a Verify there does not start a second one. A check left running by a
// replica that stopped is said to be abandoned, and the next Verify runs it again.
func TestVerifyRunningOnEveryReplica(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	chainOf(t, pool, 5)
	a, b := NewLog(pool), NewLog(pool)
	t.Cleanup(a.Close)
	t.Cleanup(b.Close)

	a.checking <- struct{}{} // a's check waits for its turn to read the chain
	a.StartVerify("carol")
	var st *Verification
	for deadline := time.Now().Add(30 * time.Second); ; { // a wait, not a measure
		var err error
		if st, err = b.VerifyStatus(ctx); err != nil {
			t.Fatal(err)
		}
		if st != nil && st.Running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("another replica's status while a check runs: %+v; want it running", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if st.StartedBy != "carol" || st.Checked != 0 || st.Total != 5 {
		t.Fatalf("another replica's status while a check runs: %+v; want carol's, 0 of 5 checked", st)
	}
	b.StartVerify("dave")
	b.WaitVerify()
	if st, err := b.VerifyStatus(ctx); err != nil || st == nil || !st.Running || st.StartedBy != "carol" {
		t.Fatalf("after a Verify on another replica: %+v, %v; want carol's check still the one running", st, err)
	}
	<-a.checking
	a.WaitVerify()
	var checks int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM audit_verifications`).Scan(&checks); err != nil || checks != 1 {
		t.Fatalf("%d checks recorded (%v); want 1: a Verify while another replica's runs starts none", checks, err)
	}
	if st, err := b.VerifyStatus(ctx); err != nil || st == nil || st.Running || !st.OK || st.VerifiedThrough != 5 || st.StartedBy != "carol" {
		t.Fatalf("after the check: %+v, %v; want carol's, OK through 5", st, err)
	}

	// A replica that stopped mid-check (no word from it for minutes).
	if _, err := pool.Exec(ctx, `INSERT INTO audit_verifications (started_at, started_by, ok, checked, total, verified_through, progress_at)
		VALUES (now() - interval '3 minutes', 'erin', false, 2, 5, 0, now() - interval '2 minutes')`); err != nil {
		t.Fatal(err)
	}
	if st, err := b.VerifyStatus(ctx); err != nil || st == nil || st.Running || !strings.Contains(st.Err, "abandoned") {
		t.Fatalf("a check whose replica stopped: %+v, %v; want it said abandoned, not running", st, err)
	}
	b.StartVerify("dave")
	b.WaitVerify()
	if st, err := a.VerifyStatus(ctx); err != nil || st == nil || st.Running || !st.OK || st.StartedBy != "dave" {
		t.Fatalf("Verify after an abandoned check: %+v, %v; want dave's, OK", st, err)
	}
}
