package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockFileName is the file in the data dir that `serve` holds an exclusive lock on for
// as long as it runs (docs/operations.md): a second `serve` on the same data dir would
// start the same stdio servers twice and stop the database under the first when it
// exits, so it refuses to start. migrate down and force take it too (holdDataDir), so
// that no serve runs under them; the other subcommands do not: they attach to the
// running cluster.
const lockFileName = "serve.lock"

// dataDirLock is a held lock on a data dir.
type dataDirLock struct{ f *os.File }

// errDataDirLocked is the error of a second serve on a data dir, or of a migrate down
// or force while another command holds it.
type errDataDirLocked struct {
	dir string
	pid int    // 0 when the holder did not say
	cmd string // the holder's command ("serve", "migrate down"); "" when it did not say
}

// holder names the process that holds the lock: its command and pid as it wrote them. A
// lock file with a pid alone was written before the command was (then only serve took
// the lock), so it is named a serve, as it was.
func (e errDataDirLocked) holder() string {
	h := "toolwarden " + e.cmd
	if e.cmd == "" {
		h = "toolwarden serve"
	}
	if e.pid > 0 {
		h += " (pid " + strconv.Itoa(e.pid) + ")"
	}
	return h
}

func (e errDataDirLocked) Error() string {
	if e.cmd != "" && e.cmd != "serve" {
		// A migrate down or force: stopped half way it would leave the schema dirty.
		return fmt.Sprintf("the data dir %s is in use by %s; let it finish, then start this again", e.dir, e.holder())
	}
	return fmt.Sprintf("the data dir %s is in use by another %s; stop it first, or give this one its own --data-dir", e.dir, e.holder())
}

// parseLockFile reads what lockDataDirAs writes: "<pid> <command>", or "<pid>" alone in a
// file an older release wrote. A command that is not words of letters, digits and
// dashes is not repeated (the file is the data dir owner's, but what it holds reaches
// a terminal).
func parseLockFile(b []byte) (pid int, cmd string) {
	pidText, cmd, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid < 0 {
		pid = 0
	}
	cmd = strings.TrimSpace(cmd)
	if len(cmd) > 64 || strings.ContainsFunc(cmd, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == ' ')
	}) {
		cmd = ""
	}
	return pid, cmd
}

// lockDataDir takes the data dir's lock for serve (lockDataDirAs).
func lockDataDir(dir string) (*dataDirLock, error) { return lockDataDirAs(dir, "serve") }

// lockDataDirAs takes the data dir's lock (flock on <dir>/serve.lock, released by the
// kernel when the process ends, however it ends) and writes this process's id and cmd,
// the command that holds it, in it ("4242 migrate down"), or returns errDataDirLocked
// naming the process that holds it: a serve refused by a migrate down must not be told
// a serve is running.
func lockDataDirAs(dir, cmd string) (*dataDirLock, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	p := filepath.Join(abs, lockFileName)
	// O_CLOEXEC (Go's default): the lock is not inherited by PostgreSQL or stdio servers,
	// so it ends with this process and nothing else.
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock the data dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			b := make([]byte, 256)
			n, _ := f.ReadAt(b, 0)
			pid, holder := parseLockFile(b[:n])
			return nil, errDataDirLocked{dir: abs, pid: pid, cmd: holder}
		}
		return nil, fmt.Errorf("lock the data dir: %s: %w", p, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+" "+cmd+"\n"), 0)
	}
	return &dataDirLock{f: f}, nil
}

// release gives the lock up (the file stays: removing it would race a serve starting).
func (l *dataDirLock) release() {
	if l == nil || l.f == nil {
		return
	}
	_ = l.f.Truncate(0)
	_ = l.f.Close()
	l.f = nil
}
