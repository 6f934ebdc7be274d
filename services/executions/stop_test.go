package executions_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/grants"
)

// A stop that outlasts its grace cancels the job of a step still running (River's
// StopAndCancel): the step ends interrupted, as after a crash, not failed with "the
// caller cancelled the call"; the execution fails saying so, and its rollback names the
// step as one that may have taken effect.
func TestStopInterruptsARunningStep(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "echo", "sleep")
	runner := e.replica("abababab-abab-4aba-8aba-abababababab", func(string) bool { return true })
	ex := e.create(e.admin, step("mt__echo", `{"message":"one"}`), step("mt__sleep", `{"ms":600000}`),
		step("mt__echo", `{"message":"three"}`))

	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- executions.WorkRun(ctx, runner, ex.ID, 1, 25) }()
	// The second step's call is under way: running, and its audit row durable (the
	// router writes it just before the server sees the call).
	testkit.WaitFor(t, 30*time.Second, func() bool {
		sts := e.steps(ex.ID)
		return slices.Equal(stepStatuses(sts), []string{"succeeded", "running", "pending"}) && sts[1].CallID != nil &&
			e.count(`SELECT count(*) FROM audit_log WHERE action = 'tool.call' AND payload->>'call_id' = $1`, *sts[1].CallID) == 1
	}, "the second step never ran")
	cancel() // the job's context ends, as River's StopAndCancel ends it
	if err := <-done; err != nil {
		t.Fatalf("the cancelled job: %v, want it done (the step settled)", err)
	}

	got := e.get(ex.ID)
	sts := e.steps(ex.ID)
	if got.Status != executions.Failed || !strings.Contains(got.Error, "interrupted: Toolwarden (replica replica-abababab) stopped while step 2 ran") {
		t.Errorf("execution: %s %q, want failed, step 2 interrupted", got.Status, got.Error)
	}
	if s := stepStatuses(sts); !slices.Equal(s, []string{"succeeded", "interrupted", "skipped"}) {
		t.Fatalf("steps: got %v, want succeeded, interrupted, skipped (error %q)", s, sts[1].Error)
	}
	if !strings.Contains(sts[1].Error, "may or may not have taken effect") || sts[1].FinishedAt == nil {
		t.Errorf("step 2: error %q, finished %v", sts[1].Error, sts[1].FinishedAt)
	}
	if n := e.count(`SELECT count(*) FROM audit_log WHERE target_id = $1 AND action = 'execution.interrupted' AND actor_kind = 'system'`, ex.ID); n != 1 {
		t.Errorf("interruption audit rows: got %d, want 1", n)
	}
	_, rp, err := e.svc.PlanRollback(e.ctx, ex.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(rp.Missing, func(m string) bool { return strings.Contains(m, "step 2 (mt__sleep), interrupted") }) {
		t.Errorf("the rollback plan does not name the interrupted step: %q", rp.Missing)
	}
}

// A question asked by a step whose replica died is cancelled when the sweep settles the
// step interrupted: answering it then is refused (with authorize_operation, a yes
// would otherwise grant something for a plan that already failed). The same holds for
// the step of a cancelled execution.
func TestSweepCancelsTheQuestionOfAnInterruptedStep(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "echo")
	const deadID = "cdcdcdcd-cdcd-4cdc-8cdc-cdcdcdcdcdcd"
	// As a replica that died leaves them: the step running, its question pending.
	ask := func(status string) (*executions.Execution, string) {
		ex := e.create(e.admin, step("mt__echo", `{"message":"one"}`), step("mt__echo", `{"message":"two"}`))
		callID := uuid.NewString()
		testkit.Exec(t, e.pool, `UPDATE executions SET status = $2, runner = 'replica-cdcdcdcd', runner_id = $3 WHERE id = $1`,
			ex.ID, status, deadID)
		testkit.Exec(t, e.pool, `UPDATE tool_calls SET status = 'running', started_at = now(), call_id = $2
			WHERE execution_id = $1 AND position = 0`, ex.ID, callID)
		var q string
		if err := e.pool.QueryRow(e.ctx, `INSERT INTO collaborations (user_id, user_name, conversation_id, call_id, execution_id,
			source, prompt, authorize_operation, target, heartbeat_at) VALUES ($1, 'boss', 'conv', $2, $3, 'execution',
			'may I delete it?', 'delete', '/tmp/x', now()) RETURNING id::text`, e.admin.Actor.ID, callID, ex.ID).Scan(&q); err != nil {
			t.Fatal(err)
		}
		return ex, q
	}
	failed, q1 := ask("executing")
	cancelled, q2 := ask("cancelled")
	e.sweeper("efefefef-efef-4efe-8efe-efefefefefef", func(id string) bool { return id != deadID })
	e.waitStatus(failed.ID, executions.Failed, 30*time.Second)
	testkit.WaitFor(t, 30*time.Second, func() bool { return e.steps(cancelled.ID)[0].Status == executions.StepInterrupted },
		"the cancelled execution's step was never settled")

	for _, q := range []string{q1, q2} {
		c, err := e.app.Grants.GetCollaboration(e.ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if c.Status != grants.StatusCancelled {
			t.Errorf("question %s: %s after its step was interrupted, want cancelled", q, c.Status)
		}
		if _, err := e.app.Grants.Respond(e.ctx, e.admin.Actor, q, "yes"); !errors.Is(err, grants.ErrNotPending) {
			t.Errorf("answering question %s: %v, want it refused as no longer waiting", q, err)
		}
		if n := e.count(`SELECT count(*) FROM audit_log WHERE target_id = $1 AND action = 'collaboration.cancel' AND actor_kind = 'system'`, q); n != 1 {
			t.Errorf("question %s: %d cancel audit rows, want 1", q, n)
		}
		if n := e.count(`SELECT count(*) FROM grants`); n != 0 {
			t.Errorf("%d grants made, want none", n)
		}
	}
	e.flush()
	if n := e.count(`SELECT count(*) FROM events WHERE topic = $1 AND kind = 'collaboration.ended' AND payload->>'status' = 'cancelled'
		AND payload->>'id' = ANY($2)`, grants.UserTopic(e.admin.Actor.ID), []string{q1, q2}); n != 2 {
		t.Errorf("collaboration.ended events saying cancelled: got %d, want 2 (the pages waiting for an answer update)", n)
	}
}

