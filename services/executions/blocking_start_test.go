package executions_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/grants"
)

const collaborate = "builtin__user_collaboration"

// approvedQuestion creates and approves a plan of one user_collaboration step.
func (e *env) approvedQuestion(prompt string) *executions.Execution {
	e.t.Helper()
	ex := e.create(e.admin, step(collaborate, `{"prompt":"`+prompt+`"}`))
	if ex.Status != executions.Executing {
		var err error
		if ex, err = e.svc.Confirm(e.ctx, e.admin, ex.ID, "", ""); err != nil {
			e.t.Fatal(err)
		}
	}
	return ex
}

// answerAndFinish works execution id's run job until its question is asked, answers
// it, and checks the plan succeeds.
func (e *env) answerAndFinish(id string) {
	e.t.Helper()
	done := make(chan error, 1)
	go func() { done <- executions.WorkRun(e.ctx, e.svc, id, 2, 25) }()
	var asked []grants.Collaboration
	testkit.WaitFor(e.t, 30*time.Second, func() bool {
		list, err := e.app.Grants.Collaborations(e.ctx, e.admin.Actor.ID, grants.StatusPending)
		if err != nil {
			e.t.Fatal(err)
		}
		asked = list
		return len(list) == 1
	}, "the step never asked")
	if _, err := e.app.Grants.Respond(e.ctx, e.admin.Actor, asked[0].ID, "go ahead"); err != nil {
		e.t.Fatal(err)
	}
	if err := <-done; err != nil {
		e.t.Fatal(err)
	}
	if got := e.get(id); got.Status != executions.Success {
		e.t.Fatalf("after the answer: %s %q, want success", got.Status, got.Error)
	}
	if n := e.audits(id, "execution.interrupted"); n != 0 {
		e.t.Errorf("execution.interrupted audit rows: %d, want none", n)
	}
}

// A step waiting for a person is counted against its requester's limit before it is
// marked running, in the transaction that marks it: the job stopped while it is counted
// (here, waiting for the count's lock) leaves it pending, not running with no call sent
// (which the retried job would settle interrupted, "may have taken effect"), and the
// retried job runs it.
func TestBlockingStepStaysPendingWhenItsStartFails(t *testing.T) {
	t.Parallel()
	e := startBuiltin(t)
	e.enable(collaborate)
	ex := e.approvedQuestion("Deploy to staging now?")

	// Another of the requester's steps of that tool starting holds the count's lock.
	conn, err := e.pool.Acquire(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	const key = `hashtextextended('executions.blocking:' || $1 || ':' || $2, 0)`
	testkit.Exec(t, conn, `SELECT pg_advisory_lock(`+key+`)`, e.admin.Actor.ID, collaborate)

	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- executions.WorkRun(ctx, e.svc, ex.ID, 1, 25) }()
	testkit.WaitForLockWait(t, e.pool, "executions.blocking.lock")
	cancel() // the job's context ends, as at a stop
	if err := <-done; err == nil {
		t.Fatal("the cancelled job ended without an error, want it retried")
	}
	got, sts := e.get(ex.ID), e.steps(ex.ID)
	if got.Status != executions.Executing || sts[0].Status != executions.StepPending || sts[0].StartedAt != nil || sts[0].CallID != nil {
		t.Fatalf("after the stopped job: %s, step %s (started %v, call %v); want executing, the step pending, never started",
			got.Status, sts[0].Status, sts[0].StartedAt, sts[0].CallID)
	}

	testkit.Exec(t, conn, `SELECT pg_advisory_unlock(`+key+`)`, e.admin.Actor.ID, collaborate)
	e.answerAndFinish(ex.ID)
}

// With maxBlockingSteps of the requester's steps waiting for an answer, another waits,
// pending and never started (its job snoozed); once one of them ends, it runs.
func TestBlockingStepsOverTheLimitWait(t *testing.T) {
	t.Parallel()
	e := startBuiltin(t)
	e.enable(collaborate)
	for _, prompt := range []string{"first?", "second?"} {
		other := e.approvedQuestion(prompt)
		testkit.Exec(t, e.pool, `UPDATE tool_calls SET status = 'running', started_at = now() WHERE execution_id = $1`, other.ID)
	}
	ex := e.approvedQuestion("third?")
	err := executions.WorkRun(e.ctx, e.svc, ex.ID, 1, 25)
	if snooze := (*river.JobSnoozeError)(nil); !errors.As(err, &snooze) {
		t.Fatalf("the third step's job: %v, want it snoozed", err)
	}
	got, sts := e.get(ex.ID), e.steps(ex.ID)
	if got.Status != executions.Executing || sts[0].Status != executions.StepPending || sts[0].StartedAt != nil || sts[0].CallID != nil {
		t.Fatalf("over the limit: %s, step %s (started %v, call %v); want executing, the step pending, never started",
			got.Status, sts[0].Status, sts[0].StartedAt, sts[0].CallID)
	}

	testkit.Exec(t, e.pool, `UPDATE tool_calls SET status = 'succeeded', finished_at = now()
		WHERE status = 'running' AND execution_id <> $1 AND arguments->>'prompt' = 'second?'`, ex.ID)
	e.answerAndFinish(ex.ID)
}
