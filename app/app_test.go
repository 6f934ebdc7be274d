package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app"
	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

func TestMain(m *testing.M) {
	mcptest.Main()
	dbtest.Main(m)
}

// The components start in dependency order, are ready when Start returns, and stop in
// reverse; a second Stop does nothing.
func TestStartStop(t *testing.T) {
	a := apptest.Start(t, nil)
	var names []string
	for _, c := range a.Components() {
		names = append(names, c.Name)
	}
	want := []string{"bus", "replicas", "router", "mcp", "executions", "jobs", "prune", "rollup", "audit-search", "disabled-users"}
	if len(names) != len(want) {
		t.Fatalf("components %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("components %v, want %v", names, want)
		}
	}
	select {
	case <-a.Bus.Ready():
	default:
		t.Error("the bus is not ready after Start")
	}
	if !a.MCP.Running() || !a.Router.Running() {
		t.Errorf("after Start: sessions running %v, router running %v", a.MCP.Running(), a.Router.Running())
	}
	// The replica's row is there while it runs, and gone once it stopped.
	ctx := context.Background()
	testkit.WaitFor(t, 10*time.Second, func() bool {
		live, err := a.Replicas.Live(ctx)
		return err == nil && len(live) == 1 && live[0].Self && live[0].Name == a.Replicas.Name()
	}, "the running app is not among the live replicas")
	a.Stop()
	if a.MCP.Running() || a.Router.Running() {
		t.Errorf("after Stop: sessions running %v, router running %v", a.MCP.Running(), a.Router.Running())
	}
	if live, err := a.Replicas.Live(ctx); err != nil || len(live) != 0 {
		t.Errorf("after Stop the live replicas are %v (%v), want none", live, err)
	}
	a.Stop()
}

// A Once component is a periodic job of the shared queue (scheduled by River's leader,
// so one replica runs it), run on start.
func TestOnceComponentsAreJobs(t *testing.T) {
	a := apptest.Start(t, nil)
	for _, c := range a.Components() {
		if c.Name == "prune" && (c.Scope != app.Once || c.Job == nil || c.Run != nil) {
			t.Errorf("prune: scope %v, job %v, run %v; want a Once job", c.Scope, c.Job != nil, c.Run != nil)
		}
	}
	testkit.WaitFor(t, 30*time.Second, func() bool {
		return a.Count(t, `SELECT count(*) FROM river_job WHERE kind = 'app.once' AND args->>'component' = 'prune' AND state = 'completed'`) > 0
	}, "the prune job never completed")
	if n := a.Count(t, `SELECT count(*) FROM river_job WHERE kind = 'app.once' AND state IN ('retryable', 'discarded', 'cancelled')`); n != 0 {
		t.Errorf("%d periodic jobs failed", n)
	}
}

// Skipped components do not run: without the job queue no job is worked.
func TestSkip(t *testing.T) {
	a := apptest.Start(t, &apptest.Options{Config: func(c *app.Config) { c.Skip = []string{"jobs"} }})
	if !a.Router.Running() {
		t.Fatal("the router does not run")
	}
	time.Sleep(300 * time.Millisecond)
	if n := a.Count(t, `SELECT count(*) FROM river_job WHERE state = 'completed'`); n != 0 {
		t.Errorf("%d jobs completed with the queue skipped", n)
	}
}
