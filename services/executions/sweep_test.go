package executions_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/secrets"
)

// sweeper is a service as a replica's: it records its runner id, and Watch sweeps
// every 50 ms; alive says which runner ids it sees alive.
func (e *env) sweeper(id string, alive func(string) bool) *executions.Service {
	e.t.Helper()
	keys, err := secrets.NewKeyring(e.key)
	if err != nil {
		e.t.Fatal(err)
	}
	svc, err := executions.New(e.pool, e.r, e.tools, &executions.Options{Now: e.clock.Now, Workers: 4, Keys: keys,
		Local: e.app.Local, Runner: "replica-" + id[:8], RunnerID: id, SweepEvery: 50 * time.Millisecond,
		RunnerAlive: func(_ context.Context, runner string) bool { return alive(runner) }})
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Watch(ctx) }()
	e.t.Cleanup(func() { cancel(); <-done })
	return svc
}

// A runner whose lock's connection broke (a database restart, a failover) goes on: the
// sweep of its own process (which knows it holds the execution), of another replica
// that sees it alive, and the recovery of a replica starting then leave it alone, and its step's result is recorded. A replica that
// is not seen alive is taken for dead, as after a SIGKILL (cmd/toolwarden's
// TestThreeReplicas): its running step ends interrupted, and when its runner finishes
// after all, what was recorded stands.
func TestSweepLeavesALiveRunnerAlone(t *testing.T) {
	e := start(t)
	e.server("mt", true, "sleep")
	const runnerID, otherID = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"
	var dead atomic.Bool
	runner := e.sweeper(runnerID, func(string) bool { return true })
	e.sweeper(otherID, func(id string) bool { return id != runnerID || !dead.Load() })
	e.run(runner)

	breakLock := func(ex *executions.Execution) {
		t.Helper()
		testkit.WaitFor(t, 20*time.Second, func() bool {
			st := e.steps(ex.ID)
			return len(st) == 1 && st[0].Status == executions.StepRunning
		}, "the step never started")
		// The execution's own lock (a bigint key: high half in classid, low in objid);
		// other advisory locks (the audit journal's) come and go meanwhile.
		if n := e.count(`SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_locks
			WHERE locktype = 'advisory' AND granted AND objsubid = 1
			  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
			  AND ((classid::bigint << 32) | objid::bigint) = hashtextextended($1, 7)) t`, ex.ID); n != 1 {
			t.Fatalf("terminated %d holders of the execution's lock, want the runner's one", n)
		}
	}

	ex := e.create(e.admin, step("mt__sleep", `{"ms":1500}`))
	breakLock(ex)
	// A replica that starts now (a rolling deploy) leaves it alone too.
	e.sweeper("33333333-3333-4333-8333-333333333333", func(string) bool { return true }).Recover(context.Background())
	got := e.waitStatus(ex.ID, executions.Success, 30*time.Second)
	if st := e.steps(ex.ID); st[0].Status != executions.StepSucceeded || got.Runner != "replica-11111111" {
		t.Fatalf("after its lock's connection broke: step %s, runner %q; want succeeded on replica-11111111", st[0].Status, got.Runner)
	}

	dead.Store(true)
	ex = e.create(e.admin, step("mt__sleep", `{"ms":1500}`))
	breakLock(ex)
	got = e.waitStatus(ex.ID, executions.Failed, 30*time.Second)
	time.Sleep(2 * time.Second) // the runner's sleep ends: its result must not overwrite the record
	if st := e.steps(ex.ID); st[0].Status != executions.StepInterrupted {
		t.Fatalf("a runner not seen alive: step %s after it finished, want interrupted to stand (%s)", st[0].Status, got.Error)
	}
}

// An execution its live runner no longer works (its run job is gone: the last attempt
// could not fail it, the database being down then) is queued again by the sweep and
// runs, though the sweep leaves a live runner's executions alone otherwise.
func TestSweepQueuesWhatALiveRunnerDropped(t *testing.T) {
	e := start(t)
	e.server("mt", true, "echo")
	const runnerID = "44444444-4444-4444-8444-444444444444"
	ex := e.create(e.admin, step("mt__echo", `{"message":"one"}`))
	if _, err := e.pool.Exec(e.ctx, `UPDATE executions SET status = 'executing', runner = 'replica-44444444', runner_id = $2
		WHERE id = $1`, ex.ID, runnerID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(e.ctx, `DELETE FROM river_job WHERE args->>'execution_id' = $1::text`, ex.ID); err != nil {
		t.Fatal(err)
	}
	// Another replica, which leaves it to the sweep at start.
	e.run(e.sweeper("55555555-5555-4555-8555-555555555555", func(string) bool { return true }))
	e.waitStatus(ex.ID, executions.Success, 30*time.Second)
}
