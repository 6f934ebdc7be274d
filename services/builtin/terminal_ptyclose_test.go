package builtin

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// ptyNumber is the number of the pseudo-terminal whose master t holds (/dev/pts/N).
func ptyNumber(t *testing.T, term *Terminal) int {
	t.Helper()
	rc, err := term.ptmx.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n uint32
	var ierr error
	if err := rc.Control(func(fd uintptr) { n, ierr = unix.IoctlGetUint32(int(fd), unix.TIOCGPTN) }); err != nil || ierr != nil {
		t.Fatal(err, ierr)
	}
	return int(n)
}

// mastersOpen counts this process's open descriptors on the master of /dev/pts/n.
func mastersOpen(t *testing.T, n int) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	count := 0
	for _, e := range ents {
		to, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil || (to != "/dev/ptmx" && to != "/dev/pts/ptmx") {
			continue
		}
		fd, _ := strconv.Atoi(e.Name())
		if got, err := unix.IoctlGetUint32(fd, unix.TIOCGPTN); err == nil && int(got) == n {
			count++
		}
	}
	return count
}

// waitMasterClosed waits until no descriptor of this process holds the master of /dev/pts/n.
func waitMasterClosed(t *testing.T, how string, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); mastersOpen(t, n) != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: the ended session still holds its PTY master (/dev/pts/%d); KeepEnded would keep it for minutes", how, n)
		}
	}
}

// An ended PTY session lets its master go at once, whether close_session ended it or
// its shell exited, while it stays listed with its output for KeepEnded: looping
// create_session and close_session must not hold the host's PTYs (kernel.pty.max).
// Not parallel: a PTY number freed here may be taken by another test's session.
func TestEndedSessionReleasesPTY(t *testing.T) {
	root := t.TempDir()
	ts := newTestTerminals(t, root)
	for _, how := range []string{"close_session", "exit"} {
		t.Run(how, func(t *testing.T) { endedSessionReleasesPTY(t, ts, root, how) })
	}
}

// endedSessionReleasesPTY ends a session as how says (close_session, or its shell
// exits) and checks what is left of it.
func endedSessionReleasesPTY(t *testing.T, ts *Terminals, root, how string) {
	who := TerminalCaller{UserID: "u1", UserName: "alice"}
	ws := filepath.Join(root, "conv-"+how)
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	term, _, err := ts.OpenPTY(who, "conv-"+how, ws)
	if err != nil {
		t.Fatal(err)
	}
	if err := term.Input(who, "echo \"said-$((6*7))\"\n"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, term, 0, "said-42")
	n := ptyNumber(t, term)
	if got := mastersOpen(t, n); got != 1 {
		t.Fatalf("%s: %d descriptors on the running session's master /dev/pts/%d, want 1", how, got, n)
	}
	if how == "exit" {
		if err := term.Input(who, "exit\n"); err != nil {
			t.Fatal(err)
		}
		<-term.Done()
	} else {
		term.End()
	}
	waitMasterClosed(t, how, n)
	if ts.Get(term.ID) != term {
		t.Fatalf("%s: the ended session is no longer listed", how)
	}
	waitFor(t, term, 0, "said-42")
	// What reaches an ended session is refused (a resize does nothing, so the page that
	// fits it keeps its status), and nothing reaches a closed file.
	if err := term.Resize(90, 30); err != nil {
		t.Errorf("%s: resizing an ended session: %v, want nothing done", how, err)
	}
	if err := term.Input(who, "echo late\n"); err == nil {
		t.Errorf("%s: an ended session took input", how)
	}
	_ = term.Echo()
	_ = term.busy()
}
