package auth_test

import (
	"testing"

	"github.com/toolwarden/toolwarden/services/auth"
)

// A person signing in again on a browser that still holds a session of theirs ends that
// session, announced (so the pages and terminal sockets on it end at once, as a copy
// of the old cookie's would) but not audited as a sign-out: they did not sign out.
func TestSignInAgainAnnouncesTheOldSessionEnded(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	alice := f.createUser("alice", auth.RoleToolUser)
	first := f.login("alice", testPassword)
	f.loginReq(auth.LoginRequest{Username: "alice", Password: testPassword, IP: "192.0.2.1", OldSession: first.Token})
	f.mustNotAuth(first.Token, "the session passed as OldSession")
	ev := f.events("session.ended")
	want := auth.SessionEvent{UserID: alice.ID, Username: "alice", Reason: "signed in again"}
	if len(ev) != 1 || ev[0].Topic != auth.SessionsTopic || ev[0].Payload != want {
		t.Fatalf("session.ended events: %+v, want one for alice on %q", ev, auth.SessionsTopic)
	}
	if n := f.count(`SELECT count(*) FROM audit_log WHERE action = 'user.logout'`); n != 0 {
		t.Fatalf("signing in again audited %d sign-outs, want none", n)
	}

	// A sign-in with a cookie of no session (ended meanwhile) announces nothing.
	f.loginReq(auth.LoginRequest{Username: "alice", Password: testPassword, IP: "192.0.2.1", OldSession: first.Token})
	if n := len(f.events("session.ended")); n != 1 {
		t.Fatalf("a sign-in whose old cookie named no session: %d session.ended events, want still 1", n)
	}
}
