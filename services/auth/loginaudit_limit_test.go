package auth_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
)

// Failed sign-ins from many addresses write at most their shared budget of audit rows;
// the rest are still refused and counted for throttling, and the next row written says
// how many were not recorded.
func TestFailedLoginAuditIsBounded(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.createUser("alice", auth.RoleToolUser)
	var mu sync.Mutex
	clock := time.Now()
	f.svc.LimitLoginAudit(20, 5, func() time.Time { mu.Lock(); defer mu.Unlock(); return clock })

	fail := func(i int, ip string) {
		t.Helper()
		user := "alice"
		if i%2 == 1 {
			user = fmt.Sprintf("nobody%d", i)
		}
		if _, err := f.svc.Login(f.ctx, auth.LoginRequest{Username: user, Password: "wrong password!", IP: ip}); !errors.Is(err, auth.ErrInvalidCredentials) {
			t.Fatalf("failed sign-in %d from %s: got %v, want ErrInvalidCredentials", i, ip, err)
		}
	}
	// Within the budget, each failure writes its row as before.
	for i := range 5 {
		fail(i, fmt.Sprintf("192.0.2.%d", i+1))
	}
	rows := f.audits("user.login_failed")
	if len(rows) != 5 {
		t.Fatalf("user.login_failed rows within the budget: got %d, want 5", len(rows))
	}
	for _, r := range rows {
		if _, ok := r.Payload["withheld_before"]; ok {
			t.Errorf("row within the budget: got %v, want no withheld_before", r.Payload)
		}
	}
	// Past it, from other addresses (IPv6 networks among them): refused and counted,
	// not audited.
	for i := 5; i < 40; i++ {
		ip := fmt.Sprintf("198.51.100.%d", i)
		if i%2 == 0 {
			ip = fmt.Sprintf("2001:db8:0:%x::1", i)
		}
		fail(i, ip)
	}
	if n := len(f.audits("user.login_failed")); n != 5 {
		t.Fatalf("user.login_failed rows after 40 failures with a budget of 5: got %d, want 5", n)
	}
	// (An IPv6 failure's rows for its wider networks are not failures of their own.)
	if n := f.count(`SELECT count(*) FROM login_failures WHERE username NOT LIKE 'NETWORK %'`); n != 40 {
		t.Fatalf("login_failures rows: got %d, want 40 (every failure counted for throttling)", n)
	}

	// A minute on, the budget is back: the next failure is recorded, with how many
	// were not.
	mu.Lock()
	clock = clock.Add(time.Minute)
	mu.Unlock()
	fail(40, "203.0.113.7")
	rows = f.audits("user.login_failed")
	if len(rows) != 6 {
		t.Fatalf("user.login_failed rows after the budget refilled: got %d, want 6", len(rows))
	}
	if got := rows[5].Payload["withheld_before"]; got != float64(35) {
		t.Fatalf("withheld_before of the next row: got %v, want 35", got)
	}
	f.verifyAudit(7) // user.create and six failures
}

// failedSignIns fails n sign-ins, each from an address of its own (from address first on).
func (f *fixture) failedSignIns(from, n int) {
	f.t.Helper()
	for i := from; i < from+n; i++ {
		ip := fmt.Sprintf("2001:db8:%x:%x::1", i>>16, i&0xffff)
		if _, err := f.svc.Login(f.ctx, auth.LoginRequest{Username: "alice", Password: "wrong password!", IP: ip}); !errors.Is(err, auth.ErrInvalidCredentials) {
			f.t.Fatalf("failed sign-in %d from %s: got %v, want ErrInvalidCredentials", i, ip, err)
		}
	}
}

