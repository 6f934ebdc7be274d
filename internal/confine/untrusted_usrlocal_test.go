package confine_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/confine"
)

// TestRootUsrLocalOnlyForServers: as root, /usr/local stays writable for a stdio server
// an administrator configured (npm -g and pip put packages there), but not for a
// terminal or a template tool, whose commands a caller chose: a program dropped in
// /usr/local/bin would later run as root, unconfined. In both of root's modes.
func TestRootUsrLocalOnlyForServers(t *testing.T) {
	needRoot(t)
	t.Parallel()
	var dirs []string
	for _, d := range []string{"/usr/local", "/usr/local/bin"} {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			dirs = append(dirs, d)
		}
	}
	if len(dirs) == 0 {
		t.Skip("no /usr/local on this machine")
	}
	for _, m := range []struct {
		name string
		new  func(confine.Spec) *confine.Confiner
	}{{"host user namespace", confine.New}, {"own user namespace", confine.NewUserMode}} {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			c := m.new(confine.Spec{})
			for _, dir := range dirs {
				f := filepath.Join(dir, "toolwarden-confine-test-"+token(t))
				t.Cleanup(func() { _ = os.Remove(f) })
				for _, how := range []string{"server", "template tool", "terminal"} {
					ws := t.TempDir()
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					cmd := exec.CommandContext(ctx, "sh", "-c", `echo x > "$1" && rm "$1"`, "sh", f)
					cmd.Dir = ws
					cmd.Env = cleanEnv()
					cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
					switch how {
					case "server":
						c.Apply(cmd)
					case "template tool":
						c.ApplyUntrusted(cmd)
					case "terminal":
						c.ApplyTerminal(cmd, ws)
					}
					out, err := cmd.CombinedOutput()
					cancel()
					if how == "server" {
						if err != nil {
							t.Fatalf("a stdio server writing %s: %v: %s", f, err, out)
						}
						continue
					}
					if err == nil || !strings.Contains(string(out), erofs) {
						t.Errorf("a %s writing %s: got %v, %q; want a read-only file system", how, f, err, out)
						continue
					}
					if _, err := os.Stat(f); err == nil {
						t.Errorf("a %s left %s on the real filesystem", how, f)
					}
				}
			}
		})
	}
}
