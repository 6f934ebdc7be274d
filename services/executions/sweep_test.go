package executions_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/secrets"
	"github.com/toolwarden/toolwarden/services/tools"
)

// sweeper is a service as a replica's: it records its runner id, and Watch sweeps
// every 50 ms; alive says which runner ids it sees alive.
func (e *env) sweeper(id string, alive func(string) bool) *executions.Service {
	e.t.Helper()
	svc := e.replica(id, alive)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Watch(ctx) }()
	e.t.Cleanup(func() { cancel(); <-done })
	return svc
}

// replica is sweeper without the sweep (its runner and Watch not started).
func (e *env) replica(id string, alive func(string) bool) *executions.Service {
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

	ex := e.create(e.admin, step("mt__sleep", `{"ms":1500}`))
	e.breakLock(ex)
	// A replica that starts now (a rolling deploy) leaves it alone too.
	e.sweeper("33333333-3333-4333-8333-333333333333", func(string) bool { return true }).Recover(context.Background())
	got := e.waitStatus(ex.ID, executions.Success, 30*time.Second)
	if st := e.steps(ex.ID); st[0].Status != executions.StepSucceeded || got.Runner != "replica-11111111" {
		t.Fatalf("after its lock's connection broke: step %s, runner %q; want succeeded on replica-11111111", st[0].Status, got.Runner)
	}

	dead.Store(true)
	ex = e.create(e.admin, step("mt__sleep", `{"ms":1500}`))
	e.breakLock(ex)
	got = e.waitStatus(ex.ID, executions.Failed, 30*time.Second)
	time.Sleep(2 * time.Second) // the runner's sleep ends: its result must not overwrite the record
	if st := e.steps(ex.ID); st[0].Status != executions.StepInterrupted {
		t.Fatalf("a runner not seen alive: step %s after it finished, want interrupted to stand (%s)", st[0].Status, got.Error)
	}
}

