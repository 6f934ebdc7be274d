package builtin

import (
	"syscall"
	"testing"
	"time"
)

// ignoresTerm checks the test's premise: pid outlives a SIGTERM of its own.
func ignoresTerm(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	if !alive(pid) {
		t.Fatalf("process %d ended on SIGTERM; the test needs one that ignores it", pid)
	}
}

// waitNoMembers waits until session sid has no process left.
func waitNoMembers(t *testing.T, sid int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); len(sessionMembers(sid)) != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("session %d still has processes %v", sid, sessionMembers(sid))
		}
	}
}

// close_session of a PTY session whose processes ignore SIGTERM (and SIGHUP, which
// closing the terminal would send): after the grace, SIGKILL ends every one of them,
// and Close returns without waiting out its 2 s for the shell to go.
func TestCloseSessionKillsWhatIgnoresTerm(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	ts := newTestTerminals(t, root)
	who := TerminalCaller{UserID: "u1", UserName: "alice"}
	term, _, err := ts.OpenPTY(who, "conv", root)
	if err != nil {
		t.Fatal(err)
	}
	// The shell itself ignores TERM and HUP too; a child of it in the foreground and
	// one in the background inherit that.
	_ = term.Input(who, "trap '' TERM HUP; sleep 300 & echo PI\"\"DS $$ $!; exec bash -c 'sleep 301'\n")
	pids := waitPIDs(t, term, 0)
	for _, pid := range pids {
		ignoresTerm(t, pid)
	}
	start := time.Now()
	term.Close()
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Errorf("Close took %s: the processes were not killed after the grace", d)
	}
	waitGone(t, pids...)
	waitNoMembers(t, term.sid)
}

// run_command's timeout closes the command the same way: a command and its child
// that ignore SIGTERM are killed after the grace.
func TestRunCommandKillsWhatIgnoresTerm(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	ts := newTestTerminals(t, root)
	c, err := ts.Start(TerminalCaller{}, "conv", root, "trap '' TERM HUP; sleep 303 & echo PI\"\"DS $$ $!; wait; wait; sleep 304", 2*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	pids := waitPIDs(t, c, 0)
	for _, pid := range pids {
		ignoresTerm(t, pid)
	}
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the timeout did not end a command that ignores SIGTERM")
	}
	if out := waitFor(t, c, 0, "timed out"); c.ExitCode() != -1 {
		t.Errorf("exit code %d after the timeout, want -1 (killed); output %q", c.ExitCode(), out)
	}
	waitGone(t, pids...)
	waitNoMembers(t, c.sid)
}
