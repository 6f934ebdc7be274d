package mcpclient_test

import (
	"context"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/registry"
)

// A server whose old session is slow to stop (a wrapper ignoring SIGTERM that outlives
// its MCP process) does not hold up another server's change: disabling the second while
// the first is being stopped stops the second at once, not after the first's grace.
func TestSlowStopDoesNotHoldUpOtherServers(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	reg := registry.New(pool, newKeys(t), nil)
	mgr := busManager(t, pool, reg, "")

	slow, slowControl := stdioSpec(t, "slow", &mcptest.Options{Name: "slow"})
	// The wrapper ignores SIGTERM (as its sleep does, inheriting it) and keeps the
	// server's stdout open after the server exits: the session's stop waits its grace.
	slow.Args = append([]string{"-c", `trap '' TERM; "$0" "$@"; sleep 30`, slow.Command}, slow.Args...)
	slow.Command = "/bin/sh"
	quick, quickControl := stdioSpec(t, "quick", &mcptest.Options{Name: "quick"})
	var ids []string
	for _, sp := range []registry.Spec{slow, quick} {
		sv, err := reg.CreateServer(context.Background(), audit.System, sp)
		if err != nil {
			t.Fatal(err)
		}
		mgr.Refresh(context.Background(), sv.ID)
		ids = append(ids, sv.ID)
	}
	for _, id := range ids {
		testkit.WaitFor(t, 30*time.Second, func() bool { return mgr.Snapshot(id).Status == registry.StatusConnected }, "a server never connected")
	}
	slowProcs := "TOOLWARDEN_MCPTEST_CONTROL_FILE=" + slowControl
	quickProcs := "TOOLWARDEN_MCPTEST_CONTROL_FILE=" + quickControl
	if len(processesWith(t, slowProcs)) == 0 || len(processesWith(t, quickProcs)) == 0 {
		t.Fatal("the servers' processes were not found")
	}
	for _, id := range ids {
		if _, err := reg.SetEnabled(context.Background(), audit.System, id, false); err != nil {
			t.Fatal(err)
		}
	}
	testkit.WaitFor(t, 30*time.Second, func() bool { return len(processesWith(t, quickProcs)) == 0 }, "the quick server's process never stopped")
	if len(processesWith(t, slowProcs)) == 0 {
		t.Fatal("the quick server stopped only after the slow one's stop had finished: its change waited behind the slow one's")
	}
	testkit.WaitFor(t, 30*time.Second, func() bool { return len(processesWith(t, slowProcs)) == 0 }, "the slow server's processes never stopped")
}
