package router_test

import (
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/router"
)

// A change whose event never reaches the router (lost with the database's newest
// commits) is not served from its snapshot for ever: a resolved name expires, and a
// tool disabled behind its back is refused once it has.
func TestResolvedToolExpiresWithoutItsEvent(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	e.server("ttl", true, "echo")
	if _, err := e.call("ttl__echo", `{"message":"hi"}`); err != nil {
		t.Fatal(err)
	}
	router.SetResolveTTL(e.r, 300*time.Millisecond)
	if _, err := e.call("ttl__echo", `{"message":"hi"}`); err != nil {
		t.Fatal(err) // stored again, now with the short lifetime
	}
	// Disabled without an event, as if the event had been lost.
	testkit.Exec(t, e.pool, `UPDATE mcp_tools SET status = 'disabled' WHERE id = $1`, e.tool("ttl__echo").ID)
	if _, err := e.call("ttl__echo", `{"message":"hi"}`); err != nil {
		t.Fatalf("a call within the lifetime was refused (%v): the snapshot is not what the test expects", err)
	}
	time.Sleep(400 * time.Millisecond)
	if _, err := e.call("ttl__echo", `{"message":"hi"}`); codeOf(err) != router.CodeToolDisabled {
		t.Fatalf("a call after the lifetime got %q, want %s", codeOf(err), router.CodeToolDisabled)
	}
}
