package builtin

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
)

// The editor against bash's readline: each input is typed into a real bash -i, after a
// command "show" that prints its arguments (single-spaced, so "$*" is the line). The line
// bash ran must be the one the editor rebuilt, or its start when the editor cut it; any
// other line must be marked as the shell's.
func TestLineEditorMatchesBash(t *testing.T) {
	long := "show rm -f x" + strings.Repeat(" ", maxAuditLine-len("show rm -f x"))
	inputs := []string{
		"show one two\x1bbX\r",
		"show echo abc def\x1bb\x1bbX\r",
		"show ab cd\x01\x1bf\x1bfX\r",
		"show rm -f x\x1bb\x1bbr\r",
		"show rm -r+ f x\x01\x1bf\x1bf\x1bf\x04\x04\r",
		"show a.b/c-d e\x1bb\x1bb\x1bbX\x1bf\x1bfY\r",
		"show ls\x1bf -l\r",
		long + "\x01" + strings.Repeat("\x06", len("show rm -")) + "r\r",
		"show " + strings.Repeat("a", maxAuditLine) + "\r",
	}
	ran := bashRuns(t, "", inputs)
	for i, in := range inputs {
		var e lineEditor
		got := e.feed([]byte(in))
		bash := "show " + ran[i]
		// Ctrl-D twice also records, before it, the line canonical mode would have run.
		switch last := len(got) - 1; {
		case len(got) == 0 || len(got) > 1 && !strings.Contains(in, "\x04\x04"):
			t.Errorf("%.40q: the editor rebuilt %d lines", in, len(got))
		case got[last].shell, got[last].text == bash, got[last].cut && strings.HasPrefix(bash, got[last].text):
		default:
			t.Errorf("%.40q: the editor rebuilt %.40q (cut %v), bash ran %.40q", in, got[last].text, got[last].cut, bash)
		}
	}
}

// The editor against bash without readline (set +o emacs): the kernel's canonical mode
// edits the line, where Ctrl-A is a character a backspace erases, Ctrl-W erases letters
// and digits only and Ctrl-D hands the line over. The line bash ran must be one of those
// the editor rates (the text or another reading), and a line the two editors build
// apart with an erase must be marked as the shell's.
func TestLineEditorMatchesBashWithoutReadline(t *testing.T) {
	inputs := []string{
		"show rm \x01\x7f-rf d\r",
		"show rm -rf x-y\x17\r",
		"show rm -rf -- \x17\r",
		"show rm -rf x-\x04\x7f\x7f\r",
		"show ab\x1b[D\x7fc\r",
		"show x\x15show a b\r",
		"show é\x7f\x7fx\r",
		"show rm -rf d\x04\x04",
		"show plain\r",
	}
	ran := bashRuns(t, "set +o emacs", inputs)
	for i, in := range inputs {
		var e lineEditor
		got := e.feed([]byte(in))
		bash := "show " + ran[i]
		if len(got) == 0 {
			t.Errorf("%q: no line, bash ran %q", in, bash)
			continue
		}
		l := got[0]
		if !slices.Contains(append([]string{l.text}, l.others...), bash) {
			t.Errorf("%q: the editor rates %q and %q, bash ran %q", in, l.text, l.others, bash)
		}
		if l.text != bash && strings.ContainsAny(in, "\x7f\x08\x17\x15") && !l.shell {
			t.Errorf("%q: rebuilt %q by readline, bash ran %q; the line is not marked", in, l.text, bash)
		}
	}
}

// bashRuns types each input into a real bash -i (after setup, when not ""), at a prompt,
// and returns the arguments of the "show" it ran ("$*", single-spaced).
func bashRuns(t *testing.T, setup string, inputs []string) []string {
	t.Helper()
	if _, err := os.Stat("/bin/bash"); err != nil {
		t.Skip("no /bin/bash")
	}
	cmd := exec.Command("/bin/bash", "--norc", "--noprofile", "-i")
	cmd.Env = []string{"TERM=xterm", "INPUTRC=/dev/null", "PS1=READY> ", "HOME=" + t.TempDir(), "LC_ALL=C.UTF-8", "PATH=/usr/bin:/bin"}
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 24, Cols: 80})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = ptmx.Close()
	}()
	var (
		mu  sync.Mutex
		out bytes.Buffer
	)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			mu.Lock()
			out.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	// wait returns what f finds in bash's output, waiting for it (a stuck bash fails the
	// test rather than hanging it).
	wait := func(what string, f func(out []byte) (string, bool)) string {
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			mu.Lock()
			found, ok := f(out.Bytes())
			all := out.String()
			mu.Unlock()
			if ok {
				return found
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %s from bash; its output: %q", what, all)
			}
		}
	}
	// Each input is typed at a prompt: readline has the terminal then (in between, the
	// kernel's canonical mode would cut a long line at 4095 characters).
	prompts := func(n int) func([]byte) (string, bool) {
		return func(out []byte) (string, bool) { return "", bytes.Count(out, []byte("READY> ")) >= n }
	}
	wait("prompt", prompts(1))
	// The typed definition holds no "<<" (its quotes split it): only show's output does.
	if _, err := ptmx.Write([]byte(`show() { printf '\n%s\n' "<""<$*>"">"; }` + "\r")); err != nil {
		t.Fatal(err)
	}
	wait("prompt", prompts(2))
	if setup != "" {
		if _, err := ptmx.Write([]byte(setup + "\r")); err != nil {
			t.Fatal(err)
		}
		wait("prompt", prompts(3))
	}
	shown := regexp.MustCompile(`<<(.*)>>`)
	var ran []string
	for _, in := range inputs {
		if _, err := ptmx.Write([]byte(in)); err != nil {
			t.Fatal(err)
		}
		ran = append(ran, wait("line run", func(out []byte) (string, bool) {
			m := shown.FindAllSubmatchIndex(out, -1)
			if len(m) < len(ran)+1 {
				return "", false
			}
			at := m[len(ran)]
			return string(out[at[2]:at[3]]), bytes.Contains(out[at[1]:], []byte("READY> "))
		}))
	}
	return ran
}
