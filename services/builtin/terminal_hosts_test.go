package builtin

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/toolwarden/toolwarden/internal/proctrack"
)

// leftBehind starts a process as a crashed run of marker left it: in a session of its
// own, carrying the run's marker.
func leftBehind(t *testing.T, marker string) *exec.Cmd {
	t.Helper()
	c := exec.Command("sleep", "312")
	c.Env = append(os.Environ(), markerEnv+"="+marker)
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	return c
}

// writeCrashedRun records, in dir, a run of marker that crashed (no lock held) and its
// session sid.
func writeCrashedRun(t *testing.T, dir, marker string, sid int) {
	t.Helper()
	if err := proctrack.Write(dir, record{SID: sid, Marker: marker}); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(record{Marker: marker})
	if err := os.WriteFile(filepath.Join(dir, "run-of-"+marker+".json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// Replicas on several hosts share the built-in root: the start of one host's terminals
// leaves another host's records alone (it could not see their processes, and would drop
// the records that host's next start needs), and that host's next start kills what its
// crashed run left and drops its records. Records an earlier release left directly in
// <root>/.terminals are read for this host's processes, and kept for the others'.
func TestTerminalRecordsArePerHost(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	// Host a's crashed run. Its process runs here: were host b to read a's records, its
	// cleanup would kill it.
	const markerA = "run-hosta-crashed"
	procA := leftBehind(t, markerA)
	dirA := recordDir(root, "host-a")
	writeCrashedRun(t, dirA, markerA, procA.Process.Pid)
	// A crashed run of an earlier release, recorded where every host recorded its own.
	const markerOld = "run-old-release"
	procOld := leftBehind(t, markerOld)
	writeCrashedRun(t, legacyRecordDir(root), markerOld, procOld.Process.Pid)
	records := func(dir, marker string, sid int) []string {
		var there []string
		for _, name := range []string{strconv.Itoa(sid) + ".json", "run-of-" + marker + ".json"} {
			if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
				there = append(there, name)
			}
		}
		return there
	}

	b, err := NewTerminals(TerminalOptions{Root: root, Host: "host-b", Env: ownHome(t)})
	if err != nil {
		t.Fatal(err)
	}
	if !alive(procA.Process.Pid) {
		t.Fatal("host b's start killed a process host a's records name")
	}
	if got := records(dirA, markerA, procA.Process.Pid); len(got) != 2 {
		t.Fatalf("host b's start left %v of host a's two records", got)
	}
	waitGone(t, procOld.Process.Pid) // its marker is its own: here, it is this host's
	if got := records(legacyRecordDir(root), markerOld, procOld.Process.Pid); len(got) != 2 {
		t.Fatalf("host b's start left %v of the earlier release's two records, want them kept for the other hosts", got)
	}
	b.Close()

	a, err := NewTerminals(TerminalOptions{Root: root, Host: "host-a", Env: ownHome(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	waitGone(t, procA.Process.Pid)
	if got := records(dirA, markerA, procA.Process.Pid); len(got) != 0 {
		t.Fatalf("host a's start left its crashed run's records %v", got)
	}
	if a.records == b.records {
		t.Fatalf("hosts a and b record in one directory, %s", a.records)
	}
}

// A host's directory name is its host name and machine id, made safe for a file name.
func TestHostDirName(t *testing.T) {
	for _, c := range []struct {
		parts []string
		want  string
	}{
		{[]string{"web-1.example", "0123abcd"}, "web-1.example-0123abcd"},
		{[]string{"", "0123abcd"}, "0123abcd"},
		{[]string{"", ""}, "unknown-host"},
		{[]string{"../x/é", ""}, "_._x__"},
	} {
		if got := hostDirName(c.parts...); got != c.want {
			t.Errorf("hostDirName(%q) = %q, want %q", c.parts, got, c.want)
		}
	}
}
