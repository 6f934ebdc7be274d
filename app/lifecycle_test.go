package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app"
	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/replicas"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/secrets"
	"github.com/toolwarden/toolwarden/services/system"
)

// goroutines counts the goroutines whose stack names any of funcs.
func goroutines(funcs ...string) int {
	buf := make([]byte, 16<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		for _, f := range funcs {
			if strings.Contains(g, f) {
				n++
				break
			}
		}
	}
	return n
}

// settlesAt waits (up to 5 s) until goroutines(funcs...) is at most want, and fails
// saying how many were left.
func settlesAt(t *testing.T, want int, what string, funcs ...string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for goroutines(funcs...) > want && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond) // goroutines end in their own time; nothing to wait on
	}
	if n := goroutines(funcs...); n > want {
		t.Errorf("%s: %d goroutines of %v left, want at most %d", what, n, funcs, want)
	}
}

// What waits for the event bus, and what the built-in server runs.
var (
	followers = []string{"services/auth.(*Service).Follow"}
	builtins  = []string{"services/builtin.(*Server).KeepSnapshotsPruned", "services/builtin.(*Terminals)"}
)

// An App built and never started (or whose start failed before its bus listened)
// leaves nothing running once stopped: the token cache's catch-up waited for the bus
// in a goroutine of New's, holding the auth service and its pool for the life of the
// process. Not parallel: it counts goroutines.
func TestAppNotStartedLeavesNoGoroutine(t *testing.T) {
	before := goroutines(followers...)
	for range 3 {
		t.Run("app", func(t *testing.T) { apptest.Start(t, &apptest.Options{Builtin: true, NoStart: true}) })
	}
	settlesAt(t, before, "after three Apps built, not started, and stopped", followers...)
}

