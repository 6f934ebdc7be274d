package db

import (
	"context"
	"log/slog"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A start finds the data dir's postmaster still shutting down (the serve that started
// it was killed, and its Pdeathsig asked for a fast shutdown; here a smart shutdown held
// by a session): it waits for it to exit, then starts its own. Started at once, the new
// postmaster failed on the old one's pid file ("lock file already exists"), and serve
// with it (TestSecondServeRefused's restart after a SIGKILL, once).
func TestStartWaitsForAStoppingPostmaster(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "twt-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	old, err := StartCluster(ctx, dir, &ClusterOptions{Fast: true, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(old.Stop)
	// A session holds the smart shutdown: the postmaster stays, refusing new sessions.
	held, err := pgx.Connect(ctx, old.URLFor("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	pid := old.postmasterPID()
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(10 * time.Second); old.postmasterStatus(pid) != "stopping"; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the postmaster did not start shutting down")
		}
	}
	go func() {
		time.Sleep(500 * time.Millisecond)
		_ = held.Close(ctx) // the old postmaster exits
	}()
	c, err := StartCluster(ctx, dir, &ClusterOptions{Fast: true, Logger: quiet})
	if err != nil {
		t.Fatalf("a start while the old postmaster shut down: %v", err)
	}
	t.Cleanup(c.Stop)
	if got := c.postmasterPID(); got == pid || !c.Owned() {
		t.Errorf("postmaster %d (owned %v), want a new one of this start's, not %d", got, c.Owned(), pid)
	}
}
