package auth_test

import (
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/auth"
)

// The idle clock is the database's: last_seen_at is written by its now() and is
// compared with its now(), never with the app host's clock. Compared with the host's,
// a database clock running ahead made last_seen_at look newer than a minute for ever
// (a negative age): it was never refreshed, and a person at work was signed out at
// the idle timeout.
func TestIdleClockIsTheDatabases(t *testing.T) {
	t.Parallel()
	f := newFixture(t, &auth.Options{IdleTimeout: 30 * time.Minute})
	alice := f.createUser("alice", auth.RoleToolUser)
	s := f.login("alice", testPassword)
	seen := func() time.Time {
		t.Helper()
		var at time.Time
		if err := f.pool.QueryRow(f.ctx, `SELECT last_seen_at FROM sessions`).Scan(&at); err != nil {
			t.Fatal(err)
		}
		return at
	}

	// Ahead of the app host's clock by ten minutes, as a database clock running ahead
	// writes it (or one stepped back, a failover to a standby behind, leaves it): the
	// request is seen now and the idle timeout counts from now, not from ten minutes on.
	f.exec(`UPDATE sessions SET last_seen_at = now() + interval '10 minutes'`)
	f.mustAuth(s.Token, alice)
	if n := f.count(`SELECT count(*) FROM sessions WHERE last_seen_at <= now()`); n != 1 {
		t.Errorf("a session seen ahead of the clocks after a request: last_seen_at %s, want it brought back to the database's now", seen())
	}

	// Seen two minutes ago by the database's clock: refreshed.
	f.exec(`UPDATE sessions SET last_seen_at = now() - interval '2 minutes'`)
	f.mustAuth(s.Token, alice)
	if n := f.count(`SELECT count(*) FROM sessions WHERE last_seen_at > now() - interval '1 minute'`); n != 1 {
		t.Errorf("a session seen 2 minutes ago after a request: last_seen_at %s, want refreshed", seen())
	}

	// Seen 30 seconds ago: not written again (one write per active minute).
	f.exec(`UPDATE sessions SET last_seen_at = now() - interval '30 seconds'`)
	before := seen()
	f.mustAuth(s.Token, alice)
	if after := seen(); !after.Equal(before) {
		t.Errorf("a session seen 30 seconds ago: last_seen_at went from %s to %s, want it left alone", before, after)
	}
}