// breakLock waits for the one step of ex to run, and ends the connection its runner
// holds the execution's lock on (as a database restart does), the runner going on.
func (e *env) breakLock(ex *executions.Execution) {
	e.t.Helper()
	testkit.WaitFor(e.t, 20*time.Second, func() bool {
		st := e.steps(ex.ID)
		return len(st) == 1 && st[0].Status == executions.StepRunning
	}, "the step never started")
	// The execution's own lock (a bigint key: high half in classid, low in objid);
	// other advisory locks (the audit journal's) come and go meanwhile.
	const held = `FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND ((classid::bigint << 32) | objid::bigint) = hashtextextended($1, 7)`
	if n := e.count(`SELECT count(*) FROM (SELECT pg_terminate_backend(pid) `+held+`) t`, ex.ID); n != 1 {
		e.t.Fatalf("terminated %d holders of the execution's lock, want the runner's one", n)
	}
	// The backend ends, and the lock goes with it, a moment after it is told to.
	testkit.WaitFor(e.t, 10*time.Second, func() bool { return e.count(`SELECT count(*) `+held, ex.ID) == 0 },
		"the runner's lock outlived its connection")
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

// The seal proves what was approved, not just what was planned: an execution made to
// look started by a write to its status column alone (a HIGH plan still awaiting its
// phrase, or a rejected one with its steps set pending again) is queued by the sweep
// like any dropped one, but its runner refuses it as altered and runs no step.
func TestSweepRefusesAnUnapprovedExecution(t *testing.T) {
	e := start(t)
	e.server("mt", true, "echo")
	e.setRisk("mt__echo", risk.High)
	alice := e.user("alice", auth.RoleToolUser)
	awaiting := e.create(alice, step("mt__echo", `{"message":"never approved"}`))
	rejected := e.create(alice, step("mt__echo", `{"message":"rejected"}`))
	if _, err := e.svc.Reject(e.ctx, e.admin, rejected.ID, "no"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{awaiting.ID, rejected.ID} {
		if got := e.get(id); len(got.ApprovedHash) != 0 {
			t.Fatalf("%s: an approval hash before any approval", got.Status)
		}
		testkit.Exec(t, e.pool, `UPDATE tool_calls SET status = 'pending' WHERE execution_id = $1`, id)
		testkit.Exec(t, e.pool, `UPDATE executions SET status = 'executing' WHERE id = $1`, id)
	}
	e.run(e.sweeper("abababab-abab-4bab-8bab-abababababab", func(string) bool { return true }))
	for _, id := range []string{awaiting.ID, rejected.ID} {
		got := e.waitStatus(id, executions.Failed, 30*time.Second)
		if !strings.Contains(got.Error, "never approved") {
			t.Errorf("error: got %q, want it to say the plan was never approved", got.Error)
		}
		if st := e.steps(id); st[0].Status != executions.StepSkipped {
			t.Errorf("its step: got %s, want skipped", st[0].Status)
		}
		e.wantAudits(id, map[string]int{"execution.plan_hash_mismatch": 1})
	}
}

// An execution whose run job a replica has picked up, but whose lock that replica has
// not taken yet (no runner recorded), is being worked: a sweep on another replica
// queues no second job for it (which could later take the lock, should the first
// runner's lock's connection break, and settle its live step). One with no job at all
// is queued again, and tells when a sweep went past the first.
func TestSweepLeavesAPickedUpJob(t *testing.T) {
	e := start(t)
	e.server("mt", true, "echo")
	executing := func(message string) string {
		t.Helper()
		ex := e.create(e.admin, step("mt__echo", `{"message":"`+message+`"}`))
		testkit.Exec(t, e.pool, `UPDATE executions SET status = 'executing', runner = '', runner_id = NULL WHERE id = $1`, ex.ID)
		return ex.ID
	}
	jobs := func(id, state string) int {
		return e.count(`SELECT count(*) FROM river_job WHERE kind = 'execution.run' AND args->>'execution_id' = $1::text
			AND state::text LIKE $2`, id, state)
	}
	picked := executing("picked up")
	// River marks a job it picks up running, and counts the attempt.
	testkit.Exec(t, e.pool, `UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now(),
		attempted_by = ARRAY['replica-a'] WHERE kind = 'execution.run' AND args->>'execution_id' = $1::text`, picked)
	if n := jobs(picked, "running"); n != 1 {
		t.Fatalf("%d run jobs running, want 1", n)
	}
	dropped := executing("dropped")
	testkit.Exec(t, e.pool, `DELETE FROM river_job WHERE args->>'execution_id' = $1::text`, dropped)

	e.sweeper("66666666-6666-4666-8666-666666666666", func(string) bool { return true })
	testkit.WaitFor(t, 20*time.Second, func() bool { return jobs(dropped, "%") == 1 },
		"the sweep never queued the execution that had no job")
	if n := jobs(picked, "%"); n != 1 {
		t.Fatalf("the execution whose job was picked up has %d run jobs after a sweep, want its one", n)
	}
}

// A run job that finds a step running whose runner (another replica) is seen alive
// leaves it to that runner, though it got the lock (the runner's lock's connection
// broke: a database restart): it looks again later, and the step and runner stand.
func TestRunLeavesALiveRunnersStep(t *testing.T) {
	e := start(t)
	e.server("mt", true, "echo")
	const runnerID, otherID = "77777777-7777-4777-8777-777777777777", "88888888-8888-4888-8888-888888888888"
	var alive atomic.Bool
	alive.Store(true)
	other := e.replica(otherID, func(id string) bool { return id != runnerID || alive.Load() })
	ex := e.create(e.admin, step("mt__echo", `{"message":"one"}`))
	testkit.Exec(t, e.pool, `UPDATE executions SET status = 'executing', runner = 'replica-77777777', runner_id = $2 WHERE id = $1`,
		ex.ID, runnerID)
	testkit.Exec(t, e.pool, `UPDATE tool_calls SET status = 'running', started_at = now() WHERE execution_id = $1 AND position = 0`, ex.ID)

	var snooze *rivertype.JobSnoozeError
	if err := executions.WorkRun(e.ctx, other, ex.ID, 1, 25); !errors.As(err, &snooze) {
		t.Fatalf("a job on another replica: %v; want it snoozed", err)
	}
	got := e.get(ex.ID)
	if st := e.steps(ex.ID); got.Status != executions.Executing || st[0].Status != executions.StepRunning || got.Runner != "replica-77777777" {
		t.Fatalf("after a job on another replica: %s, step %s, runner %q; want executing, running on replica-77777777",
			got.Status, st[0].Status, got.Runner)
	}
	// Its runner no longer seen alive: the step ends interrupted, as after a SIGKILL.
	alive.Store(false)
	if err := executions.WorkRun(e.ctx, other, ex.ID, 2, 25); err != nil {
		t.Fatal(err)
	}
	if got, st := e.get(ex.ID), e.steps(ex.ID); got.Status != executions.Failed || st[0].Status != executions.StepInterrupted {
		t.Fatalf("a runner not seen alive: %s, step %s; want failed, interrupted", got.Status, st[0].Status)
	}
}

// A second run job of an execution a runner of the same process works, whose lock's
// connection broke (a database restart), finds it held by this process: it looks again
// later, and the running step is not settled as interrupted under its runner.
func TestRunLeavesThisProcessStep(t *testing.T) {
	e := start(t)
	e.server("mt", true, "sleep")
	runner := e.replica("99999999-9999-4999-8999-999999999999", func(string) bool { return true })
	e.run(runner)
	// Long enough for what follows to happen while the step runs.
	ex := e.create(e.admin, step("mt__sleep", `{"ms":10000}`))
	e.breakLock(ex)
	var snooze *rivertype.JobSnoozeError
	if err := executions.WorkRun(e.ctx, runner, ex.ID, 1, 25); !errors.As(err, &snooze) {
		t.Fatalf("a second job in the runner's process: %v; want it snoozed", err)
	}
	if st := e.steps(ex.ID); st[0].Status != executions.StepRunning {
		t.Fatalf("after a second job in the runner's process: step %s, want running", st[0].Status)
	}
	e.waitStatus(ex.ID, executions.Success, 30*time.Second)
}

// An execution whose run job a replica picked up, but which records no runner long
// after (the replica died before taking the lock: River never rescues a job of no
// timeout), is queued again by the sweep and runs; one picked up a moment ago is left
// to its runner.
func TestSweepQueuesAJobWhosePickerDied(t *testing.T) {
	e := start(t)
	e.server("mt", true, "echo")
	jobs := func(id, state string) int {
		return e.count(`SELECT count(*) FROM river_job WHERE kind = 'execution.run' AND args->>'execution_id' = $1::text
			AND state::text LIKE $2`, id, state)
	}
	picked := func(message, ago string) string {
		t.Helper()
		ex := e.create(e.admin, step("mt__echo", `{"message":"`+message+`"}`))
		testkit.Exec(t, e.pool, `UPDATE executions SET status = 'executing', runner = '', runner_id = NULL WHERE id = $1`, ex.ID)
		testkit.Exec(t, e.pool, `UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now() - $2::interval,
			attempted_by = ARRAY['replica-a'] WHERE kind = 'execution.run' AND args->>'execution_id' = $1::text`, ex.ID, ago)
		e.forgottenBefore(ex.ID, ago)
		return ex.ID
	}
	// Created first, so a sweep that queued the other went past it.
	fresh := picked("just picked up", "1 second")
	died := picked("picked up by a replica that died", "10 minutes")

	svc := e.sweeper("abcdabcd-abcd-4bcd-8bcd-abcdabcdabcd", func(string) bool { return true })
	testkit.WaitFor(t, 20*time.Second, func() bool { return jobs(died, "available") == 1 },
		"the sweep never queued the execution whose job's replica died before recording itself")
	if n := jobs(fresh, "%"); n != 1 {
		t.Fatalf("the execution whose job was just picked up has %d run jobs after a sweep, want its one", n)
	}
	e.run(svc)
	e.waitStatus(died, executions.Success, 30*time.Second)
}

// A rollback asked for after the run phase failed on a replica that is still alive
// (still recorded as the execution's runner), whose job another replica picked up
// and died before recording itself, is queued again by the sweep, the dead replica's
// job row finalized; an execution whose live runner recorded itself long after its
// job was picked up (a long phase, between steps) is left to it.
func TestSweepQueuesARollbackWhosePickerDied(t *testing.T) {
	e := start(t)
	e.server("mt", true, "echo", "fail")
	e.setRisk("mt__fail", risk.Low)
	const runnerID = "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb"
	jobs := func(id, state string) int {
		return e.count(`SELECT count(*) FROM river_job WHERE kind = 'execution.run' AND args->>'execution_id' = $1::text
			AND state::text LIKE $2`, id, state)
	}
	// Created first, so a sweep that queued the other went past it.
	working := e.create(e.admin, step("mt__echo", `{"message":"a long phase"}`))
	testkit.Exec(t, e.pool, `UPDATE executions SET status = 'executing', runner = 'replica-bbbbbbbb', runner_id = $2 WHERE id = $1`,
		working.ID, runnerID)
	testkit.Exec(t, e.pool, `UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now() - interval '10 minutes',
		attempted_by = ARRAY['replica-b'] WHERE kind = 'execution.run' AND args->>'execution_id' = $1::text`, working.ID)

	ex, err := e.svc.Create(e.ctx, e.admin, executions.Input{Plan: &executions.Request{
		Steps:    []executions.RequestStep{step("mt__echo", `{"message":"do"}`), step("mt__fail", `{}`)},
		Rollback: []executions.RequestStep{step("mt__echo", `{"message":"undo"}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	// Replica b runs the run phase, which fails: b stays recorded as its runner.
	runner := e.replica(runnerID, func(string) bool { return true })
	if err := executions.WorkRun(e.ctx, runner, ex.ID, 1, 25); err != nil {
		t.Fatal(err)
	}
	testkit.Exec(t, e.pool, `UPDATE river_job SET state = 'completed', finalized_at = now()
		WHERE kind = 'execution.run' AND args->>'execution_id' = $1::text`, ex.ID)
	if got := e.get(ex.ID); got.Status != executions.Failed || got.Runner != "replica-bbbbbbbb" {
		t.Fatalf("after its run phase: %s on %q, want failed on replica-bbbbbbbb", got.Status, got.Runner)
	}
	if _, err := e.svc.Rollback(e.ctx, e.admin, ex.ID, executions.RollbackDecision{}); err != nil {
		t.Fatal(err)
	}
	// Replica d picks the rollback's job up and dies before it records itself.
	testkit.Exec(t, e.pool, `UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now() - interval '10 minutes',
		attempted_by = ARRAY['replica-d'] WHERE kind = 'execution.run' AND args->>'execution_id' = $1::text AND state = 'available'`, ex.ID)
	e.forgottenBefore(ex.ID, "10 minutes")

	svc := e.sweeper("cccccccc-cccc-4ccc-8ccc-cccccccccccc", func(string) bool { return true })
	testkit.WaitFor(t, 20*time.Second, func() bool { return jobs(ex.ID, "available") == 1 },
		"the sweep never queued the rollback whose job's replica died before recording itself (the run phase's runner alive)")
	if n := jobs(ex.ID, "running"); n != 0 {
		t.Fatalf("the dead replica's job is still marked running (%d), want it finalized", n)
	}
	if n, m := jobs(working.ID, "%"), jobs(working.ID, "running"); n != 1 || m != 1 {
		t.Fatalf("the execution its live runner works has %d run jobs (%d running) after a sweep, want its one running", n, m)
	}
	e.run(svc)
	e.waitStatus(ex.ID, executions.RolledBack, 30*time.Second)
}

// A run job snoozed for a rate limit, picked up again by a replica that died before
// recording itself, is queued again by the sweep, though the replica that ran the
// steps before the limit (recorded as runner until then) is alive.
func TestSweepQueuesASnoozedJobWhosePickerDied(t *testing.T) {
	e := start(t)
	e.server("mt", true, "echo")
	n := 1 // a call a minute
	e.update("mt__echo", tools.Patch{RateLimit: &n})
	const runnerID = "dddddddd-dddd-4ddd-8ddd-dddddddddddd"
	runner := e.replica(runnerID, func(string) bool { return true })
	ex := e.create(e.admin, step("mt__echo", `{"message":"one"}`), step("mt__echo", `{"message":"two"}`),
		step("mt__echo", `{"message":"three"}`))
	// Replica b runs the first step; the second waits for the limit, and its job is snoozed.
	var snooze *rivertype.JobSnoozeError
	if err := executions.WorkRun(e.ctx, runner, ex.ID, 1, 25); !errors.As(err, &snooze) {
		t.Fatalf("a job whose second step is refused for the rate limit: %v; want it snoozed", err)
	}
	// River snoozes the job; replica e picks it up later and dies before it records itself.
	testkit.Exec(t, e.pool, `UPDATE river_job SET state = 'running', attempt = 2, attempted_at = now() - interval '10 minutes',
		attempted_by = ARRAY['replica-b', 'replica-e'] WHERE kind = 'execution.run' AND args->>'execution_id' = $1::text`, ex.ID)
	e.forgottenBefore(ex.ID, "10 minutes")
	jobs := func(state string) int {
		return e.count(`SELECT count(*) FROM river_job WHERE kind = 'execution.run' AND args->>'execution_id' = $1::text
			AND state::text = $2`, ex.ID, state)
	}
	e.sweeper("eeeeeeee-eeee-4eee-8eee-eeeeeeeeeeee", func(string) bool { return true })
	testkit.WaitFor(t, 20*time.Second, func() bool { return jobs("available") == 1 },
		"the sweep never queued the snoozed job whose last picker died (its earlier runner alive)")
	if n := jobs("running"); n != 0 {
		t.Fatalf("the dead replica's job is still marked running (%d), want it finalized", n)
	}
}

// A run job whose phase failed with an error River retries (here the database refused
// to start a step) forgets its runner: the retry, picked up by a replica that died
// before recording itself, is queued again by the sweep, though the replica whose
// attempt failed is alive.
func TestSweepQueuesARetriedJobWhosePickerDied(t *testing.T) {
	e := start(t)
	e.server("mt", true, "echo")
	const runnerID = "ffffffff-ffff-4fff-8fff-ffffffffffff"
	runner := e.replica(runnerID, func(string) bool { return true })
	ex := e.create(e.admin, step("mt__echo", `{"message":"one"}`))
	e.failToStart(runner, ex.ID)
	// River retries the job; replica e picks it up and dies before it records itself.
	testkit.Exec(t, e.pool, `UPDATE river_job SET state = 'running', attempt = 2, attempted_at = now() - interval '10 minutes',
		attempted_by = ARRAY['replica-f', 'replica-e'] WHERE kind = 'execution.run' AND args->>'execution_id' = $1::text`, ex.ID)
	e.forgottenBefore(ex.ID, "10 minutes")
	jobs := func(state string) int {
		return e.count(`SELECT count(*) FROM river_job WHERE kind = 'execution.run' AND args->>'execution_id' = $1::text
			AND state::text = $2`, ex.ID, state)
	}
	svc := e.sweeper("eeeeeeee-eeee-4eee-8eee-eeeeeeeeeeee", func(string) bool { return true })
	testkit.WaitFor(t, 20*time.Second, func() bool { return jobs("available") == 1 },
		"the sweep never queued the retried job whose picker died (the replica whose attempt failed alive)")
	if n := jobs("running"); n != 0 {
		t.Fatalf("the dead replica's job is still marked running (%d), want it finalized", n)
	}
	e.run(svc)
	e.waitStatus(ex.ID, executions.Success, 30*time.Second)
}

// forgottenBefore dates the last change of execution id (its runner forgotten, its
// phase queued) just before a pickup faked as made ago: a job is picked up only after
// it was queued, and the sweep leaves one whose runner was just forgotten alone.
func (e *env) forgottenBefore(id, ago string) {
	e.t.Helper()
	testkit.Exec(e.t, e.pool, `UPDATE executions SET updated_at = now() - $2::interval - interval '1 second' WHERE id = $1`, id, ago)
}

// failToStart runs execution id's job on runner while the database refuses to start its
// step ("disk full"): the job fails with the error River retries, its runner forgotten.
func (e *env) failToStart(runner *executions.Service, id string) {
	e.t.Helper()
	testkit.Exec(e.t, e.app.Owner, `CREATE FUNCTION refuse_step() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'disk full'; END $$;
		CREATE TRIGGER refuse_step BEFORE UPDATE ON tool_calls FOR EACH ROW
		WHEN (NEW.status = 'running') EXECUTE FUNCTION refuse_step()`)
	if err := executions.WorkRun(e.ctx, runner, id, 1, 25); err == nil || !strings.Contains(err.Error(), "disk full") {
		e.t.Fatalf("a job whose step the database refuses to start: %v; want the error River retries", err)
	}
	testkit.Exec(e.t, e.app.Owner, `DROP TRIGGER refuse_step ON tool_calls; DROP FUNCTION refuse_step()`)
}
