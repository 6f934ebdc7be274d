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
// exits, so it refuses to start. Other subcommands do not take the lock: they attach to
// the running cluster.
const lockFileName = "serve.lock"

// dataDirLock is a held lock on a data dir.
type dataDirLock struct{ f *os.File }

// errDataDirLocked is the error of a second serve on a data dir.
type errDataDirLocked struct {
	dir string
	pid int // 0 when the holder did not say
}

func (e errDataDirLocked) Error() string {
	holder := "another toolwarden serve"
	if e.pid > 0 {
		holder += " (pid " + strconv.Itoa(e.pid) + ")"
	}
	return fmt.Sprintf("the data dir %s is in use by %s; stop it first, or give this one its own --data-dir", e.dir, holder)
}

// lockDataDir takes the data dir's lock (flock on <dir>/serve.lock, released by the
// kernel when the process ends, however it ends) and writes this process's id in it, or
// returns errDataDirLocked naming the process that holds it.
func lockDataDir(dir string) (*dataDirLock, error) {
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
			b, _ := os.ReadFile(p)
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			return nil, errDataDirLocked{dir: abs, pid: pid}
		}
		return nil, fmt.Errorf("lock the data dir: %s: %w", p, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
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
