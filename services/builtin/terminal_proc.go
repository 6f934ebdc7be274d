package builtin

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Processes a terminal starts run in a session of their own (Setsid): a session
// and everything it started, background jobs in process groups of their own
// included, share its session id, so killing by session id leaves no orphans.
// Each carries markerEnv in its environment, and its session is recorded in a file
// under <root>/.terminals, so that after a crash the next start kills what is still
// running, and only what is provably ours.

// markerEnv is the environment variable that marks a terminal's processes.
const markerEnv = "TOOLWARDEN_TERMINAL"

// record is what the file of one running session says.
type record struct {
	SID     int       `json:"sid"`
	Marker  string    `json:"marker"`
	Started time.Time `json:"started"`
}

// recordDir is where running sessions are recorded.
func recordDir(root string) string { return filepath.Join(root, ".terminals") }

func writeRecord(root string, r record) error {
	dir := recordDir(root)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	b, _ := json.Marshal(r)
	return os.WriteFile(filepath.Join(dir, strconv.Itoa(r.SID)+".json"), b, 0o600)
}

func removeRecord(root string, sid int) {
	_ = os.Remove(filepath.Join(recordDir(root), strconv.Itoa(sid)+".json"))
}

// sessionMembers are the processes whose session id is sid.
func sessionMembers(sid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if s, ok := sessionOf(pid); ok && s == sid {
			out = append(out, pid)
		}
	}
	return out
}

// sessionOf reads a process's session id from /proc/<pid>/stat.
func sessionOf(pid int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	// after "(comm) ": state ppid pgrp session
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 4 {
		return 0, false
	}
	if f[0] == "Z" { // a zombie is already dead; its parent reaps it
		return 0, false
	}
	s, err := strconv.Atoi(f[3])
	return s, err == nil
}

// marked reports whether process pid carries marker in its environment.
func marked(pid int, marker string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	want := []byte(markerEnv + "=" + marker)
	for _, kv := range bytes.Split(b, []byte{0}) {
		if bytes.Equal(kv, want) {
			return true
		}
	}
	return false
}

// signalSession sends sig to every process of session sid (only those that carry
// marker, when marker is not ""), and reports how many it signalled. While the
// session's leader is alive and not reaped, its id cannot name anyone else's session,
// and marker may be "" (a process that cleared its environment goes too); once it was
// reaped, only the marker tells our processes from a newcomer's.
func signalSession(sid int, marker string, sig syscall.Signal) int {
	n := 0
	if marker == "" {
		_ = syscall.Kill(-sid, sig) // the leader's process group, at once
	}
	for _, pid := range sessionMembers(sid) {
		if marker != "" && !marked(pid, marker) {
			continue
		}
		if syscall.Kill(pid, sig) == nil {
			n++
		}
	}
	return n
}

// endSession ends session sid: SIGTERM, up to grace for it to go, then SIGKILL.
// exited closes when the leader was reaped (nil: it was); until then every process of
// the session is signalled, from then on only those that carry marker.
func endSession(sid int, marker string, grace time.Duration, exited <-chan struct{}) {
	only := func() string {
		if exited == nil {
			return marker
		}
		select {
		case <-exited:
			return marker
		default:
			return ""
		}
	}
	signalSession(sid, only(), syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if len(sessionMembers(sid)) == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	signalSession(sid, only(), syscall.SIGKILL)
}

// CleanupOrphans kills the terminals' processes a previous run of Toolwarden left
// running (it crashed or was killed before it could end them): every process of a
// recorded session that carries the session's marker. A process that only reuses a
// recorded id is left alone. It reports how many processes it killed.
func CleanupOrphans(root string) (int, error) {
	dir := recordDir(root)
	ents, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	killed := 0
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var r record
		if json.Unmarshal(b, &r) != nil || r.SID <= 1 || r.Marker == "" {
			_ = os.Remove(p)
			continue
		}
		for _, pid := range sessionMembers(r.SID) {
			if marked(pid, r.Marker) && syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed++
			}
		}
		_ = os.Remove(p)
	}
	return killed, nil
}
