package audit

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// One check reads the chain at a time, whoever asked (the page's background check, API
// calls), and a background check that could not be made stays on the page until the
// next one starts, which a page's Verify may start at once.
func TestVerifyRunsOneAtATime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := dbtest.NewURL(t)
	pool, err := db.NewPool(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	chainOf(t, pool, 5)
	l := NewLog(pool)
	t.Cleanup(l.Close)

	l.checking <- struct{}{} // a check reads the chain
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := l.VerifyNow(short, "api"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("an API check while another reads: got %v, want it to wait (until its deadline)", err)
	}
	if v := l.StartVerify("carol"); !v.Running {
		t.Fatalf("background check: %+v", v)
	}
	time.Sleep(100 * time.Millisecond)
	if st, _ := l.VerifyStatus(ctx); st == nil || !st.Running || st.Checked != 0 {
		t.Fatalf("a background check while another reads: %+v, want it waiting", st)
	}
	<-l.checking
	l.WaitVerify()
	if st, err := l.VerifyStatus(ctx); err != nil || st == nil || !st.OK || st.Running || st.VerifiedThrough != 5 {
		t.Fatalf("after the other check: %+v, %v", st, err)
	}

	// A check that cannot be made (its database gone) says so until the next one.
	broken, err := db.NewPool(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	lb := NewLog(broken)
	t.Cleanup(lb.Close)
	broken.Close()
	lb.StartVerify("carol")
	lb.WaitVerify()
	for range 2 {
		if st, _ := lb.VerifyStatus(ctx); st == nil || st.Running || st.OK || st.Err == "" {
			t.Fatalf("a check that could not be made: %+v, want it said on every read", st)
		}
	}
	if v := lb.StartVerify("carol"); !v.Running {
		t.Fatalf("Verify after a check that could not be made: %+v, want a new check", v)
	}
	lb.WaitVerify()

	// A check recorded after it (the API's, another replica's) is the one shown then.
	lc := NewLog(pool)
	lc.checking <- struct{}{}
	lc.StartVerify("carol")
	lc.Close() // the check, still waiting for its turn, ends unmade
	<-lc.checking
	if st, _ := lc.VerifyStatus(ctx); st == nil || st.Err == "" {
		t.Fatalf("a check ended before it was made: %+v", st)
	}
	time.Sleep(10 * time.Millisecond) // a later start
	// Another replica's (lc is closed: its checks no longer run).
	ld := NewLog(pool)
	t.Cleanup(ld.Close)
	if v, err := ld.VerifyNow(ctx, "api"); err != nil || !v.OK {
		t.Fatalf("API check: %+v, %v", v, err)
	}
	if st, _ := lc.VerifyStatus(ctx); st == nil || st.Err != "" || !st.OK || st.StartedBy != "api" {
		t.Fatalf("after a newer check was recorded: %+v, want that one", st)
	}
}
