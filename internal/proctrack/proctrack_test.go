package proctrack

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

const env = "PROCTRACK_TEST_RUN"

// start runs sleep in a session of its own carrying marker, and reaps it when it dies.
func start(t *testing.T, marker string) (*exec.Cmd, <-chan struct{}) {
	t.Helper()
	c := exec.Command("sleep", "60")
	c.Env = []string{env + "=" + marker}
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = c.Wait(); close(done) }()
	t.Cleanup(func() { _ = c.Process.Kill(); <-done })
	return c, done
}

func dead(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	case <-time.After(5 * time.Second):
		return false
	}
}

// A run's record finds its processes wherever they went; the caller's own run and
// other markers are left alone; a half-written record is dropped.
func TestCleanupByRun(t *testing.T) {
	dir := t.TempDir()
	if err := WriteRun(dir, "run-old"); err != nil {
		t.Fatal(err)
	}
	// run-old crashed: its lock file stays, nobody holds it.
	f, _ := held.LoadAndDelete(filepath.Join(dir, runPrefix+"run-old.lock"))
	f.(*os.File).Close()
	// run-live is another process's that still runs (its lock held).
	if err := WriteRun(dir, "run-live"); err != nil {
		t.Fatal(err)
	}
	if err := WriteRun(dir, "run-mine"); err != nil {
		t.Fatal(err)
	}
	if err := WriteRun(dir, "../escape"); err == nil {
		t.Fatal("a marker that is no plain name was recorded")
	}
	old := time.Now().Add(-time.Hour)
	if err := os.WriteFile(filepath.Join(dir, ".1234.json.tmp-1"), []byte(`{"pgid":12`), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = os.Chtimes(filepath.Join(dir, ".1234.json.tmp-1"), old, old)
	_, oldDone := start(t, "run-old")
	_, mineDone := start(t, "run-mine")
	_, otherDone := start(t, "run-other")
	_, liveDone := start(t, "run-live")

	n, err := Cleanup(dir, env, "run-mine")
	if err != nil || n != 1 {
		t.Fatalf("Cleanup: killed %d (%v), want 1", n, err)
	}
	if !dead(oldDone) {
		t.Fatal("the old run's process lives")
	}
	select {
	case <-mineDone:
		t.Fatal("the caller's own process was killed")
	case <-otherDone:
		t.Fatal("a process of an unrecorded run was killed")
	case <-liveDone:
		t.Fatal("a process of a run that holds its lock was killed")
	case <-time.After(100 * time.Millisecond):
	}
	var left []string
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		left = append(left, e.Name())
	}
	if want := []string{runPrefix + "run-live.json", runPrefix + "run-live.lock", runPrefix + "run-mine.json", runPrefix + "run-mine.lock"}; !slices.Equal(left, want) {
		t.Fatalf("records left: %v, want %v", left, want)
	}
	RemoveRun(dir, "run-live")
	if n := KillMarked(env, "run-mine"); n != 1 || !dead(mineDone) {
		t.Fatalf("KillMarked: killed %d, want 1", n)
	}
	// A clean stop's RemoveRun takes the run's tree records too (one whose start was
	// under way left its record), and only its own.
	if err := Write(dir, Record{PGID: 4242, Marker: "run-mine"}); err != nil {
		t.Fatal(err)
	}
	RemoveRun(dir, "run-mine")
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("records left after RemoveRun: %v", ents)
	}
}
