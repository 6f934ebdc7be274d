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
package proctrack

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

// Record is what the file of one running tree says. Exactly one of SID and PGID is set.
type Record struct {
	SID     int       `json:"sid,omitempty"`  // a session (and everything in it)
	PGID    int       `json:"pgid,omitempty"` // a process group
	Marker  string    `json:"marker"`
	Started time.Time `json:"started"`
}

func (r Record) id() int {
	if r.SID > 0 {
		return r.SID
	}
	return r.PGID
}

// Write records r in dir (created 0700).
func Write(dir string, r Record) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	b, _ := json.Marshal(r)
	return os.WriteFile(filepath.Join(dir, strconv.Itoa(r.id())+".json"), b, 0o600)
}

// Remove deletes the record of the tree id (a session or group id) from dir.
func Remove(dir string, id int) {
	_ = os.Remove(filepath.Join(dir, strconv.Itoa(id)+".json"))
}

// SessionMembers are the live processes whose session id is sid.
func SessionMembers(sid int) []int { return members(sid, 3) }

// GroupMembers are the live processes whose process group id is pgid.
func GroupMembers(pgid int) []int { return members(pgid, 2) }

// members are the processes whose field (after "(comm) ": state ppid pgrp session) is id.
func members(id, field int) []int {
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
		if f, ok := statField(pid, field); ok && f == id {
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
// name; then it removes the records. It reports how many processes it killed.
func Cleanup(dir, name string) (int, error) {
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
		var r Record
		if json.Unmarshal(b, &r) != nil || r.id() <= 1 || r.Marker == "" {
			_ = os.Remove(p)
			continue
		}
		pids := GroupMembers(r.PGID)
		if r.SID > 0 {
			pids = SessionMembers(r.SID)
		}
		for _, pid := range pids {
			if Marked(pid, name, r.Marker) && syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed++
			}
		}
		_ = os.Remove(p)
	}
	return killed, nil
}
