package mcpclient_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/confine"
	"github.com/toolwarden/toolwarden/internal/everything"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/registry"
)

func token(t testing.TB) string {
	t.Helper()
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// attack is one thing a stdio server gone bad tries.
type attack struct {
	name string
	argv []string
	// broke says whether it got through. Confined, none may; unconfined, those marked
	// contrast must, or the confined check would prove nothing.
	broke    func(mcptest.RunOut) bool
	contrast bool
}

// TestConfinedServerAttack: a stdio server whose tool runs whatever it is told (an npm
// package gone bad) tries to read the secret key and the data dir, reach the database
// through its socket, read Toolwarden's and other processes' environment and command
// line, undo or add mounts, read a raw disk and change kernel settings. Confined,
// everything fails; the same server unconfined gets through, so the checks are real.
func TestConfinedServerAttack(t *testing.T) {
	t.Parallel()
	secret := "secret-" + token(t)
	// Laid out as serve's data dir, plus a --secret-key-file kept elsewhere.
	dataDir := dbtest.TempDir(t)
	for _, d := range []string{"checkpoints", "workspaces"} {
		if err := os.Mkdir(filepath.Join(dataDir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	keyFile := filepath.Join(dataDir, "secret.key")
	elsewhere := filepath.Join(t.TempDir(), "toolwarden.key")
	for _, f := range []string{keyFile, elsewhere, filepath.Join(dataDir, "checkpoints", "head.json")} {
		if err := os.WriteFile(f, []byte(secret), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A process holding secrets in its environment and command line, as Toolwarden
	// (DATABASE_URL, --admin-password) and PostgreSQL do.
	canaryEnv, canaryArg := "canary-env-"+token(t), "canary-arg-"+token(t)
	startCanary(t, canaryEnv, canaryArg)
	// The test cluster's socket, what DATABASE_URL points at.
	socket := dbtest.Cluster(t).URLFor("postgres")
	psql := findPsql(t)
	me := strconv.Itoa(os.Getpid())
	mnt := t.TempDir()
	server := mcptest.Options{Name: "rogue", RunCommands: true}
	_, _, serverEnv := mcptest.StdioCommand(&server, "")

	attacks := []attack{
		{"read the secret key", []string{"cat", keyFile}, has(secret), true},
		{"list the data dir", []string{"ls", "-A", dataDir}, has("secret.key"), true},
		{"read a checkpoint", []string{"cat", filepath.Join(dataDir, "checkpoints", "head.json")}, has(secret), true},
		{"read the key file kept elsewhere", []string{"cat", elsewhere}, has(secret), true},
		{"connect to the database", []string{psql, socket, "-Atc", "select 'db-' || 'reached'"}, has("db-reached"), true},
		{"read every /proc/*/environ", []string{"sh", "-c", "cat /proc/[0-9]*/environ"}, has(canaryEnv), true},
		{"read every /proc/*/cmdline", []string{"sh", "-c", "cat /proc/[0-9]*/cmdline"}, has(canaryArg), true},
		{"read Toolwarden's command line", []string{"cat", "/proc/" + me + "/cmdline"}, ran, true},
		{"signal Toolwarden", []string{"sh", "-c", "kill -0 " + me}, ran, true},
		{"read /proc/1/environ", []string{"cat", "/proc/1/environ"}, foreignEnv(serverEnv), false},
		{"unmount the hidden data dir", []string{"umount", dataDir}, refusedUnless("superuser", "permission denied"), false},
		{"unmount it from a user namespace of its own", []string{"unshare", "-Um", "sh", "-c", "umount -l " + dataDir + "; cat " + keyFile}, has(secret), false},
		// Undoes itself where it succeeds: a run without confinement (to see this test
		// fail) must leave the machine as it was.
		{"mount something", []string{"sh", "-c", "mount -t tmpfs none " + mnt + " && umount " + mnt}, refusedUnless("superuser", "permission denied"), false},
		{"write /proc/sys/kernel/core_pattern", []string{"sh", "-c", "cat /proc/sys/kernel/core_pattern > /proc/sys/kernel/core_pattern"}, refusedUnless("Read-only file system"), false},
	}
	if os.Geteuid() == 0 {
		// Only root reads disks and holds capabilities to lose; as another user the
		// host's file permissions already refuse both.
		if dev := blockDevice(t); dev != "" {
			attacks = append(attacks, attack{"read a block device", []string{"head", "-c", "1", dev}, ran, true})
		}
		attacks = append(attacks, attack{"keep capabilities", []string{"grep", "-E", "^Cap(Inh|Prm|Eff|Bnd|Amb):", "/proc/self/status"}, capsLeft, true})
	}

	for _, confined := range []bool{true, false} {
		opts := fast()
		opts.Confine = confine.Spec{Hide: []string{dataDir, elsewhere}, Off: !confined}
		e := start(t, opts)
		how := e.mgr.Confinement()
		switch {
		case confined && (strings.HasPrefix(how, "none") || !strings.Contains(how, dataDir) || !strings.Contains(how, elsewhere)):
			t.Fatalf("confinement: got %q, want namespaces hiding %s and %s on this machine (docs/security.md)", how, dataDir, elsewhere)
		case !confined && how != "none: turned off; clean environment":
			t.Fatalf("confinement off: got %q", how)
		}
		spec, _ := stdioSpec(t, "rogue", &server)
		sv := e.create(t, spec)
		e.waitStatus(t, sv.ID, registry.StatusConnected)
		cs, err := e.mgr.Session(sv.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range attacks {
			if !confined && !a.contrast {
				continue
			}
			got := runTool(t, cs, a.argv)
			switch {
			case confined && a.broke(got):
				t.Errorf("confined, %s: got through (exit %d):\n%s", a.name, got.ExitCode, got.Output)
			case !confined && !a.broke(got):
				t.Errorf("unconfined, %s should get through, or the confined check proves nothing (exit %d):\n%s",
					a.name, got.ExitCode, got.Output)
			}
		}
	}
}

// runTool asks the rogue server to run argv.
func runTool(t *testing.T, cs *mcp.ClientSession, argv []string) mcptest.RunOut {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run", Arguments: map[string]any{"argv": argv}})
	if err != nil || res.IsError {
		t.Fatalf("run %v: got %+v, %v", argv, res, err)
	}
	var out mcptest.RunOut
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("run %v: structured content %s: %v", argv, b, err)
	}
	return out
}

func has(s string) func(mcptest.RunOut) bool {
	return func(r mcptest.RunOut) bool { return strings.Contains(r.Output, s) }
}

func ran(r mcptest.RunOut) bool { return r.ExitCode == 0 }

// refusedUnless counts a command as through unless it failed for one of the reasons
// given: failing for another one (a typo, a missing file) would prove nothing.
func refusedUnless(reasons ...string) func(mcptest.RunOut) bool {
	return func(r mcptest.RunOut) bool {
		return r.ExitCode == 0 || !slices.ContainsFunc(reasons, func(s string) bool { return strings.Contains(r.Output, s) })
	}
}

// foreignEnv reports an environment holding anything but the clean environment
// (PATH, HOME, the locale) and the server's own configured variables.
func foreignEnv(own map[string]string) func(mcptest.RunOut) bool {
	allowed := map[string]bool{"PATH": true, "HOME": true, "LANG": true, "LC_ALL": true, "LC_CTYPE": true}
	for k := range own {
		allowed[k] = true
	}
	return func(r mcptest.RunOut) bool {
		for _, kv := range strings.Split(r.Output, "\x00") {
			if k, _, ok := strings.Cut(kv, "="); ok && !allowed[k] {
				return true
			}
		}
		return false
	}
}

// capsLeft reports whether any of the five capability sets grep printed is not empty.
func capsLeft(r mcptest.RunOut) bool {
	sc := bufio.NewScanner(strings.NewReader(r.Output))
	n := 0
	for sc.Scan() {
		_, v, _ := strings.Cut(sc.Text(), ":")
		n++
		if strings.Trim(strings.TrimSpace(v), "0") != "" {
			return true
		}
	}
	return n != 5
}

// startCanary starts a process with a secret in its environment and one in its
// command line, for as long as the test runs.
func startCanary(t *testing.T, env, arg string) {
	t.Helper()
	cmd := exec.Command("sh", "-c", "sleep 600; :", arg)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "TOOLWARDEN_CANARY=" + env}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
}

// findPsql returns the PostgreSQL client of the binaries the test cluster runs.
func findPsql(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("psql"); err == nil {
		return p
	}
	dir, err := db.FindBinDir()
	if err == nil {
		if p := filepath.Join(dir, "psql"); isFile(p) {
			return p
		}
	}
	t.Fatal("psql not found: it comes with the PostgreSQL packages the tests need")
	return ""
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// blockDevice returns a block device of /dev, or "" if there is none.
func blockDevice(t *testing.T) string {
	t.Helper()
	ents, err := os.ReadDir("/dev")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Type()&fs.ModeDevice != 0 && e.Type()&fs.ModeCharDevice == 0 {
			return filepath.Join("/dev", e.Name())
		}
	}
	return ""
}

// TestReferenceServersConfined: the npm reference servers run confined exactly as they
// run unconfined: server-everything answers; server-filesystem, started through npx,
// reads and writes the directory it was given (outside the data dir) and its files are
// on the real filesystem; server-memory writes its file where it always does, next to
// its own code in node_modules.
func TestReferenceServersConfined(t *testing.T) {
	t.Parallel()
	dataDir := dbtest.TempDir(t)
	e := start(t, &mcpclient.Options{BackoffInitial: 50 * time.Millisecond, BackoffMax: 300 * time.Millisecond,
		Debounce: 150 * time.Millisecond, BreakerFailures: 50, BreakerCooldown: time.Second,
		Confine: confine.Spec{Hide: []string{dataDir}}})
	if how := e.mgr.Confinement(); strings.HasPrefix(how, "none") {
		t.Fatalf("confinement: got %q, want namespaces on this machine (docs/security.md)", how)
	}
	root := everything.Root(t)

	t.Run("everything", func(t *testing.T) {
		t.Parallel()
		cmd, args := everything.StdioCommand(t)
		cs := e.connectStdio(t, registry.Spec{Name: "everything", Command: cmd, Args: args})
		if got := callText(t, cs, "echo", map[string]any{"message": "confined"}); !strings.Contains(got, "confined") {
			t.Fatalf("echo: got %q", got)
		}
	})

	t.Run("filesystem", func(t *testing.T) {
		t.Parallel()
		everything.ReferenceEntry(t, "server-filesystem")
		dirs := []string{t.TempDir()}
		if os.Geteuid() == 0 {
			// Under a tree that is read-only for a confined root: a directory the admin
			// gives the server stays writable, wherever it is.
			d, err := os.MkdirTemp("/var/spool", "toolwarden-fs-test-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.RemoveAll(d) })
			dirs = append(dirs, d)
		}
		for _, d := range dirs {
			if err := os.WriteFile(filepath.Join(d, "from-host.txt"), []byte("written outside"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cs := e.connectStdio(t, registry.Spec{Name: "filesystem", Command: "npx",
			Args: append([]string{"--no", "mcp-server-filesystem"}, dirs...), WorkingDir: root})
		for _, d := range dirs {
			note := "note " + token(t)
			file := filepath.Join(d, "note.txt")
			if got := callText(t, cs, "write_file", map[string]any{"path": file, "content": note}); !strings.Contains(got, "Successfully wrote") {
				t.Fatalf("write_file in %s: got %q", d, got)
			}
			if b, err := os.ReadFile(file); err != nil || string(b) != note {
				t.Fatalf("%s on the real filesystem: got %q (%v), want %q", file, b, err, note)
			}
			if got := callText(t, cs, "read_text_file", map[string]any{"path": filepath.Join(d, "from-host.txt")}); got != "written outside" {
				t.Fatalf("read_text_file: got %q", got)
			}
			if got := callText(t, cs, "list_directory", map[string]any{"path": d}); !strings.Contains(got, "note.txt") || !strings.Contains(got, "from-host.txt") {
				t.Fatalf("list_directory: got %q", got)
			}
		}
	})

	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		entry := everything.ReferenceEntry(t, "server-memory")
		file := filepath.Join(filepath.Dir(entry), "memory.jsonl") // its default, next to its code
		before, err := os.ReadFile(file)
		existed := err == nil
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if existed {
				_ = os.WriteFile(file, before, 0o644)
			} else {
				_ = os.Remove(file)
			}
		})
		cs := e.connectStdio(t, registry.Spec{Name: "memory", Command: "node", Args: []string{entry}})
		name := "toolwarden-confine-" + token(t)
		callText(t, cs, "create_entities", map[string]any{"entities": []map[string]any{
			{"name": name, "entityType": "test", "observations": []string{"written while confined"}}}})
		if b, err := os.ReadFile(file); err != nil || !strings.Contains(string(b), name) {
			t.Fatalf("%s on the real filesystem: got %q (%v), want the new entity", file, b, err)
		}
		if got := callText(t, cs, "open_nodes", map[string]any{"names": []string{name}}); !strings.Contains(got, "written while confined") {
			t.Fatalf("open_nodes: got %q", got)
		}
	})
}

// connectStdio registers and enables a stdio server and returns its live session.
func (e *env) connectStdio(t *testing.T, sp registry.Spec) *mcp.ClientSession {
	t.Helper()
	sp.Type, sp.Enabled = registry.TypeStdio, true
	sv := e.create(t, sp)
	got := e.waitStatus(t, sv.ID, registry.StatusConnected)
	cs, err := e.mgr.Session(got.ID)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// callText calls a tool and returns its text; a tool error fails the test.
func callText(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var texts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			texts = append(texts, tc.Text)
		}
	}
	text := strings.Join(texts, "\n")
	if res.IsError {
		t.Fatalf("%s: tool error: %s", name, text)
	}
	return text
}
