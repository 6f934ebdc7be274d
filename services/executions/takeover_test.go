package executions_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/grants"
	"github.com/toolwarden/toolwarden/services/secrets"
)

const takeoverA, takeoverB = "a1a1a1a1-a1a1-41a1-81a1-a1a1a1a1a1a1", "b2b2b2b2-b2b2-42b2-82b2-b2b2b2b2b2b2"

// blockingWaiters counts the statements waiting for a blocking step's count lock.
const blockingWaiters = `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
	AND wait_event_type = 'Lock' AND query LIKE '%executions.blocking.lock%'`

// frozen is an execution of three steps (echo, a question, echo) whose runner A, a
// replica, ran step 1 and is parked before step 2: a step waiting for a person takes
// its requester's count lock as it starts, and the test holds that lock. A's lock's
// session is then ended, as PostgreSQL ends a frozen host's after its keepalives, and
// A's heartbeats are taken to have stopped: another replica may take it over.
type frozen struct {
	e       *env
	ex      *executions.Execution
	logs    *testkit.SyncBuffer // runner A's log
	release func()              // A (and whoever else waits at step 2) goes on
}

func freezeBeforeStep2(t *testing.T) *frozen {
	t.Helper()
	e := startBuiltin(t)
	e.server("mt", true, "echo")
	e.enable(collaborate)
	conn, err := e.pool.Acquire(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Release)
	const key = `hashtextextended('executions.blocking:' || $1 || ':' || $2, 0)`
	testkit.Exec(t, conn, `SELECT pg_advisory_lock(`+key+`)`, e.admin.Actor.ID, collaborate)
	released := false
	f := &frozen{e: e, logs: &testkit.SyncBuffer{}}
	f.release = func() {
		if !released {
			released = true
			testkit.Exec(t, conn, `SELECT pg_advisory_unlock(`+key+`)`, e.admin.Actor.ID, collaborate)
		}
	}
	t.Cleanup(f.release)

	e.run(e.loggedSweeper(takeoverA, func(string) bool { return true }, f.logs))
	f.ex = e.create(e.admin, step("mt__echo", `{"message":"one"}`), step(collaborate, `{"prompt":"Go on with step 3?"}`),
		step("mt__echo", `{"message":"three"}`))
	if f.ex.Status != executions.Executing {
		if f.ex, err = e.svc.Confirm(e.ctx, e.admin, f.ex.ID, "", ""); err != nil {
			t.Fatal(err)
		}
	}
	testkit.WaitFor(t, 30*time.Second, func() bool { return e.count(blockingWaiters) == 1 }, "runner A never reached step 2")
	if st := e.steps(f.ex.ID); st[0].Status != executions.StepSucceeded || st[1].Status != executions.StepPending {
		t.Fatalf("runner A before step 2: steps %s %s, want succeeded, pending", st[0].Status, st[1].Status)
	}
	const held = `FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND ((classid::bigint << 32) | objid::bigint) = hashtextextended($1, 7)`
	if n := e.count(`SELECT count(*) FROM (SELECT pg_terminate_backend(pid) `+held+`) t`, f.ex.ID); n != 1 {
		t.Fatalf("terminated %d holders of the execution's lock, want runner A's one", n)
	}
	testkit.WaitFor(t, 10*time.Second, func() bool { return e.count(`SELECT count(*) `+held, f.ex.ID) == 0 },
		"runner A's lock outlived its connection")
	return f
}

