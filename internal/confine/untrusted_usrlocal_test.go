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

// TestRootShownInReadOnlyTree: as root, a directory shown to a terminal stays writable
// where it lies in a read-only tree (a workspace under /usr/local, outside any hidden
// directory), because the helper showed it; a link planted among the shown paths keeps
// nothing writable, not what it points to. In both of root's modes.
func TestRootShownInReadOnlyTree(t *testing.T) {
	needRoot(t)
	t.Parallel()
	if st, err := os.Stat("/usr/local"); err != nil || !st.IsDir() {
		t.Skip("no /usr/local on this machine")
	}
	for _, m := range []struct {
		name string
		new  func(confine.Spec) *confine.Confiner
	}{{"host user namespace", confine.New}, {"own user namespace", confine.NewUserMode}} {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			data, err := os.MkdirTemp("/usr/local", "toolwarden-confine-test-")
			if err != nil {
				t.Skip("cannot make a directory under /usr/local: ", err)
			}
			t.Cleanup(func() { _ = os.RemoveAll(data) })
			ws := filepath.Join(data, "workspaces", "conv-a")
			if err := os.MkdirAll(ws, 0o700); err != nil {
				t.Fatal(err)
			}
			link := filepath.Join(data, "workspaces", "evil")
			if err := os.Symlink("/usr/local", link); err != nil {
				t.Fatal(err)
			}
			planted := filepath.Join("/usr/local", "toolwarden-confine-test-"+token(t))
			t.Cleanup(func() { _ = os.Remove(planted) })
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, "sh", "-c", `echo made > "$1/made"; touch "$2" 2>/dev/null && echo wrote-usr-local; echo end`,
				"sh", ws, planted)
			cmd.Dir = ws
			cmd.Env = cleanEnv()
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
			c := m.new(confine.Spec{})
			confine.SetRuntimeDirs(c)
			c.ApplyTerminal(cmd, ws, link)
			out, err := cmd.CombinedOutput()
			if err != nil || string(out) != "end\n" {
				t.Fatalf("got %v, %q; want the workspace written and nothing else", err, out)
			}
			if b, err := os.ReadFile(filepath.Join(ws, "made")); err != nil || string(b) != "made\n" {
				t.Fatalf("a file written in the shown directory: got %q, %v", b, err)
			}
			if _, err := os.Stat(planted); err == nil {
				t.Fatal("a file was made in /usr/local through a planted link")
			}
		})
	}
}
