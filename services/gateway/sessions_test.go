package gateway_test

import (
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/gateway"
)

// One person holds at most MaxSessions stateful sessions at once: the next initialize
// is refused with what to do, whichever token or transport it comes by, another
// person is not affected, a session ended frees its place, and stateless 2026-07-28
// requests are not counted.
func TestSessionsPerUser(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Gateway: &gateway.Options{MaxSessions: 2}})
	srv.CreateUser(t, "alice", auth.RoleToolUser, password)
	srv.CreateUser(t, "bob", auth.RoleToolUser, password)
	alice, alice2, bob := srv.Token(t, "alice"), srv.Token(t, "alice"), srv.Token(t, "bob")

	first := mustConnect(t, srv, alice, "2025-11-25")
	mustConnect(t, srv, alice2, "2025-11-25") // another token of the same person
	_, err := connect(t, srv, alice, "2025-11-25")
	if err == nil || !strings.Contains(err.Error(), "too many MCP sessions") || !strings.Contains(err.Error(), "alice has 2 open") {
		t.Fatalf("a third session: %v", err)
	}
	if _, err := connectSSE(t, srv, alice); err == nil {
		t.Fatal("an SSE session past the limit was accepted")
	}
	mustConnect(t, srv, bob, "2025-11-25")
	mustConnect(t, srv, alice, "2026-07-28") // stateless: nothing held

	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	webtest.WaitFor(t, 10*time.Second, func() bool {
		cs, err := connect(t, srv, alice, "2025-11-25")
		if err == nil {
			_ = cs.Close()
		}
		return err == nil
	}, "an ended session does not free its place")
}
