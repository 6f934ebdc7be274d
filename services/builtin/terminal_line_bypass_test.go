package builtin

import (
	"reflect"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/risk"
)

// cutLine is "rm -f ~/x" padded with spaces to maxAuditLine characters: the editor keeps
// no more of it.
var cutLine = "rm -f ~/x" + strings.Repeat(" ", maxAuditLine-len("rm -f ~/x"))

// Word motions and a line past maxAuditLine hid an rm -rf from the rating: readline's
// words are letters and digits (ESC b ESC b r turns "rm -f x" into "rm -rf x", where a
// space-delimited word made it "rm r-f x"), and a key dropped from a full line was
// inserted by the shell. Both are HIGH.
func TestInputRiskWordMotionsAndCutLines(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"rm -f x\x1bb\x1bbr\n",                             // bash runs rm -rf x
		"rm -f x\x1bb\x1bbr",                               // unfinished
		"rm -r+ f x\x01\x1bf\x1bf\x04\x04\n",               // ESC f stops before '+': bash runs rm -rf x
		"rm -f x\x1b[1;5D\x1b[1;5Dr\n",                     // Ctrl-Left
		"rm -f x\x1b[1;3D\x1b[1;3Dr\n",                     // Alt-Left
		cutLine + "\x01\x06\x06\x06\x06r\n",                // bash runs rm -rf ~/x
		cutLine + "\x01\x06\x06\x06\x06r",                  // unfinished
		"echo " + strings.Repeat("a", maxAuditLine) + "\n", // cut, no later edit
		"echo " + strings.Repeat("a", maxAuditLine),        // cut and unfinished
	} {
		l, why, ok := InputRisk(in)
		if !ok || l != risk.High || why == "" {
			t.Errorf("%.40q…: %v %q %v, want HIGH", in, l, why, ok)
		}
		if strings.HasPrefix(in, "echo ") && !strings.Contains(why, "longer than") {
			t.Errorf("%.40q…: %q does not say the line was cut", in, why)
		}
	}
	// Word motions over letters, digits and spaces only are followed as they are.
	for _, in := range []string{"echo abc def\x1bb\x1bbX\n", "ab cd\x01\x1bfX\n"} {
		if l, why, ok := InputRisk(in); ok {
			t.Errorf("%q: %v %q", in, l, why)
		}
	}
}

// The editor moves by readline's words (what bash does) and marks the line when a
// space-delimited word would end elsewhere or a character's class depends on the
// locale; a key dropped from the middle of a full line, or one changing a cut line,
// marks it too, since its text is then not the start of the line run.
func TestLineEditorWordMotionsAndCut(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		in   string
		want []edited
	}{
		{"alt-b over letters", "echo abc def\x1bb\x1bbX\r", []edited{{text: "echo Xabc def"}}},
		{"alt-f over letters", "ab cd\x01\x1bfX\r", []edited{{text: "abX cd"}}},
		{"alt-b over a dash", "rm -f x\x1bb\x1bbr\r", []edited{{text: "rm -rf x", shell: true}}},
		{"alt-f stops at punctuation", "rm -r+ f x\x01\x1bf\x1bf\x04\x04\r", []edited{
			{text: "rm -rf x", shell: true}, // without readline, Ctrl-D twice runs the line
			{text: "rm -rf x", shell: true},
		}},
		{"alt-b over non-ascii", "echo é\x1bbX\r", []edited{{text: "echo Xé", shell: true}}},
		{"alt-b at the start", "\x1bbls\r", []edited{{text: "ls"}}},
		{"alt-f at the end", "ls\x1bf -l\r", []edited{{text: "ls -l"}}},
		{"full line, key dropped at the end", cutLine + "x\r", []edited{{text: cutLine, cut: true}}},
		{"full line, key dropped inside", cutLine + "\x01\x06\x06\x06\x06r\r", []edited{{text: cutLine, shell: true, cut: true}}},
		{"full line, then a backspace", cutLine + "xy\x7f\r", []edited{{text: cutLine[:maxAuditLine-1], shell: true, cut: true}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var e lineEditor
			if got := readlineOnly(e.feed([]byte(c.in))); !reflect.DeepEqual(got, c.want) {
				if len(c.in) > 100 {
					t.Errorf("got %d lines, shell/cut %+v, want %+v", len(got), flags(got), flags(c.want))
				} else {
					t.Errorf("got %+v, want %+v", got, c.want)
				}
			}
		})
	}
}

func flags(ls []edited) (f [][2]bool) {
	for _, l := range ls {
		f = append(f, [2]bool{l.shell, l.cut})
	}
	return f
}
