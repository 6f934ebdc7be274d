package db

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A cluster this process did not start is watched by its pid file: when the postmaster
// died and its pid went to another process, the cluster is dead (it was given the
// benefit of the doubt for as long as that process lived), while a process working in
// the data dir that does not answer yet (a postmaster busy or starting) still is alive.
func TestAliveSeesAReusedPid(t *testing.T) {
	t.Parallel()
	c := &Cluster{Dir: t.TempDir()}
	if err := os.MkdirAll(c.DataDir(), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		dir  string
		want bool
	}{
		{"another process took the pid", t.TempDir(), false},
		{"a process in the data dir not answering yet", c.DataDir(), true},
	} {
		cmd := exec.Command("sleep", "60")
		cmd.Dir = tc.dir
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pid := strconv.Itoa(cmd.Process.Pid)
		if err := os.WriteFile(filepath.Join(c.DataDir(), "postmaster.pid"), []byte(pid+"\n"+c.DataDir()+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := c.alive(context.Background()); got != tc.want {
			t.Errorf("%s: alive %v, want %v", tc.name, got, tc.want)
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}

// A cluster whose postmaster died leaving its pid file, the pid now another process's,
// starts: postgres refused ("lock file already exists") for as long as that process
// lived, the supervisor retrying in vain.
func TestStartsOverAReusedPid(t *testing.T) {
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
	pidFile := filepath.Join(c.DataDir(), "postmaster.pid")
	raw, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	c.Stop()
	// The pid file as the dead postmaster left it, its pid now a process of the same user
	// (postgres's own: another user's it would not take for a postmaster).
	other := exec.Command("sleep", "60")
	other.Dir = os.TempDir()
	cred, err := clusterCredential()
	if err != nil {
		t.Fatal(err)
	}
	if cred != nil {
		other.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Process.Kill(); _ = other.Wait() }()
	lines := strings.SplitN(string(raw), "\n", 2)
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(other.Process.Pid)+"\n"+lines[1]), 0o600); err != nil {
		t.Fatal(err)
	}
	again, err := StartCluster(ctx, dir, &ClusterOptions{Fast: true, Logger: quiet, startTimeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("start over a pid file naming another process: %v", err)
	}
	again.Stop()
}