// A step waiting for a person's answer when the runner stops took no effect: it is
// pending again and handed over (its question withdrawn), and the next runner asks
// again; answered, the plan succeeds.
func TestStopHandsOverAWaitingStep(t *testing.T) {
	t.Parallel()
	e := startBuiltin(t)
	e.enable("builtin__user_collaboration")
	runner := e.replica("12121212-1212-4121-8121-121212121212", func(string) bool { return true })
	w := e.askWaiting(runner, `{"prompt":"Deploy to staging now?"}`)
	ex, pending, done, first := w.ex, w.pending, w.done, w.q
	w.cancel()
	if err := <-done; err != nil {
		t.Fatalf("the cancelled job: %v, want it done (the step handed over)", err)
	}
	if got, sts := e.get(ex.ID), e.steps(ex.ID); got.Status != executions.Executing || sts[0].Status != executions.StepPending {
		t.Fatalf("after the stop: %s, step %s (%q); want executing, the step pending again", got.Status, sts[0].Status, sts[0].Error)
	}
	if c, err := e.app.Grants.GetCollaboration(e.ctx, first.ID); err != nil || c.Status != grants.StatusCancelled {
		t.Fatalf("the first question: %v %+v, want cancelled", err, c)
	}

	e.run(nil)
	testkit.WaitFor(t, 30*time.Second, func() bool { return len(pending()) == 1 }, "the next runner never asked again")
	if _, err := e.app.Grants.Respond(e.ctx, e.admin.Actor, pending()[0].ID, "go ahead"); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(ex.ID, executions.Success, 30*time.Second)
}

// waiting is a plan whose one step, a question to the person, a runner is waiting on.
type waiting struct {
	ex      *executions.Execution
	q       grants.Collaboration          // the question asked
	pending func() []grants.Collaboration // the person's questions waiting now
	cancel  context.CancelFunc            // stops the runner (its job past its grace)
	done    <-chan error                  // the runner's end
}

// askWaiting plans a builtin__user_collaboration step with args, approves it and runs
// it on runner until it asks the admin.
func (e *env) askWaiting(runner *executions.Service, args string) waiting {
	e.t.Helper()
	ex := e.create(e.admin, step("builtin__user_collaboration", args))
	if ex.Status != executions.Executing {
		if _, err := e.svc.Confirm(e.ctx, e.admin, ex.ID, "", ""); err != nil {
			e.t.Fatal(err)
		}
	}
	pending := func() []grants.Collaboration {
		list, err := e.app.Grants.Collaborations(e.ctx, e.admin.Actor.ID, grants.StatusPending)
		if err != nil {
			e.t.Fatal(err)
		}
		return list
	}
	ctx, cancel := context.WithCancel(e.ctx)
	e.t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- executions.WorkRun(ctx, runner, ex.ID, 1, 25) }()
	testkit.WaitFor(e.t, 30*time.Second, func() bool { return len(pending()) == 1 }, "the step never asked")
	return waiting{ex: ex, q: pending()[0], pending: pending, cancel: cancel, done: done}
}