// loggedSweeper is sweeper with the service's log written to w.
func (e *env) loggedSweeper(id string, alive func(string) bool, w *testkit.SyncBuffer) *executions.Service {
	e.t.Helper()
	keys, err := secrets.NewKeyring(e.key)
	if err != nil {
		e.t.Fatal(err)
	}
	svc, err := executions.New(e.pool, e.r, e.tools, &executions.Options{Now: e.clock.Now, Workers: 4, Keys: keys,
		Local: e.app.Local, Runner: "replica-" + id[:8], RunnerID: id, SweepEvery: 50 * time.Millisecond,
		Logger:      slog.New(slog.NewTextHandler(w, nil)),
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

// answerStep2 answers the question step 2 asks and checks the plan then succeeds, its
// steps run in order, and nothing was interrupted.
func (f *frozen) answerStep2(t *testing.T) {
	t.Helper()
	e := f.e
	var asked []grants.Collaboration
	testkit.WaitFor(t, 30*time.Second, func() bool {
		list, err := e.app.Grants.Collaborations(e.ctx, e.admin.Actor.ID, grants.StatusPending)
		if err != nil {
			t.Fatal(err)
		}
		asked = list
		return len(list) == 1
	}, "step 2 never asked")
	time.Sleep(time.Second) // whoever runs step 2 waits for its answer: nothing starts step 3 meanwhile
	if st := e.steps(f.ex.ID); st[1].Status != executions.StepRunning || st[2].Status != executions.StepPending {
		t.Fatalf("while step 2 waits for its answer: steps %s %s %s, want succeeded, running, pending (a runner skipped ahead)",
			st[0].Status, st[1].Status, st[2].Status)
	}
	if _, err := e.app.Grants.Respond(e.ctx, e.admin.Actor, asked[0].ID, "go ahead"); err != nil {
		t.Fatal(err)
	}
	got := e.waitStatus(f.ex.ID, executions.Success, 30*time.Second)
	st := e.steps(f.ex.ID)
	if st[2].Status != executions.StepSucceeded || st[2].StartedAt.Before(*st[1].FinishedAt) {
		t.Fatalf("step 3: %s, started %v, step 2 finished %v; want succeeded, after step 2", st[2].Status, st[2].StartedAt, st[1].FinishedAt)
	}
	if n := e.audits(f.ex.ID, "execution.interrupted"); n != 0 {
		t.Errorf("execution.interrupted audit rows: %d, want none (%s %q)", n, got.Status, got.Error)
	}
}

// A runner that lost its lock between steps, and whose execution another replica took
// over and is about to run step 2 of, starts no further step when it resumes: it stops,
// and the runner that took over runs the rest, in order.
func TestTakenOverRunnerStartsNoFurtherStep(t *testing.T) {
	f := freezeBeforeStep2(t)
	e := f.e
	e.run(e.sweeper(takeoverB, func(id string) bool { return id != takeoverA }))
	testkit.WaitFor(t, 30*time.Second, func() bool {
		return e.count(blockingWaiters) == 2 && e.count(`SELECT count(*) FROM executions WHERE id = $1 AND runner_id = $2`, f.ex.ID, takeoverB) == 1
	}, "runner B never took over up to step 2")
	f.release() // A resumes, and so does B
	f.answerStep2(t)
	if got := e.get(f.ex.ID); got.Runner != "replica-b2b2b2b2" {
		t.Errorf("runner %q, want replica-b2b2b2b2", got.Runner)
	}
}

// A step starts only while its runner is the execution's recorded one: a runner that
// lost its lock and resumes once another replica's sweep queued the execution again
// (its runner forgotten), before any runner picked it up, starts nothing either (it
// stops, saying so). The step it would have started runs once, by the next runner.
func TestForgottenRunnerStartsNoStep(t *testing.T) {
	f := freezeBeforeStep2(t)
	e := f.e
	e.sweeper(takeoverB, func(id string) bool { return id != takeoverA }) // sweeps, runs nothing
	testkit.WaitFor(t, 30*time.Second, func() bool {
		return e.count(`SELECT count(*) FROM executions WHERE id = $1 AND runner_id IS NULL`, f.ex.ID) == 1
	}, "runner B's sweep never queued the execution again")
	f.release() // A resumes
	testkit.WaitFor(t, 30*time.Second, func() bool { return strings.Contains(f.logs.String(), "took this execution over") },
		"runner A never stopped before step 2")
	// The queued job is anyone's now: this process's own workers may pick it up at once
	// (a new run, which records itself first), or the next runner does. Step 2 is asked
	// once, and the plan ends in order (answerStep2).
	e.run(e.sweeper("c3c3c3c3-c3c3-43c3-83c3-c3c3c3c3c3c3", func(id string) bool { return id != takeoverA }))
	f.answerStep2(t)
}
