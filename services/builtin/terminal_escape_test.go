package builtin

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/confine"
)

// sleepArg is a sleep's argument no other process uses: the test finds its sleeps by
// their command line, which a confined one's pid (its namespace's) would not give.
func sleepArg(t *testing.T) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return strconv.Itoa(500000 + int(binary.BigEndian.Uint32(b[:])%400000))
}

// sleepers are the live processes whose command line is "sleep arg".
func sleepers(arg string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.Equal(b, []byte("sleep\x00"+arg+"\x00")) && alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// waitSleeper waits until a sleep of arg runs, and kills those left when the test ends.
func waitSleeper(t *testing.T, term *Terminal, arg string) {
	t.Helper()
	t.Cleanup(func() {
		for _, pid := range sleepers(arg) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	for deadline := time.Now().Add(10 * time.Second); len(sleepers(arg)) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			out, _, _ := term.Output(0)
			t.Fatalf("sleep %s never ran; output: %q", arg, out)
		}
	}
}

// checkSleepersGone fails when a sleep of arg still runs a moment after its terminal
// ended (killed before it ended: the moment is only for a loaded machine to reap it).
func checkSleepersGone(t *testing.T, what, arg string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		left := sleepers(arg)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: sleep %s (pids %v) outlived its terminal", what, arg, left)
			return
		}
	}
}

// What a terminal started goes when it ends, unconfined too: what stayed in its session
// whatever its environment (its leader, not yet reaped, keeps the session's id ours),
// and what left the session (setsid) while it carries the terminal's own marker, at
// the end of its command, at its timeout, and when its shell exits. Only a process
// that both left the session and dropped that marker escapes (docs/security.md), and
// the run's marker still finds it when Toolwarden stops unless it dropped that too.
func TestTerminalLeftBehindEndsWithIt(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	ts := newTestTerminals(t, root)
	who := TerminalCaller{UserID: "u1", UserName: "alice"}
	ws := filepath.Join(root, "conv")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, command string
		timeout       time.Duration
	}{
		// Each command ends (by itself) once the test, having seen its sleep, makes go-<arg>.
		{"unmarked, in the session, at the command's end", "env -u " + markerEnv + " sleep %s >/dev/null 2>&1 & until [ -e go-%s ]; do sleep 0.01; done", time.Minute},
		{"left the session, at the command's timeout", "setsid sleep %s >/dev/null 2>&1 & sleep 100", time.Second},
		{"left the session without the run's marker, at the command's end", "setsid env -u " + markerEnv + " sleep %s >/dev/null 2>&1 & until [ -e go-%s ]; do sleep 0.01; done", time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			arg := sleepArg(t)
			term, err := ts.Start(who, "conv", ws, strings.ReplaceAll(tc.command, "%s", arg), tc.timeout, 0)
			if err != nil {
				t.Fatal(err)
			}
			waitSleeper(t, term, arg)
			if err := os.WriteFile(filepath.Join(ws, "go-"+arg), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			<-term.gone
			checkSleepersGone(t, tc.name, arg)
			term.Close()
		})
	}
	t.Run("PTY session, its shell exits", func(t *testing.T) {
		arg, arg2 := sleepArg(t), sleepArg(t)
		term, _, err := ts.OpenPTY(who, "conv", ws)
		if err != nil {
			t.Fatal(err)
		}
		if err := term.Input(who, "env -u "+markerEnv+" nohup sleep "+arg+" >/dev/null 2>&1 & setsid sleep "+arg2+" >/dev/null 2>&1 &\n"); err != nil {
			t.Fatal(err)
		}
		waitSleeper(t, term, arg)
		waitSleeper(t, term, arg2)
		if err := term.Input(who, "exit\n"); err != nil {
			t.Fatal(err)
		}
		<-term.gone
		checkSleepersGone(t, "PTY", arg)
		checkSleepersGone(t, "PTY", arg2)
	})
}

