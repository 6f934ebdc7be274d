package template

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// TestGroupKilledBeforeReap: when a command ends, its process group is killed while the
// command is still an unreaped zombie: once it is reaped (and its group empty), its id
// can name an unrelated process's group.
func TestGroupKilledBeforeReap(t *testing.T) {
	// Not parallel: it sets a package hook.
	var mu sync.Mutex
	var states []string
	groupKillHook = func(pid int) {
		mu.Lock()
		defer mu.Unlock()
		// A child of ours that is not reaped still has its /proc entry, with us as parent.
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			states = append(states, "reaped")
			return
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // state, ppid, ...
		if ppid, _ := strconv.Atoi(f[1]); ppid != os.Getpid() {
			states = append(states, "reaped (pid reused)")
			return
		}
		states = append(states, f[0])
	}
	t.Cleanup(func() { groupKillHook = nil })
	tpl, err := Parse(`tools:
  - name: leave
    command: {argv: [sh, -c, "sleep 60 >/dev/null 2>&1 & echo $!"]}
`)
	if err != nil {
		t.Fatal(err)
	}
	res, _ := Call(context.Background(), tpl, Options{Env: []string{"PATH=/usr/bin:/bin"}}, "leave", nil)
	if _, err := strconv.Atoi(strings.TrimSpace(res.Text)); err != nil || res.IsError {
		t.Fatalf("got %+v", res)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(states) != 1 || states[0] != "Z" {
		t.Fatalf("the group was killed with its leader in state %v, want [Z] (exited, not reaped)", states)
	}
}
