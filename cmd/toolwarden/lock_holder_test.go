package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The data dir's lock file names the command that holds it beside its pid, and both
// refusals name it: a serve started under a migrate down is not told another serve runs,
// and a second migrate down is told to wait for the first, not to stop a serve. A lock
// file an older release wrote (its pid alone) still reads, as a serve's.
func TestLockNamesItsHolder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	me := strconv.Itoa(os.Getpid())
	l, err := lockDataDirAs(dir, "migrate down")
	if err != nil {
		t.Fatal(err)
	}
	defer l.release()
	if b, _ := os.ReadFile(filepath.Join(dir, lockFileName)); string(b) != me+" migrate down\n" {
		t.Errorf("serve.lock holds %q, want %q", b, me+" migrate down\n")
	}
	_, stderr, err := runCmd(t, "", "serve", "--data-dir", dir, "--addr", "127.0.0.1:0")
	if err == nil || !strings.Contains(err.Error(), "is in use by toolwarden migrate down (pid "+me+"); let it finish") {
		t.Errorf("serve under a migrate down: %v\n%s; want the migrate down and its pid named", err, stderr)
	}
	_, stderr, err = runCmd(t, "", "migrate", "force", "40", "--data-dir", dir)
	if err == nil || !strings.Contains(err.Error(), "toolwarden migrate force: toolwarden migrate down (pid "+me+") is running on the data dir") ||
		!strings.Contains(err.Error(), "let it finish, then run migrate force again") || strings.Contains(err.Error(), "serve") {
		t.Errorf("migrate force under a migrate down: %v\n%s; want the migrate down named, and to wait for it", err, stderr)
	}

	// An older release's lock file: the pid alone, a serve's.
	if err := l.f.Truncate(0); err != nil {
		t.Fatal(err)
	}
	if _, err := l.f.WriteAt([]byte("4242\n"), 0); err != nil {
		t.Fatal(err)
	}
	_, _, err = runCmd(t, "", "serve", "--data-dir", dir, "--addr", "127.0.0.1:0")
	if err == nil || !strings.Contains(err.Error(), "is in use by another toolwarden serve (pid 4242); stop it first") {
		t.Errorf("serve beside an older lock file: %v; want another serve (pid 4242)", err)
	}
	_, _, err = runCmd(t, "", "migrate", "down", "1", "--data-dir", dir)
	if err == nil || !strings.Contains(err.Error(), "toolwarden serve (pid 4242) is running on the data dir") ||
		!strings.Contains(err.Error(), "stop it first") {
		t.Errorf("migrate down beside an older lock file: %v; want a serve (pid 4242), to stop", err)
	}
	l.release()

	// serve's own lock says serve. A process another test forks holds a copy of every
	// descriptor, the released lock's among them, until it execs (O_CLOEXEC closes it
	// only then): the lock may stay taken for a moment after the release.
	deadline := time.Now().Add(5 * time.Second)
	for l, err = lockDataDir(dir); err != nil && time.Now().Before(deadline); l, err = lockDataDir(dir) {
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer l.release()
	if b, _ := os.ReadFile(filepath.Join(dir, lockFileName)); string(b) != me+" serve\n" {
		t.Errorf("serve's serve.lock holds %q, want %q", b, me+" serve\n")
	}
	_, _, err = runCmd(t, "", "serve", "--data-dir", dir, "--addr", "127.0.0.1:0")
	if err == nil || !strings.Contains(err.Error(), "is in use by another toolwarden serve (pid "+me+")") {
		t.Errorf("a second serve: %v; want another serve named", err)
	}
}

// What a lock file says is repeated on a terminal only when it is a command's name.
func TestParseLockFile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		pid  int
		cmd  string
		says string
	}{
		{"4242 migrate down\n", 4242, "migrate down", "toolwarden migrate down (pid 4242)"},
		{"4242\n", 4242, "", "toolwarden serve (pid 4242)"},
		{"", 0, "", "toolwarden serve"},
		{"4242 serve\n", 4242, "serve", "toolwarden serve (pid 4242)"},
		{"4242 \x1b[2Jgone\n", 4242, "", "toolwarden serve (pid 4242)"},
		{"x migrate force", 0, "migrate force", "toolwarden migrate force"},
	} {
		pid, cmd := parseLockFile([]byte(tc.in))
		if pid != tc.pid || cmd != tc.cmd {
			t.Errorf("parseLockFile(%q) = %d %q, want %d %q", tc.in, pid, cmd, tc.pid, tc.cmd)
		}
		if got := (errDataDirLocked{pid: pid, cmd: cmd}).holder(); got != tc.says {
			t.Errorf("holder of %q: %q, want %q", tc.in, got, tc.says)
		}
	}
}
