// Package proctrack records the process trees Toolwarden starts, so that the next start
// after a crash (or a SIGKILL) kills what the previous run left running, and only what
// is provably its own.
//
// A tree is either a session (Setsid: the built-in terminals) or a process group
// (Setpgid: stdio MCP servers). Every process of it carries a marker in its
// environment (NAME=run-…, one value per run of Toolwarden), which its children inherit.
// While a tree runs, a file <dir>/<id>.json records its id and marker. Cleanup reads
// those files and kills every process of each recorded session or group that carries
// the recorded marker: a process that only reuses a recorded id (the ids were
// recycled since) carries no such marker and is left alone.
//
// A run also records its marker alone (WriteRun) before it starts anything: Cleanup
// then kills every process that carries it, wherever it went. That catches what left
// its group or session (setsid, a daemon) and what a crash between starting a tree and
// recording it would otherwise miss. While it runs, a run holds a lock on
// run-of-<marker>.lock: Cleanup leaves the records of a run whose lock is held alone
// (another process sharing the directory, such as a second replica on the same host).
package proctrack

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/toolwarden/toolwarden/internal/atomicfile"
)

// Record is what the file of one running tree says. Exactly one of SID and PGID is set,
// or neither for a run's own record (WriteRun): every process that carries the marker.
type Record struct {
	SID     int       `json:"sid,omitempty"`  // a session (and everything in it)
	PGID    int       `json:"pgid,omitempty"` // a process group
	Marker  string    `json:"marker"`
	Started time.Time `json:"started"`
}

// runPrefix starts the name of a run's record; a tree's record is named by its id.
const runPrefix = "run-of-"

func (r Record) id() int {
	if r.SID > 0 {
		return r.SID
	}
	return r.PGID
}

// Write records r in dir (created 0700). The file appears whole or not at all: a crash
// while writing must not leave a record Cleanup cannot read.
func Write(dir string, r Record) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	b, _ := json.Marshal(r)
	return atomicfile.Write(filepath.Join(dir, strconv.Itoa(r.id())+".json"), b)
}

// WriteRun records in dir that the processes carrying marker are this run's, and holds
// the run's lock, until RemoveRun. marker must be a file name's worth of letters,
// digits and dashes.
func WriteRun(dir, marker string) error {
	if !plain(marker) {
		return errors.New("proctrack: a run's marker must be letters, digits and dashes")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	lock := filepath.Join(dir, runPrefix+marker+".lock")
	f, err := os.OpenFile(lock, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return fmt.Errorf("proctrack: lock %s: %w", lock, err)
	}
	held.Store(lock, f)
	b, _ := json.Marshal(Record{Marker: marker, Started: time.Now()})
	return atomicfile.Write(filepath.Join(dir, runPrefix+marker+".json"), b)
}

// held are the run locks this process holds, by path.
var held sync.Map

// RemoveRun deletes the record WriteRun made, and every record of a tree of the run (a
// clean stop killed them all: a tree whose start was under way when the stop began
// could leave its record), and releases the run's lock.
func RemoveRun(dir, marker string) {
	if !plain(marker) {
		return
	}
	if ents, err := os.ReadDir(dir); err == nil {
		for _, e := range ents {
			p := filepath.Join(dir, e.Name())
			var r Record
			if !strings.HasPrefix(e.Name(), ".") && strings.HasSuffix(e.Name(), ".json") && !strings.HasPrefix(e.Name(), runPrefix) {
				if b, err := os.ReadFile(p); err == nil && json.Unmarshal(b, &r) == nil && r.Marker == marker {
					// A tree started as the stop began may not carry the marker yet
					// (between fork and exec): a child of ours, its group goes with it.
					if id := r.id(); id > 1 {
						if ppid, ok := statField(id, 1); ok && ppid == os.Getpid() {
							_ = syscall.Kill(-id, syscall.SIGKILL)
						}
					}
					_ = os.Remove(p)
				}
			}
		}
	}
	_ = os.Remove(filepath.Join(dir, runPrefix+marker+".json"))
	lock := filepath.Join(dir, runPrefix+marker+".lock")
	if f, ok := held.LoadAndDelete(lock); ok {
		_ = os.Remove(lock)
		f.(*os.File).Close()
	}
}

// alive reports whether the run of marker holds its lock in dir (a process that has
// not stopped; this one included).
func alive(dir, marker string) bool {
	f, err := os.OpenFile(filepath.Join(dir, runPrefix+marker+".lock"), os.O_RDWR, 0)
	if err != nil {
		return false // no lock: a run from before locks, or one that stopped
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return true
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}

func plain(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// KillMarked kills every process that carries name=marker in its environment and
// reports how many it killed.
func KillMarked(name, marker string) int {
	killed := 0
	for _, pid := range pids() {
		if pid != os.Getpid() && SignalIf(pid, syscall.SIGKILL, func() bool { return Marked(pid, name, marker) }) {
			killed++
		}
	}
	return killed
}

// SignalIf sends sig to process pid if is, which reads what /proc says of pid, reports
// true, and reports whether it sent it. The process is held by a pidfd from before is
// reads until the signal: had it exited and its pid gone to another process meanwhile,
// is would have read the newcomer, and a kill by pid would have hit it; the pidfd's
// signal reaches the process it was opened on or none. A kernel without pidfds (before
// 5.3, or a sandbox that refuses them) signals by pid, as before.
func SignalIf(pid int, sig syscall.Signal, is func() bool) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return false
	}
	if err != nil {
		return is() && syscall.Kill(pid, sig) == nil
	}
	defer unix.Close(fd)
	return is() && unix.PidfdSendSignal(fd, sig, nil, 0) == nil
}

// Remove deletes the record of the tree id (a session or group id) from dir.
func Remove(dir string, id int) {
	_ = os.Remove(filepath.Join(dir, strconv.Itoa(id)+".json"))
}

// SessionMembers are the live processes whose session id is sid.
func SessionMembers(sid int) []int { return members(sid, 3) }

// InSession reports whether process pid is alive in session sid.
func InSession(pid, sid int) bool {
	s, ok := statField(pid, 3)
	return ok && s == sid
}

// GroupMembers are the live processes whose process group id is pgid.
func GroupMembers(pgid int) []int { return members(pgid, 2) }

// members are the processes whose field (after "(comm) ": state ppid pgrp session) is id.
func members(id, field int) []int {
	var out []int
	for _, pid := range pids() {
		if f, ok := statField(pid, field); ok && f == id {
			out = append(out, pid)
		}
	}
	return out
}

// pids are the processes in /proc.
func pids() []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	out := make([]int, 0, len(ents))
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// statField reads field i after the command name in /proc/<pid>/stat; a zombie (dead
// already, its parent reaps it) has none.
func statField(pid, i int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	j := bytes.LastIndexByte(b, ')')
	if j < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[j+1:]))
	if len(f) <= i || f[0] == "Z" {
		return 0, false
	}
	v, err := strconv.Atoi(f[i])
	return v, err == nil
}

