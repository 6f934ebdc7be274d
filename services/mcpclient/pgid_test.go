package mcpclient

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/template"
)

// TestGroupKilledBeforeReap: a stdio server's process group is killed, when the server
// ends, while the server is still an unreaped zombie: once it is reaped (and its group
// empty), its id can name an unrelated process's group. What it left in its group is
// still killed.
func TestGroupKilledBeforeReap(t *testing.T) {
	// Not parallel: it sets a package hook.
	var mu sync.Mutex
	var states []string
	groupKillHook = func(pid int) {
		mu.Lock()
		defer mu.Unlock()
		states = append(states, procState(pid))
	}
	t.Cleanup(func() { groupKillHook = nil })

	pidFile := filepath.Join(t.TempDir(), "sleep.pid")
	lim, _ := testLimit(1 << 20)
	// The server starts a background sleep in its group, then reads stdin to its end.
	c := registry.Connection{Type: registry.TypeStdio, Command: "sh",
		Args: []string{"-c", `sleep 60 >/dev/null 2>&1 & echo $! > "$0"; exec cat >/dev/null`, pidFile}}
	ep, err := newEndpoint(c, map[string]string{"PATH": "/usr/bin:/bin"}, nil, newLineBuffer(10, 100), lim, template.Options{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := ep.transport.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var sleepPID int
	testkit.WaitFor(t, 10*time.Second, func() bool {
		b, err := os.ReadFile(pidFile)
		sleepPID, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && sleepPID > 0
	}, "no pid in "+pidFile)
	// As session.close does: the session's Close (which ends and reaps the server), then cleanup.
	_ = conn.Close()
	ep.cleanup()
	if ep.cmd.ProcessState == nil {
		t.Fatal("the server was not reaped")
	}
	mu.Lock()
	got := states
	mu.Unlock()
	t.Logf("the group was killed with the server in states %v", got)
	if len(got) == 0 || slices.Contains(got, "reaped") {
		t.Fatalf("the server's group was killed with the server in states %v, want only before it was reaped", got)
	}
	testkit.WaitFor(t, 5*time.Second, func() bool { return stateOf(sleepPID) == "" || stateOf(sleepPID) == "Z" }, fmt.Sprintf("the background sleep (pid %d) outlived its server", sleepPID))
}

// stateOf is the state of process pid (R, S, Z, ...), or "" if there is none.
func stateOf(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+2:])[0]
}

// procState is the state of process pid (R, S, Z, ...) if it is a child of ours, or
// "reaped".
func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "reaped"
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // state, ppid, ...
	if ppid, _ := strconv.Atoi(f[1]); ppid != os.Getpid() {
		return "reaped" // and its pid reused
	}
	return f[0]
}