// Confined, the PID namespace ends with the terminal: even a process that left the
// session and dropped both markers goes.
func TestTerminalConfinedLeavesNothing(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	ts, err := NewTerminals(TerminalOptions{Root: root, Env: ownHome(t), Confiner: confine.New(confine.Spec{})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ts.Close)
	if c := ts.Confinement(); strings.HasPrefix(c, "none") {
		t.Skip("terminals cannot be confined here:", c)
	}
	ws := filepath.Join(root, "conv")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	arg := sleepArg(t)
	term, err := ts.Start(TerminalCaller{UserID: "u1"}, "conv", ws,
		"setsid env -u "+markerEnv+" -u "+terminalEnv+" sleep "+arg+" >/dev/null 2>&1 & sleep 0.2", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	waitSleeper(t, term, arg)
	<-term.gone
	checkSleepersGone(t, "confined", arg)
}

// A process that left a PTY session and dropped its markers, holding the terminal,
// does not keep the session's master, its reader or the host's PTY once the shell
// exited: the master is non-blocking, so closing it ends the read.
// Not parallel: a PTY number freed here may be taken by another test's session.
func TestEndedSessionReleasesPTYHeldByEscapee(t *testing.T) {
	root := t.TempDir()
	ts := newTestTerminals(t, root)
	who := TerminalCaller{UserID: "u1", UserName: "alice"}
	ws := filepath.Join(root, "conv")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	term, _, err := ts.OpenPTY(who, "conv", ws)
	if err != nil {
		t.Fatal(err)
	}
	arg := sleepArg(t)
	// Its standard input, output and error are the terminal.
	if err := term.Input(who, "setsid env -u "+markerEnv+" -u "+terminalEnv+" sleep "+arg+" &\n"); err != nil {
		t.Fatal(err)
	}
	waitSleeper(t, term, arg)
	n := ptyNumber(t, term)
	if err := term.Input(who, "exit\n"); err != nil {
		t.Fatal(err)
	}
	<-term.gone
	if len(sleepers(arg)) == 0 {
		t.Fatal("the escapee did not outlive the session; the test shows nothing")
	}
	waitMasterClosed(t, "escapee", n)
	select {
	case <-term.readDone:
	case <-time.After(5 * time.Second):
		t.Fatal("the ended session's reader still runs")
	}
	if ts.Get(term.ID) != term {
		t.Fatal("the ended session is no longer listed")
	}
}

// A session can be typed into as soon as it is announced (OnChange): its input's
// channel exists before it is listed (run with -race).
func TestPTYInputAsSoonAsAnnounced(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	who := TerminalCaller{UserID: "u1", UserName: "alice"}
	typed := make(chan error, 1)
	ts, err := NewTerminals(TerminalOptions{Root: root, Env: ownHome(t), InputWait: 5 * time.Second,
		OnChange: func(term *Terminal, c TerminalChange) {
			if c == TerminalOpened && term.Kind == KindPTY {
				go func() { typed <- term.Input(who, "echo typed-$((6*7))\n") }()
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ts.Close)
	term, _, err := ts.OpenPTY(who, "conv", root)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-typed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("input typed as the session was announced never reached it")
	}
	waitFor(t, term, 0, "typed-42")
}

// Ended terminals stay listed for KeepEnded, but not without bound: past
// MaxEndedPerOwner the one that ended first is forgotten, and a command line counts
// in the ended output's bound (once no output is left to drop, the first ended goes).
func TestEndedTerminalsAreBoundedInNumber(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir := filepath.Join(root, "conv")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(ts *Terminals, command string) *Terminal {
		t.Helper()
		term, err := ts.Start(TerminalCaller{UserID: "u1", UserName: "u1"}, "conv", dir, command, time.Minute, 0)
		if err != nil {
			t.Fatal(err)
		}
		<-term.gone
		return term
	}
	counts := func(ts *Terminals) (bytes, num int) {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		return ts.endedBytes["u1"], ts.endedNum["u1"]
	}

	t.Run("number", func(t *testing.T) {
		ts, err := NewTerminals(TerminalOptions{Root: t.TempDir(), Env: ownHome(t), MaxEndedPerOwner: 3})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(ts.Close)
		var ended []*Terminal
		for i := range 5 {
			ended = append(ended, run(ts, "echo "+strconv.Itoa(i)))
		}
		for i, term := range ended {
			if listed := ts.Get(term.ID) != nil; listed != (i >= 2) {
				t.Errorf("ended command %d listed: %v", i, listed)
			}
		}
		if _, n := counts(ts); n != 3 {
			t.Errorf("%d ended terminals counted, want 3", n)
		}
	})

	t.Run("command lines", func(t *testing.T) {
		const long = 50000
		ts, err := NewTerminals(TerminalOptions{Root: t.TempDir(), Env: ownHome(t), EndedOutputPerOwner: 2*long + 10000})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(ts.Close)
		command := ": " + strings.Repeat("x", long) + "; echo done"
		var ended []*Terminal
		for range 4 {
			ended = append(ended, run(ts, command))
		}
		b, n := counts(ts)
		if b > 2*long+10000 || b < n*len(command) || n != 2 {
			t.Fatalf("u1's ended terminals count %d bytes and %d terminals, want 2 terminals and their command lines (%d each)", b, n, len(command))
		}
		if ts.Get(ended[0].ID) != nil || ts.Get(ended[3].ID) == nil {
			t.Fatal("the first ended command is still listed, or the last is not")
		}
		ended[3].Close()
		if b2, n2 := counts(ts); b2 != b-len(command)-ringSize(ended[3].out) || n2 != 1 {
			t.Fatalf("after the newest was closed: %d bytes and %d terminals counted (were %d and %d)", b2, n2, b, n)
		}
	})
}

// The limit's message says what ends a terminal: close_session, exit typed into a
// session, a command's end or timeout (no page ends one).
func TestTerminalLimitSaysHowToEndOne(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	ts, err := NewTerminals(TerminalOptions{Root: root, Env: ownHome(t), MaxPerOwner: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ts.Close)
	who := TerminalCaller{UserID: "u1"}
	if _, err := ts.Start(who, "conv", root, "sleep 30", time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	_, err = ts.Start(who, "conv", root, "true", time.Minute, 0)
	if err == nil {
		t.Fatal("a second terminal started past the limit of 1")
	}
	for _, want := range []string{"close_session", "typing exit", "timeout"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the limit's message %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "or on the /terminals page,") {
		t.Errorf("the limit's message %q says the page ends a terminal", err)
	}
}