// systemLoginFailed is the system's user.login_failed entries and the failed sign-ins
// their withheld_before count.
func (f *fixture) systemLoginFailed() (entries, withheld int) {
	f.t.Helper()
	for _, r := range f.audits("user.login_failed") {
		if r.ActorKind == audit.ActorSystem {
			entries++
			n, _ := r.Payload["withheld_before"].(float64)
			withheld += int(n)
		}
	}
	return entries, withheld
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(within time.Duration, cond func() bool) bool {
	for end := time.Now().Add(within); ; time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}

// testClock is a clock a test moves by hand.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *testClock) Add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.t = c.t.Add(d) }

// A flood of failed sign-ins that stops leaves no later failure to count those held
// back: after the quiet interval an entry of the system's does, once, and the next
// failure recorded counts none of them again.
func TestFailedLoginPooledCountWrittenWhenFailuresStop(t *testing.T) {
	t.Parallel()
	// Forty failures at alice from as many addresses would reach the limit of the account's
	// failures from all addresses (and its audit entry): not what this test is about.
	f := newFixture(t, &auth.Options{MaxAccountFailuresAnywhere: 1000})
	f.createUser("alice", auth.RoleToolUser)
	clock := &testClock{t: time.Now()}
	const quiet = 100 * time.Millisecond
	f.svc.LimitLoginAuditQuiet(20, 5, clock.Now, quiet)
	f.failedSignIns(0, 40) // 5 recorded, 35 held back
	// A sign-in takes a while (the password hash): the quiet interval may pass during
	// the flood too, none let through counting those held back, and an entry count them.
	if !waitFor(10*time.Second, func() bool { _, withheld := f.systemLoginFailed(); return withheld >= 35 }) {
		n, withheld := f.systemLoginFailed()
		t.Fatalf("40 failed sign-ins stopped, 35 held back: %d system entries count %d of them", n, withheld)
	}
	entries, _ := f.systemLoginFailed()
	time.Sleep(3 * quiet) // time for another, wrong, entry to show
	if n, withheld := f.systemLoginFailed(); n != entries || withheld != 35 {
		t.Fatalf("%d system entries counting %d failed sign-ins, want %d counting the 35 held back", n, withheld, entries)
	}
	clock.Add(time.Minute)
	f.failedSignIns(40, 1)
	rows := f.audits("user.login_failed")
	if len(rows) != 6+entries {
		t.Fatalf("user.login_failed rows: got %d, want %d (5, the system's, the last)", len(rows), 6+entries)
	}
	if last := rows[len(rows)-1]; last.ActorKind == audit.ActorSystem || last.Payload["withheld_before"] != nil {
		t.Fatalf("the failure after the system's entries: %+v, want one of its own counting none held back", last)
	}
	f.verifyAudit(int64(7 + entries)) // user.create, 5, the system's, the last
}

// On shutdown, the failed sign-ins held back are counted at once, however long the
// quiet interval.
func TestFailedLoginPooledCountWrittenOnClose(t *testing.T) {
	t.Parallel()
	// Forty failures at alice from as many addresses would reach the limit of the account's
	// failures from all addresses (and its audit entry): not what this test is about.
	f := newFixture(t, &auth.Options{MaxAccountFailuresAnywhere: 1000})
	f.createUser("alice", auth.RoleToolUser)
	clock := &testClock{t: time.Now()}
	f.svc.LimitLoginAuditQuiet(20, 5, clock.Now, time.Hour)
	f.failedSignIns(0, 40)
	if n, _ := f.systemLoginFailed(); n != 0 {
		t.Fatalf("%d system entries before the quiet interval or Close", n)
	}
	for range 2 { // a second Close writes nothing more
		if err := f.svc.Close(f.ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n, withheld := f.systemLoginFailed(); n != 1 || withheld != 35 {
		t.Fatalf("after Close: %d system entries counting %d, want 1 counting the 35 held back", n, withheld)
	}
	r := f.audits("user.login_failed")[5]
	if r.ActorName != "system" || r.TargetType != "user" || r.Payload["reason"] == nil {
		t.Errorf("the system's entry: %+v", r)
	}
	f.verifyAudit(7)
}

// A failed sign-in whose entry took the count of those held back, and whose transaction
// then failed, gives the count back: the next entry written counts it.
func TestFailedLoginWithheldCountGivenBackWhenItsTransactionFails(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.createUser("alice", auth.RoleToolUser)
	clock := &testClock{t: time.Now()}
	f.svc.LimitLoginAuditQuiet(20, 5, clock.Now, time.Hour)
	f.failedSignIns(0, 8) // 5 recorded, 3 held back
	clock.Add(time.Minute)
	f.exec(`CREATE FUNCTION no_login_failed() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.action = 'user.login_failed' AND NEW.actor_kind <> 'system' THEN RAISE EXCEPTION 'no failed sign-ins now'; END IF;
		RETURN NEW; END $$;
		CREATE TRIGGER no_login_failed BEFORE INSERT ON audit_log FOR EACH ROW EXECUTE FUNCTION no_login_failed()`)
	_, err := f.svc.Login(f.ctx, auth.LoginRequest{Username: "alice", Password: "wrong password!", IP: "203.0.113.7"})
	if err == nil || errors.Is(err, auth.ErrInvalidCredentials) {
		t.Fatalf("a failed sign-in whose entry could not be written: got %v, want the database's error", err)
	}
	f.exec(`DROP TRIGGER no_login_failed ON audit_log`)
	f.failedSignIns(8, 1)
	rows := f.audits("user.login_failed")
	if len(rows) != 6 {
		t.Fatalf("user.login_failed rows: got %d, want 6", len(rows))
	}
	if got := rows[5].Payload["withheld_before"]; got != float64(3) {
		t.Fatalf("withheld_before of the entry after the one that failed: got %v, want 3 (the count it took, given back)", got)
	}
	if n, _ := f.systemLoginFailed(); n != 0 {
		t.Fatalf("%d system entries, want none", n)
	}
}
