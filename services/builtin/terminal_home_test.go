package builtin

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/internal/confine"
)

// homeProbe prints, on lines of their own, the shell's home, its history file, what its
// home holds, and how many entries the home directory of Toolwarden's user shows.
func homeProbe(tag, realHome string) string {
	return `echo "` + tag + `-HOME=$HOME"; echo "` + tag + `-HIST=$HISTFILE"; echo "` + tag + `-LS:$(ls -A ~ | tr '\n' ' ')"; ` +
		`echo "` + tag + `-REAL:$(ls -A ` + realHome + ` 2>/dev/null | wc -l)"; echo ` + tag + `-END-$((6*7))` + "\n"
}

// probed reads what homeProbe printed (not the echoed command line: its values start
// with "$").
func probed(out, tag, what string) string {
	m := regexp.MustCompile(tag+`-`+what+`([^$\r\n][^\r\n]*|)\r?\n`).FindAllStringSubmatch(out, -1)
	for _, s := range m {
		if s[1] != "" {
			return strings.TrimSpace(s[1])
		}
	}
	return ""
}

// Two conversations' terminals have homes of their own, confined or not: a login file
// one plants in ~ does not run in the other's next shell, nor does the other see its
// files (an `export GH_TOKEN=…` in its history); the home Toolwarden's environment
// names is left alone. Confined, the home directory of Toolwarden's user is hidden too.
func TestTerminalHomePerConversation(t *testing.T) {
	t.Parallel()
	for _, confined := range []bool{false, true} {
		name := "unconfined"
		if confined {
			name = "confined"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			shared := t.TempDir() // Toolwarden's own home, as its environment names it
			var c *confine.Confiner
			if confined {
				c = confine.New(confine.Spec{Hide: []string{root}})
				if d := c.Describe(); strings.HasPrefix(d, "none") {
					t.Skip(d)
				}
			}
			ts, err := NewTerminals(TerminalOptions{Root: root, Env: []string{"HOME=" + shared}, Confiner: c, BufferBytes: 64 << 10})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(ts.Close)
			realHome, _ := os.UserHomeDir()
			checkReal := confined && filepath.IsAbs(realHome) && realHome != "/" && !strings.HasPrefix(root, realHome+"/")
			if ents, err := os.ReadDir(realHome); err != nil || len(ents) == 0 {
				checkReal = false // nothing to tell hidden from there
			}
			who := TerminalCaller{UserID: "u1", UserName: "alice"}
			open := func(conv string) *Terminal {
				ws := filepath.Join(root, conv)
				if err := os.Mkdir(ws, 0o700); err != nil {
					t.Fatal(err)
				}
				term, _, err := ts.OpenPTY(who, conv, ws)
				if err != nil {
					t.Fatal(err)
				}
				return term
			}

			a := open("conv-a")
			plant := `echo 'echo PLANTED-$((6*7))' >> ~/.bash_profile; echo 'export GH_TOKEN=tok-a' > ~/note-a; ` + homeProbe("A", realHome)
			if err := a.Input(who, plant); err != nil {
				t.Fatal(err)
			}
			outA := waitFor(t, a, 0, "A-END-42")
			b := open("conv-b")
			if err := b.Input(who, homeProbe("B", realHome)); err != nil {
				t.Fatal(err)
			}
			outB := waitFor(t, b, 0, "B-END-42")

			homeA, homeB := probed(outA, "A", "HOME="), probed(outB, "B", "HOME=")
			if homeA == "" || homeA == homeB {
				t.Fatalf("the two conversations' terminals share HOME %q:\n%s\n%s", homeA, outA, outB)
			}
			if h := probed(outA, "A", "HIST="); h != homeA+"/.bash_history" {
				t.Errorf("HISTFILE %q, want it in the conversation's home %s", h, homeA)
			}
			if strings.Contains(outB, "PLANTED-42") {
				t.Errorf("a login file one conversation planted in ~ ran in another's shell:\n%s", outB)
			}
			if ls := probed(outB, "B", "LS:"); strings.Contains(ls, "note-a") || strings.Contains(ls, ".bash_profile") {
				t.Errorf("another conversation's home files are in ~: %q", ls)
			}
			if _, err := os.Stat(filepath.Join(shared, "note-a")); err == nil {
				t.Errorf("a terminal wrote into Toolwarden's own home %s", shared)
			}
			if checkReal {
				if n := probed(outA, "A", "REAL:"); n != "0" {
					t.Errorf("a confined terminal lists %s entries of the home directory of Toolwarden's user %s", n, realHome)
				}
			}
		})
	}
}
