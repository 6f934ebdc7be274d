package db

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// recoveringHook is a slog handler that closes seen at the first record saying the
// postmaster is recovering.
type recoveringHook struct {
	once *sync.Once
	seen chan struct{}
}

func (h recoveringHook) Enabled(context.Context, slog.Level) bool { return true }
func (h recoveringHook) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h recoveringHook) WithGroup(string) slog.Handler            { return h }
func (h recoveringHook) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "recovering") {
		h.once.Do(func() { close(h.seen) })
	}
	return nil
}

// A start does not give up on a postmaster that is recovering (it answers 57P03, "the
// database system is starting up"), however long that takes beyond the start-up
// deadline: stopping it would only make the recovery start over. The recovery here is
// a standby without hot standby, held until the test promotes it.
func TestStartWaitsForRecovery(t *testing.T) {
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
	c, err := StartCluster(ctx, dir, &ClusterOptions{Fast: true, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	c.Stop()
	data := c.DataDir()
	if err := os.WriteFile(filepath.Join(data, "standby.signal"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	conf, err := os.OpenFile(filepath.Join(data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = conf.WriteString("\nhot_standby = off\n")
	if cerr := conf.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}

	hook := recoveringHook{once: new(sync.Once), seen: make(chan struct{})}
	errc := make(chan error, 1)
	var started *Cluster
	go func() {
		var err error
		started, err = StartCluster(ctx, dir, &ClusterOptions{Fast: true, Logger: slog.New(hook), startTimeout: time.Second})
		errc <- err
	}()
	select {
	case err := <-errc:
		if err == nil {
			started.Stop()
		}
		t.Fatalf("the start ended while postgres recovered: %v", err)
	case <-hook.seen:
	}
	// Past the deadline, still recovering: promote it (what pg_ctl promote does).
	if err := os.WriteFile(filepath.Join(data, "promote"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(c.postmasterPID(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("start after the recovery: %v", err)
	}
	started.Stop()
}
