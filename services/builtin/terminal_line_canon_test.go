package builtin

import (
	"slices"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/risk"
)

// The editor rebuilt lines as readline does only: after "set +o emacs" (or in sh, dash,
// bash --noediting, a read loop) the kernel's canonical mode edits the line, where
// Ctrl-A is a character that a backspace erases, so "rm \x01\x7f-rf d" runs rm -rf d and
// readline reads "-rf drm ". Each line is now also read as canonical mode builds it and
// without its control bytes, and marked when an erase leaves the readings apart.
func TestLineEditorWithoutReadline(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in, canon string
		shell     bool
	}{
		{"rm \x01\x7f-rf d\r", "rm -rf d", true},
		{"rm \x01\x08-rf d\r", "rm -rf d", true}, // stty erase ^H
		{"rm -rf x-y\x17\r", "rm -rf x-", true},  // Linux's Ctrl-W takes letters and digits
		{"rm -rf -- \x17\r", "rm -", true},
		{"rm -r\x04\x7f\x7fx y\r", "rm -rx y", true}, // Ctrl-D handed "rm -r" over
		{"ab\x1b[D\x7fc\r", "ab\x1b[c", true},
		{"x\x15rm -r y\r", "rm -r y", false},
		{"ls\x16\x7f\r", "ls\x7f", true}, // Ctrl-V: the next key as it is
		{"lss\x7f -l\r", "ls -l", false},
		{"echo é\x7f\r", "echo \xc3", true}, // without iutf8 a byte; either way, marked
		{"sudo\x01\x7f reboot\r", "sudo reboot", true},
		{"ls\x13 -l\r", "ls -l", true}, // Ctrl-S stops output, Ctrl-Q starts it
		{"cd\x01sudo \x05 /\r", "cd\x01sudo \x05 /", false},
	} {
		var e lineEditor
		got := e.feed([]byte(c.in))
		if len(got) != 1 {
			t.Errorf("%q: %d lines", c.in, len(got))
			continue
		}
		if l := got[0]; !slices.Contains(append([]string{l.text}, l.others...), c.canon) || l.shell != c.shell {
			t.Errorf("%q: %q (shell %v) and %q, want %q among them (shell %v)", c.in, l.text, l.shell, l.others, c.canon, c.shell)
		}
	}
	// Ctrl-D at an empty canonical line after one that handed text over runs that text;
	// readline's line goes on, and both are recorded.
	var e lineEditor
	got := e.feed([]byte("rm -rf d\x01\x04\x04ls\r"))
	if len(got) != 2 || !slices.Contains(got[0].others, "rm -rf d\x01") || !got[0].shell || !slices.Contains(got[1].others, "ls") {
		t.Errorf("Ctrl-D twice: %+v, want the canonical line run, then the rest", got)
	}
}

// The typed input is rated by each reading: a line canonical mode builds into rm -rf is
// HIGH however readline reads it, and one no reading makes risky stays unrated. A lone
// Ctrl-A or Ctrl-B is a key, not the backtick marker the rules use.
func TestInputRiskWithoutReadline(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"rm \x01\x7f-rf d\n", "rm \x01\x7f-rf d", "rm \x01\x08-rf d\n", "sudo\x01\x7f reboot\n",
		"rm -r\x04\x7f\x7fx y\n", "rm \x01\x7f-rf d\x01\x04\x04",
	} {
		if l, why, ok := InputRisk(in); !ok || l != risk.High {
			t.Errorf("%q: %v %q %v, want HIGH", in, l, why, ok)
		}
	}
	for _, in := range []string{"set +o emacs\n", "ls -la\n", "lss\x7f -l\n", "\x15ls\n", "echo hi\x17\x17ls\n", "\x01", "\x02", "\x05", "ls\x01\x05\n"} {
		if l, why, ok := InputRisk(in); ok {
			t.Errorf("%q: %v %q, want no rule", in, l, why)
		}
	}
	// Typed in two pieces, the line is rated whole by each reading.
	var held lineEditor
	held.feed([]byte("rm \x01"))
	if why := joinedRisk(&held, "\x7f-rf d\n", false); !strings.Contains(why, "deletes recursively") {
		t.Errorf("rm ^A then ^? -rf d: %q, want it rated as rm -rf d", why)
	}
}
