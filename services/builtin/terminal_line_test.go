package builtin

import (
	"reflect"
	"strings"
	"testing"
)

// The audit's view of typed lines: edits with the cursor keys, Home/End, Delete,
// Ctrl-A/E/U/W/K are applied as the shell applies them; Ctrl-C drops the line;
// history and completion mark it; escape sequences and UTF-8 characters cut between
// two inputs are put together.
func TestLineEditor(t *testing.T) {
	for _, c := range []struct {
		name   string
		inputs []string
		want   []edited
	}{
		{"plain", []string{"ls -la\r"}, []edited{{text: "ls -la"}}},
		{"two lines in one input", []string{"a\rb\n"}, []edited{{text: "a"}, {text: "b"}}},
		{"backspace", []string{"lss\x7f -l\r"}, []edited{{text: "ls -l"}}},
		{"left arrow then insert", []string{"echo wrld\x1b[D\x1b[D\x1b[Do\r"}, []edited{{text: "echo world"}}},
		{"home and end", []string{"cho x\x1b[He\x1b[F!\r"}, []edited{{text: "echo x!"}}},
		{"home and end as ~ keys", []string{"b\x1b[1~a\x1b[4~c\r"}, []edited{{text: "abc"}}},
		{"delete key", []string{"rmm\x1b[D\x1b[3~\r"}, []edited{{text: "rm"}}},
		{"ctrl-a ctrl-e", []string{"cd\x01sudo \x05 /\r"}, []edited{{text: "sudo cd /"}}},
		{"ctrl-u", []string{"rm -rf /\x15ls\r"}, []edited{{text: "ls"}}},
		{"ctrl-w", []string{"git push force\x17\r"}, []edited{{text: "git push "}}},
		// The kernel's Ctrl-W takes "force" only: which line runs depends on the program.
		{"ctrl-w over punctuation", []string{"git push --force\x17\r"}, []edited{{text: "git push ", shell: true}}},
		{"ctrl-k", []string{"echo abc\x1b[D\x1b[D\x0b\r"}, []edited{{text: "echo a"}}},
		{"alt-b", []string{"one two\x1bbX\r"}, []edited{{text: "one Xtwo"}}},
		{"ctrl-c drops", []string{"rm -rf /\x03ls\r"}, []edited{{text: "ls"}}},
		{"up arrow: history", []string{"\x1b[A\r"}, []edited{{text: "", shell: true}}},
		{"SS3 up arrow", []string{"\x1bOA\r", "ls\r"}, []edited{{text: "", shell: true}, {text: "ls"}}},
		{"tab completion", []string{"cat REA\t\r"}, []edited{{text: "cat REA", shell: true}}},
		{"escape cut in two", []string{"ab\x1b[", "Dx\r"}, []edited{{text: "axb"}}},
		{"utf-8 cut in two", []string{"echo \xc3", "\xa9\r"}, []edited{{text: "echo é"}}},
		{"no newline yet", []string{"partial"}, nil},
		// Keys the editor does not follow mark the line: the shell ran something else.
		{"ctrl-u then ctrl-y", []string{"sudo rm -rf /srv\x15\x19\r"}, []edited{{text: "", shell: true}}},
		{"alt-d", []string{"ls x\x1b[D\x1b[D\x1bd\r"}, []edited{{text: "ls x", shell: true}}},
		{"ctrl-t", []string{"sl\x14\r"}, []edited{{text: "sl", shell: true}}},
		{"ctrl-v enter stays in the line", []string{"echo a\x16\rb\r"}, []edited{{text: "echo a\rb", shell: true}}},
		{"ctrl-b ctrl-f ctrl-d", []string{"lxs\x02\x02\x04\x06 -l\r"}, []edited{{text: "ls -l"}}},
		// Ctrl-O runs the line as Enter does; the next is the history's.
		{"ctrl-o runs the line", []string{"/tmp/x\x01rm -rf \x0f\x15\r"}, []edited{{text: "rm -rf /tmp/x"}, {text: "", shell: true}}},
		{"ctrl-] searches", []string{"xrm -rf /tmp/x\x01\x1dx\x04\r"}, []edited{{text: "xrm -rf /tmp/x", shell: true}}},
		{"ctrl-l and ctrl-g change nothing", []string{"l\x0cs\x07\r"}, []edited{{text: "ls"}}},
		{"ctrl-left is not left", []string{"ab\x1b[1;5Dx\r"}, []edited{{text: "abx", shell: true}}},
		{"insert toggles overwrite", []string{"ab\x1b[D\x1b[2~x\r"}, []edited{{text: "axb", shell: true}}},
		{"bracketed paste", []string{"\x1b[200~rm -rf /tmp/x \x15\x1b[201~\r"}, []edited{{text: "", shell: true}}},
		// A sequence that is not a key ends at a control byte, which is acted on: an
		// Enter there runs a line.
		{"enter inside a sequence", []string{"rm -rf ~/x;\x1b[\r\x03", "A\x03"}, []edited{{text: "rm -rf ~/x;", shell: true}}},
		{"ctrl-c inside a sequence", []string{"rm x\x1b[1\x03ls\r"}, []edited{{text: "ls"}}},
		{"esc before enter", []string{"rm x\x1b\r"}, []edited{{text: "rm x", shell: true}}},
		{"unending parameters", []string{"\x1b[" + strings.Repeat("0", 4*maxEscapeParams), "ls\r"}, []edited{{text: strings.Repeat("0", 3*maxEscapeParams) + "ls", shell: true}}},
		{"too long", []string{strings.Repeat("a", maxAuditLine+10) + "\r"}, []edited{{text: strings.Repeat("a", maxAuditLine), cut: true}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var e lineEditor
			var got []edited
			for _, in := range c.inputs {
				got = append(got, readlineOnly(e.feed([]byte(in)))...)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

// readlineOnly is lines as readline rebuilds them: their other readings left out.
func readlineOnly(lines []edited) []edited {
	for i := range lines {
		lines[i].others = nil
	}
	return lines
}
