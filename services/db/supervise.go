package db

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ClusterState is what the supervisor knows about the embedded PostgreSQL.
type ClusterState struct {
	Up       bool
	Since    time.Time // when it last came up or went down
	Restarts int       // restarts after it died, since this process started
	PID      int       // the postmaster's process id, 0 when down
	// Error says why it is down, or why the last restart failed.
	Error string
}

// State returns the supervisor's view of the cluster. Before Supervise runs it says up.
func (c *Cluster) State() ClusterState {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.state
	if st.Since.IsZero() {
		st = ClusterState{Up: true, Since: time.Now(), PID: c.postmasterPID()}
	}
	return st
}

// Supervise watches the cluster until ctx ends, and starts postgres again whenever it
// dies (killed, out of memory, or stopped by another process that had started it):
// meanwhile every database call fails, so tool calls fail closed; once it is back, the
// pool's new connections reach it. Restarts back off from 200 ms to 5 s while they fail
// (a killed postmaster's backends may hold its shared memory for a moment). Stop
// ends the supervision first, so a shutdown is never undone.
func (c *Cluster) Supervise(ctx context.Context) error {
	// Restarting the cluster when it goes, this process need not hold its starter's
	// Stop back (clientsLock): a command that started it must not wait for a server.
	c.releaseClients()
	c.mu.Lock()
	c.state = ClusterState{Up: true, Since: time.Now(), PID: c.postmasterPID()}
	c.mu.Unlock()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		c.mu.Lock()
		done, stopped := c.done, c.stopped
		if c.cmd == nil {
			done = nil // not ours: polled below
		}
		c.mu.Unlock()
		if stopped {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-done:
		case <-tick.C:
			if done != nil || c.alive(ctx) {
				continue
			}
		}
		if ctx.Err() != nil || c.isStopped() {
			return nil
		}
		c.recover(ctx)
	}
}

func (c *Cluster) isStopped() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopped
}

// alive reports whether the postmaster of the data dir runs and answers (a cluster this
// process did not start is watched this way).
func (c *Cluster) alive(ctx context.Context) bool {
	pid := c.postmasterPID()
	if !ProcessAlive(pid) {
		return false
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if c.ping(pctx) == nil {
		return true
	}
	// Running but not answering (busy, or starting): give it the benefit of the doubt
	// while its process lives, and is this data dir's postmaster: a postmaster that died
	// leaves its pid file, and the pid may since be another process's.
	return syscall.Kill(pid, 0) == nil && c.isPostmaster(pid)
}

// isPostmaster reports whether process pid is a postgres serving this data dir, as far
// as /proc tells: a postmaster's working directory is its data dir (the same file, so a
// bind mount's other path matches too); where that cannot be read (another user's
// process), its name must be postgres. Where neither can be read (no /proc, a hidden
// process), it cannot be told, and it is taken to be.
func (c *Cluster) isPostmaster(pid int) bool {
	proc := "/proc/" + strconv.Itoa(pid)
	if cwd, err := os.Stat(proc + "/cwd"); err == nil {
		dir, err := os.Stat(c.DataDir())
		return err == nil && os.SameFile(cwd, dir)
	}
	comm, err := os.ReadFile(proc + "/comm")
	if err != nil {
		return true
	}
	return strings.TrimSpace(string(comm)) == "postgres"
}

// recover marks the cluster down and starts postgres until it is up or ctx ends.
func (c *Cluster) recover(ctx context.Context) {
	c.mu.Lock()
	c.cmd, c.owned = nil, false
	c.state = ClusterState{Up: false, Since: time.Now(), Restarts: c.state.Restarts, Error: "postgres exited"}
	c.mu.Unlock()
	c.log.Error("database: the embedded PostgreSQL died; restarting it (calls fail until it is back)", "dir", c.Dir)
	wait := 200 * time.Millisecond
	for ctx.Err() == nil && !c.isStopped() {
		err := c.restart(ctx)
		if err == nil {
			c.mu.Lock()
			c.state = ClusterState{Up: true, Since: time.Now(), Restarts: c.state.Restarts + 1, PID: c.postmasterPID()}
			c.mu.Unlock()
			c.log.Info("database: the embedded PostgreSQL is back", "dir", c.Dir)
			return
		}
		c.mu.Lock()
		c.state.Error = err.Error()
		c.mu.Unlock()
		c.log.Warn("database: restart failed", "err", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(wait*2, 5*time.Second)
	}
}

// restart starts postgres on the existing cluster (or finds one another process
// started meanwhile).
func (c *Cluster) restart(ctx context.Context) error {
	if c.running(ctx) {
		return nil
	}
	if c.binDir == "" {
		bin, err := clusterBinDir(c.DataDir())
		if err != nil {
			return err
		}
		c.binDir = bin
	}
	cred, err := clusterCredential()
	if err != nil {
		return err
	}
	// No deadline on ctx: one would stop a postmaster still recovering (start waits
	// for that however long, and gives up after 30 s only on one that does nothing).
	return c.start(ctx, cred, 30*time.Second)
}

// ProcessAlive reports whether a process with this pid exists (one of another user's
// counts: signalling it is refused, not unknown).
func ProcessAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// postmasterStatus is the status line of the pid file ("starting", "ready",
// "standby", "stopping") when the file names pid, else "".
func (c *Cluster) postmasterStatus(pid int) string {
	raw, err := os.ReadFile(filepath.Join(c.DataDir(), "postmaster.pid"))
	if err != nil {
		return ""
	}
	lines := strings.Split(string(raw), "\n")
	if len(lines) < 8 || strings.TrimSpace(lines[0]) != strconv.Itoa(pid) {
		return ""
	}
	return strings.TrimSpace(lines[7])
}

// postmasterPID reads the postmaster's pid from its pid file (0 when there is none).
func (c *Cluster) postmasterPID() int {
	raw, err := os.ReadFile(filepath.Join(c.DataDir(), "postmaster.pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(raw), "\n", 2)[0]))
	return pid
}
