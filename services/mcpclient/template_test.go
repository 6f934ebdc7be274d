package mcpclient_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/confine"
	"github.com/toolwarden/toolwarden/internal/proctrack"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/registry"
)

// A template server's commands run as a stdio server does: confined, away from the
// data dir, with the clean environment. The same template unconfined reads the secret,
// so the check is real.
func TestTemplateCommandsConfined(t *testing.T) {
	t.Parallel()
	secret := "secret-" + token(t)
	dataDir := dbtest.TempDir(t)
	keyFile := filepath.Join(dataDir, "secret.key")
	if err := os.WriteFile(keyFile, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	yaml := `tools:
  - name: read
    input_schema: {type: object, properties: {path: {type: string}}}
    command: {argv: [cat, --, "{path}"]}
  - name: env
    command: {argv: [env]}
`
	for _, confined := range []bool{true, false} {
		opts := fast()
		opts.Confine = confine.Spec{Hide: []string{dataDir}, Off: !confined}
		e := start(t, opts)
		if confined && strings.HasPrefix(e.mgr.Confinement(), "none") {
			t.Fatalf("confinement: got %q, want namespaces on this machine", e.mgr.Confinement())
		}
		sv := e.create(t, registry.Spec{Name: "tpl", Type: registry.TypeTemplate, Template: yaml, Enabled: true})
		e.waitStatus(t, sv.ID, registry.StatusConnected)
		cs, err := e.mgr.Session(sv.ID)
		if err != nil {
			t.Fatal(err)
		}
		out := toolText(t, cs, "read", map[string]any{"path": keyFile})
		switch {
		case confined && strings.Contains(out, secret):
			t.Errorf("confined, a template command read the secret key: %q", out)
		case !confined && !strings.Contains(out, secret):
			t.Errorf("unconfined, the command should read the key, or the confined check proves nothing: %q", out)
		}
		for _, kv := range strings.Split(strings.TrimSpace(toolText(t, cs, "env", nil)), "\n") {
			if k, _, _ := strings.Cut(kv, "="); !map[string]bool{"PATH": true, "HOME": true, "LANG": true, "LC_ALL": true, "LC_CTYPE": true}[k] {
				t.Errorf("a template command got %s from Toolwarden's environment", k)
			}
		}
	}
}

// A command still running when its server's session ends (the server is disabled, its
// template changed, Toolwarden stops) is killed with everything it started.
func TestTemplateSessionEndKillsCommands(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	// A sleep no other process runs: found by its command line, inside or outside a
	// PID namespace.
	marker := fmt.Sprintf("61.%d", time.Now().UnixNano()%1_000_000_000)
	yaml := fmt.Sprintf("tools:\n  - name: wait\n    command: {argv: [sh, -c, \"sleep %s & wait\"], timeout: 2m}\n", marker)
	sv := e.create(t, registry.Spec{Name: "tpl", Type: registry.TypeTemplate, Template: yaml, Enabled: true, TimeoutMS: 120_000})
	e.waitStatus(t, sv.ID, registry.StatusConnected)
	cs, err := e.mgr.Session(sv.ID)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "wait"})
	}()
	testkit.WaitFor(t, 20*time.Second, func() bool { return sleeping(marker) }, "the command never started")
	off := false
	if _, err := e.reg.UpdateServer(context.Background(), audit.System, sv.ID, registry.Patch{Enabled: &off}); err != nil {
		t.Fatal(err)
	}
	e.mgr.Refresh(context.Background(), sv.ID)
	// Well before the sleep would end by itself.
	testkit.WaitFor(t, 20*time.Second, func() bool { return !sleeping(marker) }, "the command outlived its session")
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the call never returned")
	}
}

// Unconfined (no PID namespace ends what a command leaves), a command's process that
// left its group (setsid, as ssh -f does) carries the run's marker, with the run
// recorded in ProcessDir for the next start after a crash, and is killed when
// Toolwarden stops.
func TestTemplateEscapeeKilledAtStop(t *testing.T) {
	t.Parallel()
	opts := fast()
	opts.Confine = confine.Spec{Off: true}
	opts.ProcessDir = t.TempDir()
	e := start(t, opts)
	marker := fmt.Sprintf("300.%d", time.Now().UnixNano()%1_000_000_000)
	// setsid -f: the escapee prints its pid once it is in its own session, so the kill
	// of the command's group when it ends cannot catch it still inside.
	yaml := fmt.Sprintf("tools:\n  - name: escape\n    command: {argv: [sh, -c, \"pid=$(setsid -f sh -c 'echo $$; exec sleep %s >/dev/null 2>&1'); echo $pid\"]}\n", marker)
	sv := e.create(t, registry.Spec{Name: "tpl", Type: registry.TypeTemplate, Template: yaml, Enabled: true})
	e.waitStatus(t, sv.ID, registry.StatusConnected)
	cs, err := e.mgr.Session(sv.ID)
	if err != nil {
		t.Fatal(err)
	}
	out := toolText(t, cs, "escape", nil)
	pid, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("the command printed %q, want the escaped pid", out)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	testkit.WaitFor(t, 20*time.Second, func() bool { return sleeping(marker) }, "the escaped sleep never ran")
	runs, _ := filepath.Glob(filepath.Join(opts.ProcessDir, "run-of-*.json"))
	if len(runs) != 1 {
		t.Fatalf("run records in ProcessDir: got %v, want this run's", runs)
	}
	run := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(runs[0]), "run-of-"), ".json")
	if !proctrack.Marked(pid, mcpclient.ServerMarkerEnv, run) {
		t.Fatalf("the escaped process %d does not carry %s=%s: a start after a crash could not find it", pid, mcpclient.ServerMarkerEnv, run)
	}
	e.stop()
	testkit.WaitFor(t, 20*time.Second, func() bool { return !sleeping(marker) }, "the command's escaped process outlived Toolwarden's stop")
}

// toolText calls a tool and returns its text, error result or not.
func toolText(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res.Content[0].(*mcp.TextContent).Text
}

// sleeping reports whether a live (not zombie) "sleep <marker>" runs.
func sleeping(marker string) bool {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		cmd, err := os.ReadFile(d + "/cmdline")
		if err != nil || string(cmd) != "sleep\x00"+marker+"\x00" {
			continue
		}
		stat, err := os.ReadFile(d + "/stat")
		if err != nil {
			continue
		}
		s := string(stat)
		if i := strings.LastIndexByte(s, ')'); i > 0 && len(s) > i+2 && s[i+2] != 'Z' && s[i+2] != 'X' {
			return true
		}
	}
	return false
}
