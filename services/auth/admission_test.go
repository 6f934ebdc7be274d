package auth_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/verr"
)

// TestLoginFloodKeepsPool: a flood of sign-ins from one address, stuck behind that
// address's lock, must neither take the pool's connections nor queue without bound:
// what is beyond the address's allowance is refused at once, and everyone else, the
// owner signing in from elsewhere included, still gets a connection.
func TestLoginFloodKeepsPool(t *testing.T) {
	t.Parallel()
	const (
		flood      = 60
		perAddress = 16 // sign-ins one address may have in flight or waiting
		maxTx      = 8  // sign-in transactions at once
		ip         = "203.0.113.77"
	)
	f := newFixture(t, &auth.Options{MaxAccountFailures: 1000, MaxIPFailures: 1000})
	f.createUser("alice", auth.RoleToolUser)

	// The address's lock, held from a connection of its own (not the pool's), keeps
	// every attempt from that address waiting as a flood of slow attempts would.
	lock, err := pgx.ConnectConfig(f.ctx, f.pool.Config().ConnConfig.Copy())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Close(context.Background()) })
	if _, err := lock.Exec(f.ctx, `SELECT pg_advisory_lock(hashtextextended('login-ip:' || $1, 0))`, ip); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(f.ctx)
	type result struct {
		i   int
		err error
	}
	results := make(chan result, flood)
	var wg sync.WaitGroup
	// Runs before the lock's connection and the pool close: a failed test still
	// lets its attempts end.
	t.Cleanup(func() { cancel(); wg.Wait() })
	for i := range flood {
		pw := testPassword
		if i%2 == 1 {
			pw = fmt.Sprintf("wrong guess %d", i)
		}
		wg.Go(func() {
			_, err := f.svc.Login(ctx, auth.LoginRequest{Username: "alice", Password: pw, IP: ip})
			results <- result{i, err}
		})
	}

	// Everything beyond the allowance is refused without waiting for the lock.
	bound := time.After(30 * time.Second)
	for range flood - perAddress {
		select {
		case r := <-results:
			if te, ok := auth.ThrottleOf(r.err); !ok || !fault.Is(r.err, fault.KindRateLimited) || te.Scope != "address" || !te.Busy || te.RetryAfter <= 0 {
				t.Fatalf("attempt %d while the address is busy: got %v, want a throttled sign-in for the address", r.i, r.err)
			}
		case <-bound:
			st := f.pool.Stat()
			t.Fatalf("%d attempts from one address behind its lock: after 30s none beyond the allowance of %d was refused; the pool has %d of %d connections acquired",
				flood, perAddress, st.AcquiredConns(), st.MaxConns())
		}
	}
	if n := f.pool.Stat().AcquiredConns(); n > maxTx {
		t.Errorf("pool connections acquired during the flood: got %d, want at most %d", n, maxTx)
	}
	qctx, qcancel := context.WithTimeout(f.ctx, 10*time.Second)
	defer qcancel()
	var one int
	if err := f.pool.QueryRow(qctx, `SELECT 1`).Scan(&one); err != nil {
		t.Fatalf("a plain query during the flood: %v", err)
	}
	// The owner, signing in from elsewhere, is not held up by the flood.
	lctx, lcancel := context.WithTimeout(f.ctx, 10*time.Second)
	defer lcancel()
	if _, err := f.svc.Login(lctx, auth.LoginRequest{Username: "alice", Password: testPassword, IP: "192.0.2.1"}); err != nil {
		t.Fatalf("sign-in from another address during the flood: %v", err)
	}

	// Released, the admitted attempts finish as they would have.
	if _, err := lock.Exec(f.ctx, `SELECT pg_advisory_unlock(hashtextextended('login-ip:' || $1, 0))`, ip); err != nil {
		t.Fatal(err)
	}
	bound = time.After(60 * time.Second)
	for range perAddress {
		select {
		case r := <-results:
			switch {
			case r.i%2 == 0 && r.err != nil:
				t.Errorf("admitted attempt %d with the right password: got %v, want a session", r.i, r.err)
			case r.i%2 == 1 && !errors.Is(r.err, auth.ErrInvalidCredentials):
				t.Errorf("admitted attempt %d with a wrong password: got %v, want ErrInvalidCredentials", r.i, r.err)
			}
		case <-bound:
			t.Fatalf("admitted attempts: not all ended within 60s of the lock's release")
		}
	}
}

// A password change verifies and hashes a password as a sign-in does, holding the
// person's row lock meanwhile: a flood of changes from one signed-in session, stuck
// behind that lock, is admitted as sign-ins are, so it cannot take the pool.
func TestPasswordChangeFloodKeepsPool(t *testing.T) {
	t.Parallel()
	const (
		flood      = 40
		perAddress = 16
		maxTx      = 8
		ip         = "203.0.113.78"
	)
	f := newFixture(t, &auth.Options{MaxAccountFailures: 1000, MaxIPFailures: 1000})
	alice := f.createUser("alice", auth.RoleToolUser)
	p := f.mustAuth(f.login("alice", testPassword).Token, alice)

	// The person's row, locked from a connection of its own, keeps every change waiting.
	lock, err := pgx.ConnectConfig(f.ctx, f.pool.Config().ConnConfig.Copy())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Close(context.Background()) })
	tx, err := lock.Begin(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(f.ctx, `SELECT 1 FROM users WHERE id = $1 FOR UPDATE`, alice.ID); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(f.ctx)
	errs := make(chan error, flood)
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	actor := audit.Actor{Kind: audit.ActorUser, ID: alice.ID, IP: ip}
	for i := range flood {
		wg.Go(func() {
			_, err := f.svc.ChangePassword(ctx, actor, p, fmt.Sprintf("wrong guess %d", i), "a brand new password 42")
			errs <- err
		})
	}
	bound := time.After(30 * time.Second)
	for range flood - perAddress {
		select {
		case err := <-errs:
			if te, ok := auth.ThrottleOf(err); !ok || te.Scope != "address" || !te.Busy {
				t.Fatalf("a change while the address is busy: got %v, want a throttled attempt for the address", err)
			}
		case <-bound:
			st := f.pool.Stat()
			t.Fatalf("%d password changes behind the person's row lock: after 30s none beyond the allowance of %d was refused; the pool has %d of %d connections acquired",
				flood, perAddress, st.AcquiredConns(), st.MaxConns())
		}
	}
	if n := f.pool.Stat().AcquiredConns(); n > maxTx {
		t.Errorf("pool connections acquired during the flood: got %d, want at most %d", n, maxTx)
	}
	if err := tx.Rollback(f.ctx); err != nil {
		t.Fatal(err)
	}
	for range perAddress {
		select {
		case err := <-errs:
			var ve *verr.Error
			if _, throttled := auth.ThrottleOf(err); !errors.As(err, &ve) && !throttled {
				t.Errorf("an admitted change with a wrong current password: got %v", err)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("admitted changes: not all ended within 60s of the lock's release")
		}
	}
}
