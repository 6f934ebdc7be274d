package proctrack

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
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

// A process that exits while SignalIf reads what /proc says of it, its pid then going
// to another process, is not signalled through that pid: the newcomer lives. (The pid
// is handed on by setting the kernel's last pid, which needs root; elsewhere, or when
// another process took the pid first, the test is skipped.)
func TestSignalIfSparesAPidsNextOwner(t *testing.T) {
	victim := exec.Command("sleep", "60")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	pid := victim.Process.Pid
	var stranger *exec.Cmd
	defer func() {
		if stranger != nil && stranger.Process != nil {
			_ = stranger.Process.Kill()
			_ = stranger.Wait()
		}
	}()
	sent := SignalIf(pid, syscall.SIGKILL, func() bool {
		// What /proc said was read; now the process exits and is reaped...
		_ = victim.Process.Kill()
		_ = victim.Wait()
		// ...and its pid goes to a newcomer.
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0); err != nil {
			t.Skipf("cannot hand a pid on here: %v", err)
		}
		stranger = exec.Command("sleep", "60")
		if err := stranger.Start(); err != nil {
			t.Fatal(err)
		}
		if stranger.Process.Pid != pid {
			t.Skipf("another process took pid %d first", pid)
		}
		return true
	})
	if sent {
		t.Error("SignalIf reported a signal sent to a process that had exited")
	}
	// A SIGKILL takes a moment to leave a zombie (statField reads none of a zombie).
	time.Sleep(100 * time.Millisecond)
	if _, alive := statField(pid, 1); !alive {
		t.Fatal("the process that took the pid was killed")
	}
}
