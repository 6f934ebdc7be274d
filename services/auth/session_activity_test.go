package auth_test

import (
	"errors"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/auth"
)

// A long-lived connection's messages refresh its session's idle clock as page loads do
// (Authenticate): at most once a minute, never bringing back a session that already
// sat idle past the timeout, and never for an API token (which has no idle clock).
func TestSessionActivity(t *testing.T) {
	t.Parallel()
	f := newFixture(t, &auth.Options{IdleTimeout: 30 * time.Minute})
	alice := f.createUser("alice", auth.RoleToolUser)
	s := f.login("alice", testPassword)
	p := f.mustAuth(s.Token, alice)
	fresh := func() bool {
		t.Helper()
		return f.count(`SELECT count(*) FROM sessions WHERE last_seen_at > now() - interval '1 minute'`) == 1
	}

	// Seen two minutes ago: a message refreshes it.
	f.exec(`UPDATE sessions SET last_seen_at = now() - interval '2 minutes'`)
	a := f.svc.Activity(p)
	a.Seen(f.ctx)
	if !fresh() {
		t.Fatal("a session seen 2 minutes ago after a message: not refreshed, want refreshed")
	}
	// The next message within the minute writes nothing.
	f.exec(`UPDATE sessions SET last_seen_at = now() - interval '2 minutes'`)
	a.Seen(f.ctx)
	if fresh() {
		t.Error("a second message within a minute wrote the session, want one write a minute")
	}
	// A session idle past the timeout stays ended.
	f.exec(`UPDATE sessions SET last_seen_at = now() - interval '31 minutes'`)
	f.svc.Activity(p).Seen(f.ctx)
	if _, err := f.svc.CurrentRole(f.ctx, p); !errors.Is(err, auth.ErrNoLongerValid) {
		t.Errorf("a session idle past the timeout after a message: got %v, want ErrNoLongerValid", err)
	}
	// A token's connection, or none, writes nothing and does not fail.
	plain, _ := f.createToken(alice, "ci")
	f.svc.Activity(f.mustAuthToken(plain, alice)).Seen(f.ctx)
	f.svc.Activity(nil).Seen(f.ctx)
}