// Marked reports whether process pid carries name=marker in its environment.
func Marked(pid int, name, marker string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	want := []byte(name + "=" + marker)
	for _, kv := range bytes.Split(b, []byte{0}) {
		if bytes.Equal(kv, want) {
			return true
		}
	}
	return false
}

// Cleanup kills what a previous run left running: every process of each session or
// group recorded in dir that carries the record's marker in the environment variable
// name, and every process that carries a run's recorded marker; then it removes the
// records. The records of the run whose marker is keep (the caller's own), and of any
// run that still holds its lock, stay and their processes live. It reports how many
// processes it killed.
func Cleanup(dir, name, keep string) (int, error) {
	return cleanup(dir, name, keep, true)
}

// KillLeftovers kills what Cleanup would, but removes nothing: for a directory other
// hosts' runs may have recorded theirs in too. Their processes are not in this host's
// /proc, so nothing of theirs is killed, and their records must stay for their own
// next start. It reports how many processes it killed.
func KillLeftovers(dir, name string) int {
	n, _ := cleanup(dir, name, "", false)
	return n
}

func cleanup(dir, name, keep string, remove bool) (int, error) {
	ents, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	drop := func(p string) {
		if remove {
			_ = os.Remove(p)
		}
	}
	killed := 0
	live := map[string]bool{}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if e.IsDir() || strings.HasSuffix(e.Name(), ".lock") {
			continue // a run's lock: removed with its record below, or by its run
		}
		if strings.HasPrefix(e.Name(), ".") {
			// A record being written (atomicfile's temporary file): another process's,
			// unless it is old enough to be a crash's.
			if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) < time.Minute {
				continue
			}
		}
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var r Record
		run := strings.HasPrefix(e.Name(), runPrefix)
		// A temporary file of Write that a crash left, or a record nobody can act on.
		if json.Unmarshal(b, &r) != nil || r.Marker == "" || (!run && r.id() <= 1) {
			drop(p)
			continue
		}
		if r.Marker == keep {
			continue
		}
		l, known := live[r.Marker]
		if !known {
			l = alive(dir, r.Marker)
			live[r.Marker] = l
		}
		if l {
			continue
		}
		if run {
			killed += KillMarked(name, r.Marker)
			drop(p)
			drop(filepath.Join(dir, runPrefix+r.Marker+".lock"))
			continue
		}
		pids := GroupMembers(r.PGID)
		if r.SID > 0 {
			pids = SessionMembers(r.SID)
		}
		for _, pid := range pids {
			if SignalIf(pid, syscall.SIGKILL, func() bool { return Marked(pid, name, r.Marker) }) {
				killed++
			}
		}
		drop(p)
	}
	return killed, nil
}

// WaitExited waits until pid, a child of this process, has exited, without reaping it:
// while it is an unreaped zombie its pid, and so its process group's and session's id,
// cannot name another process, and the group (or session) can be killed safely.
func WaitExited(pid int) error {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}
