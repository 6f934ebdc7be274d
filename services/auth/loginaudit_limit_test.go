package auth_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

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
	if n := f.count(`SELECT count(*) FROM login_failures`); n != 40 {
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
