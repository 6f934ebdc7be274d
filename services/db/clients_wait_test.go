package db_test

import (
	"bytes"
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// lockedBuffer is a log a goroutine writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// An attached process that never lets go (`toolwarden export | less`, a FIFO nobody
// reads) keeps the owner's Stop waiting for ClientsWait only: then the owner stops the
// cluster anyway, having logged the wait and the pid holding the lock, so a serve told
// to stop ends within its supervisor's stop timeout.
func TestOwnerStopsAfterTheClientsWait(t *testing.T) {
	t.Parallel()
	dataDir := dbtest.TempDir(t)
	var logs lockedBuffer
	const bound = 2 * time.Second
	c, err := db.StartCluster(context.Background(), dataDir, &db.ClusterOptions{Fast: true,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), ClientsWait: bound})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	pid := postmasterPID(t, c)
	stuck := startLifetimeChild(t, "attach", dataDir) // attached, holding clients.lock, until killed

	began := time.Now()
	stopped := make(chan struct{})
	go func() { c.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(bound + 30*time.Second): // the bound, and postgres's fast shutdown
		t.Fatalf("the owner still waits %s after Stop, for an attached process that never ends:\n%s", time.Since(began), logs.String())
	}
	if took := time.Since(began); took < bound {
		t.Errorf("the owner stopped after %s, before its ClientsWait (%s): it did not wait for the attached process", took, bound)
	}
	waitGone(t, pid)
	log := logs.String()
	holder := "pid " + strconv.Itoa(stuck.cmd.Process.Pid)
	if !strings.Contains(log, "waiting for the other toolwarden processes") || !strings.Contains(log, "stopping the embedded PostgreSQL under") ||
		!strings.Contains(log, holder) {
		t.Errorf("the owner's log:\n%s\nwant the wait, the stop under the attached process, and its %s", log, holder)
	}
}
