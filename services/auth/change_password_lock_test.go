package auth_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/auth"
)

// A wrong current password and a failed sign-in from one address, at the account's
// 4th of 5 failures from it, cannot both be checked: the change takes Login's locks
// before its throttle check, so it waits for the sign-in's failure and is refused as
// throttled. It took none and was checked beside it (a 6th failure counted).
func TestChangePasswordWaitsForSignInLocks(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	alice := f.createUser("alice", auth.RoleToolUser)
	s := f.login("alice", testPassword)
	p := f.mustAuth(s.Token, alice)
	const ip = "203.0.113.5"
	for range 4 {
		f.exec(`INSERT INTO login_failures (username, ip) VALUES ('alice', $1)`, ip)
	}

	ctx, cancel := context.WithTimeout(f.ctx, 30*time.Second)
	defer cancel()
	// A sign-in from ip failing as Login does: its locks, then its failure, then commit.
	tx, err := f.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('login-ip:' || $2, 0)), pg_advisory_xact_lock(hashtextextended('login:' || $1, 0))`,
		"alice", ip); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO login_failures (username, ip) VALUES ('alice', $1)`, ip); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := f.svc.ChangePassword(ctx, p.Actor(ip, ""), p, "a wrong guess", "a brand new password 42")
		done <- err
	}()
	for waiting := false; !waiting; {
		select {
		case err := <-done:
			t.Fatalf("the password change did not wait for the sign-in under way from its address: %v", err)
		case <-time.After(20 * time.Millisecond):
			waiting = testkit.Count(t, f.pool, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
				AND wait_event_type = 'Lock' AND query LIKE '%auth.ChangePassword%'`) > 0
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	err = <-done
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
	throttled(t, err, "account from this address")
	if n := f.count(`SELECT count(*) FROM login_failures WHERE username = 'alice' AND ip = $1`, ip); n != 5 {
		t.Errorf("failures of alice from %s: %d, want 5", ip, n)
	}
}
