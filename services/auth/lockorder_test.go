package auth_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
)

// Logout and sign-in write their rows (a session deleted, a device cookie renewed)
// and then take the journal lock to audit. A change that ends a user's sessions or
// device cookies must take its locks in the same order, rows first and the journal
// last: one that audited first and then waited on such a row deadlocked against them
// (PostgreSQL aborts one of the two: a 500). Each case holds a row the way Logout or
// Login does, lets the change wait on it, then appends to the audit log in the held
// transaction: both must complete.
func TestRowWritesBeforeTheJournal(t *testing.T) {
	t.Parallel()
	guest, disable := auth.RoleGuest, true
	for _, tc := range []struct {
		name string
		// hold takes, in tx, the row lock the racing sign-out or sign-in takes first.
		hold string
		arg  func(s auth.Session) []byte
		// change is the request racing it, which ends sessions or device cookies.
		change func(f *fixture, admin, alice auth.User, her, bob auth.Session) error
	}{
		{
			name: "demote and disable racing her sign-out",
			hold: `/* test.logout */ DELETE FROM sessions WHERE token_hash = $1`,
			arg:  func(s auth.Session) []byte { return sha(s.Token) },
			change: func(f *fixture, admin, alice auth.User, _, _ auth.Session) error {
				_, err := f.svc.UpdateUser(f.ctx, actorOf(admin), alice.ID, auth.UserChange{Role: &guest, Disabled: &disable})
				return err
			},
		},
		{
			name: "password reset racing her sign-in with her device cookie",
			hold: `/* test.keepDevice */ UPDATE login_devices SET last_used_at = now() WHERE token_hash = $1`,
			arg:  func(s auth.Session) []byte { return sha(s.Device) },
			change: func(f *fixture, admin, alice auth.User, _, _ auth.Session) error {
				_, err := f.svc.ResetPassword(f.ctx, actorOf(admin), alice.ID, "")
				return err
			},
		},
		{
			// The sign-in ends the session bob left on the browser (audited) and renews
			// alice's device cookie, which another sign-in of hers holds.
			name: "sign-in on a shared browser racing her other sign-in",
			hold: `/* test.keepDevice */ UPDATE login_devices SET last_used_at = now() WHERE token_hash = $1`,
			arg:  func(s auth.Session) []byte { return sha(s.Device) },
			change: func(f *fixture, _, _ auth.User, her, bob auth.Session) error {
				s, err := f.svc.Login(f.ctx, auth.LoginRequest{Username: "alice", Password: testPassword, IP: "192.0.2.1",
					OldSession: bob.Token, Device: her.Device})
				if err == nil && s.Device != her.Device {
					return errors.New("the sign-in did not renew the device cookie it brought")
				}
				return err
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil)
			admin := f.createUser("root", auth.RoleAdmin)
			alice := f.createUser("alice", auth.RoleToolUser)
			f.createUser("bob", auth.RoleToolUser)
			s := f.login("alice", testPassword)
			bob := f.login("bob", testPassword)

			ctx, cancel := context.WithTimeout(f.ctx, 30*time.Second)
			defer cancel()
			tx, err := f.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(context.Background())
			if tag, err := tx.Exec(ctx, tc.hold, tc.arg(s)); err != nil || tag.RowsAffected() != 1 {
				t.Fatalf("hold the row: %v, %d rows", err, tag.RowsAffected())
			}
			done := make(chan error, 1)
			go func() { done <- tc.change(f, admin, alice, s, bob) }()
			testkit.WaitForLockWait(t, f.pool, "auth.")
			// The held transaction goes on as Logout's does: its audit entry, then commit.
			_, appendErr := audit.Append(ctx, tx, audit.Entry{Actor: actorOf(alice), Action: "user.logout", TargetType: "user",
				TargetID: alice.ID, TargetName: alice.Username, Payload: map[string]any{"username": alice.Username}})
			if appendErr == nil {
				appendErr = tx.Commit(ctx)
			} else {
				_ = tx.Rollback(ctx)
			}
			changeErr := <-done
			for _, e := range []struct {
				who string
				err error
			}{{"the held sign-out's audit entry", appendErr}, {"the change", changeErr}} {
				var pe *pgconn.PgError
				if errors.As(e.err, &pe) && pe.Code == "40P01" {
					t.Errorf("%s: deadlock (%v): the change took the journal lock before waiting on the held row", e.who, e.err)
				} else if e.err != nil {
					t.Errorf("%s: %v", e.who, e.err)
				}
			}
			f.verifyAudit(-1)
		})
	}
}
