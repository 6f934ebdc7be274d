package builtin

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/proctrack"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

func newTestTerminals(t *testing.T, root string) *Terminals {
	t.Helper()
	ts, err := NewTerminals(TerminalOptions{Root: root, Env: ownHome(t), BufferBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ts.Close)
	return ts
}

// waitFor waits until the terminal's output from index from on contains want, and
// returns that output.
func waitFor(t *testing.T, term *Terminal, from int64, want string) string {
	t.Helper()
	ch, cancel := term.Notify()
	defer cancel()
	deadline := time.After(10 * time.Second)
	for {
		data, _, _ := term.Output(from)
		if strings.Contains(string(data), want) {
			return string(data)
		}
		select {
		case <-ch:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("no %q in the output:\n%s", want, data)
		}
	}
}

// alive reports whether pid is a process that has not ended (a zombie has).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && !strings.HasPrefix(strings.TrimSpace(string(b[i+1:])), "Z")
}

func waitGone(t *testing.T, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d is still running", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

var pidsLine = regexp.MustCompile(`(?m)^PIDS [0-9 ]+\r?\n`)

// waitPIDs waits for a line "PIDS a b" in the output from index from on, and reads it.
func waitPIDs(t *testing.T, term *Terminal, from int64) []int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		data, _, _ := term.Output(from)
		if m := pidsLine.Find(data); m != nil {
			return pidsOf(t, string(m))
		}
		if time.Now().After(deadline) {
			t.Fatalf("no PIDS line in\n%s", data)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// pidsOf reads the pids a terminal printed as "PIDS a b c".
func pidsOf(t *testing.T, out string) []int {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if rest, ok := strings.CutPrefix(line, "PIDS "); ok {
			var pids []int
			for _, f := range strings.Fields(rest) {
				n, err := strconv.Atoi(f)
				if err != nil {
					t.Fatalf("pids %q", line)
				}
				pids = append(pids, n)
			}
			return pids
		}
	}
	t.Fatalf("no PIDS line in\n%s", out)
	return nil
}

// A PTY session: a login shell in the workspace with TERM set, input and output by
// absolute index, history, resize, reuse in the same directory, a new shell in
// another one, and nothing left running once closed.
func TestPTYLifecycle(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	ws := filepath.Join(root, "conv")
	if err := os.MkdirAll(filepath.Join(ws, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	ts := newTestTerminals(t, root)
	who := TerminalCaller{UserID: "u1", UserName: "alice"}
	term, reused, err := ts.OpenPTY(who, "conv", ws)
	if err != nil || reused {
		t.Fatal(err, reused)
	}
	if err := term.Input(who, "echo \"T=$TERM D=$(pwd) S=$((6*7))\"\n"); err != nil {
		t.Fatal(err)
	}
	out := waitFor(t, term, 0, "S=42")
	if !strings.Contains(out, "T=xterm-256color D="+ws) {
		t.Fatalf("environment: %s", out)
	}
	mark := term.out.End()
	if err := term.Resize(100, 40); err != nil {
		t.Fatal(err)
	}
	_ = term.Input(who, "stty size; echo RESIZED\n")
	after := waitFor(t, term, mark, "40 100")
	if strings.Contains(after, "S=42") {
		t.Fatalf("output from index %d repeats older output: %q", mark, after)
	}
	if hist, at, _ := term.Output(0); at != 0 || !strings.Contains(string(hist), "S=42") || !strings.Contains(string(hist), "40 100") {
		t.Fatalf("history: %d %q", at, hist)
	}
	if err := term.Resize(1, 5000); err == nil {
		t.Fatal("a 1x5000 terminal was accepted")
	}

	again, reused, err := ts.OpenPTY(who, "conv", ws)
	if err != nil || !reused || again != term {
		t.Fatalf("same directory: %v reused=%v", err, reused)
	}
	_ = term.Input(who, "sleep 300 & echo PI\"\"DS $$ $!\n")
	pids := waitPIDs(t, term, mark)
	other, reused, err := ts.OpenPTY(who, "conv", filepath.Join(ws, "sub"))
	if err != nil || reused || other == term {
		t.Fatalf("another directory: %v reused=%v", err, reused)
	}
	waitGone(t, pids...)
	if ts.Get(term.ID) != nil {
		t.Fatal("the replaced session is still listed")
	}

	_ = other.Input(who, "sleep 301 & echo PI\"\"DS $$ $!\n")
	pids = waitPIDs(t, other, 0)
	other.Close()
	waitGone(t, pids...)
	// The session's last processes may take a moment to be reaped after the kill.
	for deadline := time.Now().Add(5 * time.Second); len(sessionMembers(other.sid)) != 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if len(sessionMembers(other.sid)) != 0 || ts.Get(other.ID) != nil {
		t.Fatal("the closed session left processes or its entry")
	}
	if _, err := os.Stat(filepath.Join(ts.records, strconv.Itoa(other.sid)+".json")); !os.IsNotExist(err) {
		t.Fatalf("the closed session's record: %v", err)
	}
}

// The output buffer is bounded; an index older than what it keeps reads from the
// oldest byte kept, and the indexes stay absolute.
func TestRing(t *testing.T) {
	t.Parallel()
	r := newRing(8)
	_, _ = r.Write([]byte("abcdef"))
	_, _ = r.Write([]byte("ghij"))
	data, at, next := r.From(0)
	if string(data) != "cdefghij" || at != 2 || next != 10 {
		t.Fatalf("%q %d %d", data, at, next)
	}
	if data, at, _ := r.From(7); string(data) != "hij" || at != 7 {
		t.Fatalf("%q %d", data, at)
	}
	if data, at, _ := r.From(99); len(data) != 0 || at != 10 {
		t.Fatalf("%q %d", data, at)
	}
}

// A command: output, exit code, timeout (which kills what it started too), and a
// background command's own children go with it.
func TestCommand(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	ts := newTestTerminals(t, root)
	c, err := ts.Start(TerminalCaller{}, "conv", root, "echo out; echo err >&2; exit 3", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	if code := c.ExitCode(); code != 3 {
		t.Fatalf("exit code %d", code)
	}
	if out, _, _ := c.Output(0); string(out) != "out\nerr\n" {
		t.Fatalf("output %q", out)
	}
	// The command runs as given and is kept (stored, announced, listed) masked.
	tok, err := ts.Start(TerminalCaller{}, "conv", root, "GH_TOKEN=ghp_aBcD1234EfGh5678IjKl9012MnOp3456QrSt; echo ${#GH_TOKEN}", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	tok.ExitCode()
	if out, _, _ := tok.Output(0); string(out) != "40\n" || strings.Contains(tok.Command, "ghp_") {
		t.Fatalf("output %q, kept command %q", out, tok.Command)
	}
	start := time.Now()
	c, err = ts.Start(TerminalCaller{}, "conv", root, "sleep 302 & echo PI\"\"DS $$ $!; wait", 300*time.Millisecond, 0)
	if err != nil {
		t.Fatal(err)
	}
	pids := waitPIDs(t, c, 0)
	<-c.Done()
	if time.Since(start) > 5*time.Second || !strings.Contains(waitFor(t, c, 0, "timed out"), "timed out after 300ms") {
		t.Fatal("the timeout did not end the command")
	}
	waitGone(t, pids...)
}

// When the server's context ends, every terminal ends with it.
func TestTerminalsEndWithContext(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	ts := newTestTerminals(t, root)
	ctx, cancel := context.WithCancel(context.Background())
	ts.CloseWith(ctx)
	p, _, err := ts.OpenPTY(TerminalCaller{}, "a", root)
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Input(TerminalCaller{}, "sleep 303 & echo PI\"\"DS $$ $!\n")
	pids := waitPIDs(t, p, 0)
	c, err := ts.Start(TerminalCaller{}, "b", root, "sleep 304 & echo PI\"\"DS $$ $!; wait", time.Hour, 0)
	if err != nil {
		t.Fatal(err)
	}
	pids = append(pids, waitPIDs(t, c, 0)...)
	cancel()
	waitGone(t, pids...)
	deadline := time.Now().Add(5 * time.Second)
	for len(ts.List()) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(ts.List()); n != 0 {
		t.Fatalf("%d terminals left", n)
	}
	if _, _, err := ts.OpenPTY(TerminalCaller{}, "a", root); err == nil {
		t.Fatal("a terminal opened after the end")
	}
}

// crashChildEnv makes the test binary the "Toolwarden" of TestCleanupAfterCrash.
const crashChildEnv = "TW_TERMINAL_CRASH_CHILD"

// TestCrashChild is not a test of its own: TestCleanupAfterCrash runs the test binary
// with it as a Toolwarden that opens a terminal and is then killed with SIGKILL.
func TestCrashChild(t *testing.T) {
	root := os.Getenv(crashChildEnv)
	if root == "" {
		t.Skip("run by TestCleanupAfterCrash")
	}
	ts, err := NewTerminals(TerminalOptions{Root: root, Env: ownHome(t)})
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := ts.OpenPTY(TerminalCaller{}, "conv", root)
	if err != nil {
		t.Fatal(err)
	}
	// The shell dies of the hangup when its terminal goes with the killed parent;
	// what ignores SIGHUP (nohup) outlives it.
	_ = p.Input(TerminalCaller{}, "nohup sleep 305 >/dev/null 2>&1 & echo PI\"\"DS $!\n")
	out := waitFor(t, p, 0, "\nPIDS ")
	// nohup ignores SIGHUP and then becomes sleep: until it has, the hangup of the
	// killed parent's terminal would still end it.
	for _, pid := range waitPIDs(t, p, 0) {
		deadline := time.Now().Add(10 * time.Second)
		for {
			comm, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
			if strings.TrimSpace(string(comm)) == "sleep" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("process %d never became sleep (%q)", pid, comm)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// The last one leaves the terminal's session: only the run's marker finds it.
	c, err := ts.Start(TerminalCaller{}, "conv", root, "sleep 306 & a=$!; setsid sleep 308 & echo PI\"\"DS $$ $a $!; wait", time.Hour, 0)
	if err != nil {
		t.Fatal(err)
	}
	waitPIDs(t, c, 0)
	out2, _, _ := c.Output(0)
	for _, o := range []string{out, string(out2)} {
		for _, l := range strings.Split(o, "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "PIDS ") {
				os.Stdout.WriteString(strings.TrimSpace(l) + "\n")
			}
		}
	}
	os.Stdout.WriteString("READY\n")
	time.Sleep(time.Hour) // until killed
}

// A Toolwarden killed with SIGKILL leaves what its terminals started in the background
// running (their shells and commands die with it); the next start kills them, a
// process that left its terminal's session too, and only them: a
// process that is not marked as ours survives.
func TestCleanupAfterCrash(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	child := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.v")
	// The child's own temporary folders go inside one of ours: it is killed, so its
	// test cleanup never runs, and they would stay behind in /tmp.
	child.Env = append(os.Environ(), crashChildEnv+"="+root, "TMPDIR="+dbtest.TempDir(t))
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	var pids []int
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "PIDS ") {
			pids = append(pids, pidsOf(t, line)...)
		}
		if line == "READY" {
			break
		}
	}
	if len(pids) != 4 {
		_ = child.Process.Kill()
		t.Fatalf("the child's processes: %v", pids)
	}
	// A process of our own in a session of its own, not marked: not a terminal.
	decoy := exec.Command("sleep", "307")
	decoy.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := decoy.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = decoy.Process.Kill(); _ = decoy.Wait() })
	// A record that names the decoy's session with a marker it does not carry.
	if err := proctrack.Write(recordDir(root, hostID()), record{SID: decoy.Process.Pid, Marker: "run-someone-else"}); err != nil {
		t.Fatal(err)
	}

	_ = child.Process.Signal(syscall.SIGKILL)
	_ = child.Wait()
	// The command's own shell ($$, the second pid) gets SIGKILL with its Toolwarden
	// (PDEATHSIG); what it started in the background outlives it, as the nohup'd sleep
	// outlives the PTY's shell.
	waitGone(t, pids[1])
	time.Sleep(100 * time.Millisecond)
	for i, pid := range pids {
		if i != 1 && !alive(pid) {
			t.Fatalf("process %d died with its Toolwarden; the test shows nothing", pid)
		}
	}
	// Two sessions, the decoy's, and the run's own record and lock.
	ents, _ := os.ReadDir(recordDir(root, hostID()))
	if len(ents) != 5 {
		t.Fatalf("records: %d", len(ents))
	}

	// The restart: the terminals start by cleaning up after the previous run.
	ts, err := NewTerminals(TerminalOptions{Root: root, Env: ownHome(t)})
	if err != nil {
		t.Fatal(err)
	}
	ts.Close()
	waitGone(t, pids...)
	if !alive(decoy.Process.Pid) {
		t.Fatal("the cleanup killed a process that was not a terminal's")
	}
	if ents, _ := os.ReadDir(recordDir(root, hostID())); len(ents) != 0 {
		t.Fatalf("records left after a clean stop: %d", len(ents))
	}
}

// The ring against a plain buffer, over writes of every size, across many wraps.
func TestRingWraps(t *testing.T) {
	t.Parallel()
	// Write sizes growing from 0, and sizes where a write larger than the capacity
	// comes while the buffer is still part full (3 bytes, then 8).
	for _, size := range []func(i int) int{func(i int) int { return i % 11 }, func(i int) int { return (i*5 + 3) % 17 }} {
		r := newRing(7)
		var all []byte
		for i := range 40 {
			p := make([]byte, size(i))
			for j := range p {
				p[j] = byte('a' + (len(all)+j)%26)
			}
			_, _ = r.Write(p)
			all = append(all, p...)
			for _, from := range []int64{0, int64(len(all)) - 3, int64(len(all))} {
				data, at, next := r.From(from)
				wantAt := max(from, max(0, int64(len(all))-7))
				if next != int64(len(all)) || at != min(wantAt, next) || string(data) != string(all[at:]) {
					t.Fatalf("after %d bytes, from %d: %q at %d next %d", len(all), from, data, at, next)
				}
			}
		}
	}
}

// A terminal whose process ended stays readable for a while, then is dropped; its
// PTY is closed then too.
func TestEndedTerminalsDropped(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	ts, err := NewTerminals(TerminalOptions{Root: root, Env: ownHome(t), KeepEnded: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ts.Close)
	c, err := ts.Start(TerminalCaller{}, "conv", root, "echo done", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	<-c.Done()
	if ts.Get(c.ID) == nil {
		t.Fatal("an ended command was dropped at once")
	}
	deadline := time.Now().Add(5 * time.Second)
	for ts.Get(c.ID) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the ended command is still listed")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ownHome gives a test's terminals a home of their own: the login shell then reads no
// login file of the host's (a pyenv rehash there is slow, and waits a minute on the
// lock a shell killed during it leaves behind).
func ownHome(tb testing.TB) []string { return []string{"HOME=" + tb.TempDir()} }

// TestTerminalEnvironmentLeavesToolwardenOut: a command sees Toolwarden's environment
// without Toolwarden's own settings (its secrets among them) or PostgreSQL's client
// settings, so `env` in a terminal shows an agent no database password or API key;
// the rest passes, and TerminalOptions.Env comes last.
func TestTerminalEnvironmentLeavesToolwardenOut(t *testing.T) {
	t.Setenv("TOOLWARDEN_LLM_API_KEY", "sk-leak-check")
	t.Setenv("DATABASE_URL", "postgres://owner:db-leak-check@db/toolwarden")
	t.Setenv("PGPASSWORD", "pg-leak-check")
	t.Setenv("TW_TEST_PASSES", "passes-through")
	root := t.TempDir()
	home := t.TempDir()
	ts, err := NewTerminals(TerminalOptions{Root: root, Env: []string{"HOME=" + home}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ts.Close)
	c, err := ts.Start(TerminalCaller{}, "conv", root, "env", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	if code := c.ExitCode(); code != 0 {
		t.Fatalf("env exited %d", code)
	}
	out, _, _ := c.Output(0)
	for _, leak := range []string{"sk-leak-check", "db-leak-check", "pg-leak-check"} {
		if strings.Contains(string(out), leak) {
			t.Errorf("the terminal's environment holds %q:\n%s", leak, out)
		}
	}
	for _, want := range []string{"TW_TEST_PASSES=passes-through", "HOME=" + home + "\n", "TERM=xterm-256color", markerEnv + "="} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the terminal's environment lacks %q:\n%s", want, out)
		}
	}
}

// Two runs sharing a root (replicas on one host): the second's start leaves the
// first's running terminals and records alone.
func TestSharedRootLeavesLiveRunsAlone(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	first := newTestTerminals(t, root)
	c, err := first.Start(TerminalCaller{}, "conv", root, "setsid sleep 309 & sleep 308", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	second := newTestTerminals(t, root)
	_ = second
	select {
	case <-c.done:
		t.Fatal("the second run's start ended the first run's terminal")
	case <-time.After(300 * time.Millisecond):
	}
	if _, err := os.Stat(filepath.Join(first.records, strconv.Itoa(c.sid)+".json")); err != nil {
		t.Fatalf("the first run's record: %v", err)
	}
}

// Input to a program that reads none of it fills the PTY's queue: the write that does
// not go through is waited for a bounded time, what comes next is refused at once (and
// not recorded), and the terminal still closes.
func TestTerminalInputToAProgramNotReading(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	var recorded int
	ts, err := NewTerminals(TerminalOptions{Root: root, Env: ownHome(t), InputWait: 300 * time.Millisecond,
		OnInput: func(_ *Terminal, _ TerminalCaller, lines []TypedLine) error { recorded += len(lines); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ts.Close)
	dir := filepath.Join(root, "conv-full")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	term, _, err := ts.OpenPTY(TerminalCaller{UserName: "u"}, "conv-full", dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := term.Input(TerminalCaller{}, "stty -icanon -echo; echo READY; sleep 600\r"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, term, 0, "READY")
	chunk := strings.Repeat("x", 16<<10)
	var waited error
	for i := 0; i < 200 && waited == nil; i++ {
		waited = term.Input(TerminalCaller{}, chunk)
	}
	if waited == nil || !strings.Contains(waited.Error(), "not reading it yet") {
		t.Fatalf("input past a full queue: %v, want told the program is not reading", waited)
	}
	before := recorded
	start := time.Now()
	if err := term.Input(TerminalCaller{}, "echo more\r"); err == nil || !strings.Contains(err.Error(), "not typed") || time.Since(start) > time.Second {
		t.Fatalf("input behind a write not taken: %v after %s, want refused at once", err, time.Since(start))
	}
	if recorded != before {
		t.Fatalf("refused input was recorded (%d lines)", recorded-before)
	}
	done := make(chan struct{})
	go func() { term.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the terminal did not close while a write was blocked")
	}
}

// A line whose keys spell another line when no line editor reads them (Ctrl-A a
// character, then erased) is audited with that reading too: the shell may have run it.
func TestTerminalAuditNamesTheReadingWithoutLineEditing(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	var mu sync.Mutex
	var texts []string
	ts, err := NewTerminals(TerminalOptions{Root: root, Env: ownHome(t),
		OnInput: func(_ *Terminal, _ TerminalCaller, lines []TypedLine) error {
			mu.Lock()
			defer mu.Unlock()
			for _, l := range lines {
				texts = append(texts, l.Text)
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ts.Close)
	dir := filepath.Join(root, "conv-canon")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	term, _, err := ts.OpenPTY(TerminalCaller{UserName: "u"}, "conv-canon", dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := term.Input(TerminalCaller{Source: BrowserSource}, "echo a\x01\x7fb\r"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(texts) != 1 || !strings.Contains(texts[0], `[without line editing: "echo ab"`) {
		t.Fatalf("audited: %q; want the reading without line editing named", texts)
	}
}