// A New that fails after the built-in server was built closes it: its terminals and
// snapshot pruning ran on for every serve that refused to start. Not parallel: it
// counts goroutines.
func TestFailedNewLeavesNoGoroutine(t *testing.T) {
	url := dbtest.NewURL(t)
	pool, err := db.NewPool(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	key, err := secrets.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	keys, err := secrets.NewKeyring(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.pub")
	if err := os.WriteFile(bad, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	all := append(append([]string(nil), followers...), builtins...)
	before := goroutines(all...)
	for range 3 {
		_, err := app.New(context.Background(), app.Config{Pool: pool, Keys: keys, BuiltinRoot: t.TempDir(),
			Checkpoints: app.CheckpointConfig{Dir: dir, KeyFile: filepath.Join(dir, "k"), PublicKey: bad, Every: time.Hour}})
		if err == nil {
			t.Fatal("New with a public key file that holds none: no error")
		}
	}
	settlesAt(t, before, "after three failed News", all...)
}

// The built-in tools' snapshots are pruned from Start on, not from New: nothing runs
// until Start (docs/architecture.md), and a serve that then refuses to start prunes
// nothing. Not parallel: it counts goroutines.
func TestSnapshotsPrunedFromStart(t *testing.T) {
	pruner := "services/builtin.(*Server).KeepSnapshotsPruned"
	before := goroutines(pruner)
	a := apptest.Start(t, &apptest.Options{Builtin: true, NoStart: true})
	if n := goroutines(pruner); n != before {
		t.Errorf("built, not started: %d pruners more, want none", n-before)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := goroutines(pruner); n != before+1 {
		t.Errorf("started: %d pruners more, want one", n-before)
	}
	a.Stop()
	settlesAt(t, before, "stopped", pruner)
}

// Stopping the App lets go of the test panel's runs: an ended run was kept (result and
// all) by its ten-minute timer, a running one by its idle timer with the router and
// its pool, after the App stopped; a run started after is not kept.
func TestStopLetsGoOfTestRuns(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, nil)
	a.LiveServer(t, "mt", true, "echo", "sleep")
	for _, q := range []string{"mt__echo", "mt__sleep"} {
		a.Settled(t, q)
	}
	runs := a.TestRuns()
	start := func(tool, args string) *router.Run {
		return runs.Start(router.Call{Tool: tool, Arguments: json.RawMessage(args), Actor: audit.Actor{Kind: audit.ActorUser, Name: "alice"},
			Role: auth.RoleAdmin, Source: router.SourceTestPanel, Approval: router.Approval{Confirmed: true, Phrase: tool}}, "tool-id")
	}
	ended := start("mt__echo", `{"message":"kept"}`)
	if !ended.Wait(30 * time.Second) {
		t.Fatal("the echo run did not end")
	}
	long := start("mt__sleep", `{"ms":600000}`)
	if _, ok := runs.Lookup(ended.ID); !ok {
		t.Fatal("the ended run is not kept while the App runs")
	}
	a.Stop()
	if !long.Wait(10 * time.Second) {
		t.Error("the running run did not end with the App")
	}
	for name, run := range map[string]*router.Run{"ended": ended, "running": long} {
		if _, ok := runs.Lookup(run.ID); ok {
			t.Errorf("the %s run is still kept after Stop", name)
		}
	}
	late := start("mt__echo", `{"message":"late"}`)
	if !late.Wait(10 * time.Second) {
		t.Fatal("a run started after Stop did not end")
	}
	if _, ok := runs.Lookup(late.ID); ok {
		t.Error("a run started after Stop is kept")
	}
}

// /healthz says when this replica's heartbeats stop reaching the database while its
// other connections work: the other replicas then take it for stopped.
func TestHealthReportsTheHeartbeat(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, &apptest.Options{Config: func(c *app.Config) {
		c.Replica = replicas.Options{Every: 100 * time.Millisecond, DeadAfter: 300 * time.Millisecond}
	}})
	heartbeat := func() system.Component { return a.Health()["replica_heartbeat"] }
	testkit.WaitFor(t, 10*time.Second, func() bool { return heartbeat().Status == system.Up }, "the heartbeat is never reported up")
	// Up for a while: past the start's grace, still up.
	time.Sleep(time.Second) // what is tested is that nothing changes meanwhile
	if c := heartbeat(); c.Status != system.Up {
		t.Fatalf("beating: %+v, want up", c)
	}
	a.StopBeats()
	testkit.WaitFor(t, 10*time.Second, func() bool { return heartbeat().Status == system.Down }, "beats that fail are never reported down")
	if c := heartbeat(); !strings.Contains(c.Problem, "heartbeats are not reaching the database") {
		t.Errorf("problem: %q", c.Problem)
	}
}

// A component marked Restart that panics is logged with its stack, reported down on
// /healthz, and runs again after a pause; serve goes on.
func TestPanickedComponentRunsAgain(t *testing.T) {
	app.RestartAfter(t, 200*time.Millisecond)
	a := apptest.Start(t, &apptest.Options{NoStart: true})
	runs := make(chan int, 10)
	n := 0
	a.AddComponent(app.Component{Name: "crash-once", Restart: true, Run: func(ctx context.Context) error {
		n++
		runs <- n
		if n == 1 {
			time.Sleep(50 * time.Millisecond) // running a moment, then failing: what is tested
			panic(errors.New("a bug in one pass"))
		}
		<-ctx.Done()
		return nil
	}})
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-runs
	testkit.WaitFor(t, 5*time.Second, func() bool { return a.Health()["crash_once"].Status == system.Down },
		"the component that panicked is not reported down")
	if c := a.Health()["crash_once"]; !strings.Contains(c.Problem, "runs again") {
		t.Errorf("down: %+v", c)
	}
	select {
	case <-runs:
	case <-time.After(5 * time.Second):
		t.Fatal("the component did not run again")
	}
	testkit.WaitFor(t, 5*time.Second, func() bool {
		c := a.Health()["crash_once"]
		return c.Status == system.Up && c.Restarts != nil && *c.Restarts == 1
	}, "the component running again is not reported up, restarted once")
	logs := a.Logs.String()
	if !strings.Contains(logs, "component panicked") || !strings.Contains(logs, "a bug in one pass") || !strings.Contains(logs, "lifecycle_test.go") {
		t.Errorf("the panic and its stack are not logged:\n%s", logs)
	}
	a.Stop()
}
