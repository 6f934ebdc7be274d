package executions_test

import (
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/grants"
)

// An answer committed while the runner stops and hands its waiting step over is not
// lost: the step ends interrupted (the answer may have granted something), not pending
// to be asked again with the grant live. The answer's transaction holds the question's
// row until the hand-over is waiting on it, then commits: the hand-over must read the
// question only once it may no longer change (read before, it saw it pending, and its
// cancel then found nothing to cancel).
func TestStopKeepsAnAnswerGivenDuringTheHandOver(t *testing.T) {
	t.Parallel()
	e := startBuiltin(t)
	e.enable("builtin__user_collaboration")
	runner := e.replica("13131313-1313-4131-8131-131313131313", func(string) bool { return true })
	w := e.askWaiting(runner, `{"prompt":"Delete the old build?","authorize_operation":"run_command","target":"rm -rf /tmp/old-build"}`)
	ex, q, cancel, done := w.ex, w.q, w.cancel, w.done

	// The person answers yes, as grants.RespondAs does, the transaction left open.
	answer, err := e.pool.Begin(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer answer.Rollback(e.ctx) //nolint:errcheck // committed below
	var pid int
	if err := answer.QueryRow(e.ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	testkit.Exec(t, answer, `SELECT 1 FROM collaborations WHERE id = $1 FOR UPDATE`, q.ID)
	conv := q.ConversationID
	if conv == "" {
		conv = "execution"
	}
	g, err := e.app.Grants.CreateTx(e.ctx, answer, grants.Spec{ConversationID: conv, Operation: q.AuthorizeOperation, Target: q.Target,
		TTL: 300 * time.Second, By: audit.Actor{Kind: audit.ActorUser, ID: e.admin.Actor.ID, Name: e.admin.Actor.Name}, CollaborationID: q.ID})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Exec(t, answer, `UPDATE collaborations SET status = 'answered', response = 'yes, proceed', answered_by = 'boss',
		answered_at = now(), grant_id = $2, approved = true WHERE id = $1`, q.ID, g.ID)

	jobs := func() int {
		return e.count(`SELECT count(*) FROM river_job WHERE kind = 'execution.run' AND args->>'execution_id' = $1::text`, ex.ID)
	}
	queued := jobs()
	cancel() // River cancels the job past the stop's grace
	// The hand-over waits on the answer's row lock: the fix's locking look, or (without
	// it) the cancel of the question it took for unanswered.
	testkit.WaitFor(t, 30*time.Second, func() bool {
		return e.count(`SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))
			AND (query LIKE '%executions.step.hand_over%' OR query LIKE '%grants.cancelPending%')`, pid) > 0
	}, "the hand-over never reached the question")
	if err := answer.Commit(e.ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the cancelled job: %v, want it done (the step settled)", err)
	}

	got, sts := e.get(ex.ID), e.steps(ex.ID)
	if got.Status != executions.Failed || sts[0].Status != executions.StepInterrupted {
		t.Fatalf("after the stop: %s, step %s (%q); want failed, the answered step interrupted, not pending to be asked again",
			got.Status, sts[0].Status, sts[0].Error)
	}
	if c, err := e.app.Grants.GetCollaboration(e.ctx, q.ID); err != nil || c.Status != grants.StatusAnswered {
		t.Fatalf("the question: %v %+v, want answered", err, c)
	}
	if n := jobs(); n != queued {
		t.Fatalf("%d run jobs after the stop, want the %d before (none queued to ask again)", n, queued)
	}
}
