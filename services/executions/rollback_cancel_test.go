package executions_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/grants"
	"github.com/toolwarden/toolwarden/services/risk"
)

// A rollback whose undo step waits for a person's answer (user_collaboration) can be
// cancelled by a person who may roll executions back (never an API token): it
// ends rollback_failed (the state machine has no cancelled edge from rolling_back),
// the waiting undo step is stopped within seconds and ends interrupted, its question
// withdrawn, the later undo steps are skipped, and the rollback stays over.
func TestCancelARollbackWaitingForAnAnswer(t *testing.T) {
	t.Parallel()
	e := startBuiltin(t)
	e.enable("builtin__user_collaboration")
	e.server("mt", true, "echo", "fail")
	e.setRisk("mt__fail", risk.Low)
	carol := e.user("carol", auth.RoleAdmin) // an approver, not the requester
	dave := e.user("dave", auth.RoleAuditor) // neither
	e.run(nil)

	one, two := 0, 1
	ex, err := e.svc.Create(e.ctx, e.admin, executions.Input{Plan: &executions.Request{
		Steps: []executions.RequestStep{step("mt__echo", `{"message":"one"}`), step("mt__echo", `{"message":"two"}`),
			step("mt__fail", `{"message":"boom"}`)},
		Rollback: []executions.RequestStep{
			{Tool: "builtin__user_collaboration", Arguments: []byte(`{"prompt":"Undo step two now?"}`), Undoes: &two},
			{Tool: "mt__echo", Arguments: []byte(`{"message":"undo one"}`), Undoes: &one},
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if ex.Status == executions.AwaitingApproval {
		if _, err := e.svc.Confirm(e.ctx, e.admin, ex.ID, ex.ConfirmationPhrase, ""); err != nil {
			t.Fatal(err)
		}
	}
	e.waitStatus(ex.ID, executions.Failed, 30*time.Second)
	_, rp, err := e.svc.PlanRollback(e.ctx, ex.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rp.Problems != nil || len(rp.Steps) != 2 || rp.Steps[0].Tool != "builtin__user_collaboration" {
		t.Fatalf("rollback plan: %+v (problems %v), want the question, then the echo", rp.Steps, rp.Problems)
	}
	if _, err := e.svc.Rollback(e.ctx, e.admin, ex.ID, executions.RollbackDecision{Confirmed: true, Phrase: rp.Phrase, Hash: rp.Hash}); err != nil {
		t.Fatal(err)
	}
	pending := func() []grants.Collaboration {
		list, err := e.app.Grants.Collaborations(e.ctx, e.admin.Actor.ID, grants.StatusPending)
		if err != nil {
			t.Fatal(err)
		}
		return list
	}
	testkit.WaitFor(t, 30*time.Second, func() bool { return len(pending()) == 1 }, "the undo step never asked")
	q := pending()[0]
	if q.ExecutionID != ex.ID {
		t.Fatalf("the question: %+v, want the rollback's of %s", q, ex.ID)
	}

	// Who may not: an approver's API token (another's execution), a non-approver.
	for name, c := range map[string]executions.Caller{"an approver's token": token(carol), "an auditor": dave} {
		if _, err := e.svc.Cancel(e.ctx, c, ex.ID, "no"); !isForbidden(err) {
			t.Errorf("%s cancels another's rollback: %v, want forbidden", name, err)
		}
	}
	if got := e.get(ex.ID); got.Status != executions.RollingBack {
		t.Fatalf("after the refused cancels: %s, want rolling_back", got.Status)
	}

	cancelled := time.Now()
	got, err := e.svc.Cancel(e.ctx, carol, ex.ID, "nobody can answer today")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != executions.RollbackFailed || got.Error != "the rollback was cancelled by carol: nobody can answer today" || got.FinishedAt == nil {
		t.Fatalf("cancelled rollback: %s %q (finished %v), want rollback_failed saying who cancelled it and why", got.Status, got.Error, got.FinishedAt)
	}
	undo := func() []executions.Step {
		var out []executions.Step
		for _, st := range e.steps(ex.ID) {
			if st.Phase == executions.PhaseRollback {
				out = append(out, st)
			}
		}
		return out
	}
	if sts := undo(); sts[1].Status != executions.StepSkipped {
		t.Errorf("the undo step after the waiting one: %s at once, want skipped", sts[1].Status)
	}
	testkit.WaitFor(t, 15*time.Second, func() bool { return undo()[0].Status != executions.StepRunning },
		"the waiting undo step was never stopped")
	if d := time.Since(cancelled); d > 10*time.Second {
		t.Errorf("the waiting undo step stopped %s after the cancel, want within a few seconds", d)
	}
	sts := undo()
	if sts[0].Status != executions.StepInterrupted || sts[1].Status != executions.StepSkipped {
		t.Fatalf("undo steps: %s (%q), %s; want interrupted, skipped", sts[0].Status, sts[0].Error, sts[1].Status)
	}
	if !strings.Contains(sts[0].Error, "the rollback was cancelled") {
		t.Errorf("the interrupted undo step's error: %q", sts[0].Error)
	}
	// Withdrawn by the built-in server's call as it ends, which may come just after the
	// step is recorded interrupted.
	testkit.WaitFor(t, 20*time.Second, func() bool {
		c, err := e.app.Grants.GetCollaboration(e.ctx, q.ID)
		return err == nil && c.Status == grants.StatusCancelled
	}, "the undo step's question withdrawn")
	if _, err := e.app.Grants.Respond(e.ctx, e.admin.Actor, q.ID, "yes"); !errors.Is(err, grants.ErrNotPending) {
		t.Errorf("answering the withdrawn question: %v, want it refused", err)
	}
	if s := stepStatuses(e.steps(ex.ID)); !slices.Equal(s, []string{"succeeded", "succeeded", "failed"}) {
		t.Errorf("run steps after the cancelled rollback: %v, want nothing marked compensated", s)
	}
	if got := e.get(ex.ID); got.Status != executions.RollbackFailed || !strings.Contains(got.Error, "cancelled by carol") {
		t.Errorf("after the runner stopped: %s %q, want the cancel to stand", got.Status, got.Error)
	}
	if n := e.count(`SELECT count(*) FROM audit_log WHERE target_type = 'execution' AND target_id = $1
		AND action = 'execution.rollback_cancel' AND actor_name = 'carol' AND result = 'success'`, ex.ID); n != 1 {
		t.Errorf("rollback cancel audit rows by carol: got %d, want 1", n)
	}
	e.wantAudits(ex.ID, map[string]int{"execution.step_interrupted": 1})
	e.bothTopics(ex.ID, "rollback.failed", 1)

	// Final: no second rollback, no second cancel.
	if _, err := e.svc.Rollback(e.ctx, e.admin, ex.ID, executions.RollbackDecision{Confirmed: true, Phrase: rp.Phrase}); !isConflict(err) {
		t.Errorf("rolling a cancelled rollback back again: %v, want a conflict", err)
	}
	_, err = e.svc.Cancel(e.ctx, e.admin, ex.ID, "")
	conflictIn(t, err, executions.RollbackFailed)
}

// Cancelling a rollback is a decision, as starting one is: the requester's own API
// token, or a requester who may not roll back, is refused; a person who may cancels it,
// and the pending undo steps are skipped at once.
func TestOnlyAPersonCancelsARollback(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "echo")
	alice := e.user("alice", auth.RoleToolUser)
	for _, c := range []executions.Caller{e.admin, alice} {
		ex := e.create(c, step("mt__echo", `{"message":"one"}`), step("mt__echo", `{"message":"two"}`))
		testkit.Exec(t, e.pool, `UPDATE executions SET status = 'rolling_back' WHERE id = $1`, ex.ID)
		testkit.Exec(t, e.pool, `INSERT INTO tool_calls (execution_id, phase, position, tool_id, tool_name, arguments, risk, undoes)
			SELECT execution_id, 'rollback', 1 - position, tool_id, tool_name, arguments, risk, position FROM tool_calls
			WHERE execution_id = $1 AND phase = 'run'`, ex.ID)
		for name, who := range map[string]executions.Caller{"the requester's token": token(c), "the requester": c} {
			if who.Actor.Kind != audit.ActorToken && who.Role.Can(auth.PermExecutionApprove) {
				continue // may: below
			}
			if _, err := e.svc.Cancel(e.ctx, who, ex.ID, ""); !isForbidden(err) {
				t.Errorf("%s (%s) cancels the rollback: %v, want forbidden", name, who.Role, err)
			}
		}
		got, err := e.svc.Cancel(e.ctx, e.admin, ex.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != executions.RollbackFailed || got.Error != "the rollback was cancelled by boss" {
			t.Fatalf("cancelled rollback: %s %q", got.Status, got.Error)
		}
		for _, st := range e.steps(ex.ID) {
			if st.Phase == executions.PhaseRollback && st.Status != executions.StepSkipped {
				t.Errorf("undo step %d: %s, want skipped", st.Position+1, st.Status)
			}
		}
	}
}

// A runner that dies while a step of a cancelled rollback runs leaves nothing running
// for good: the sweep settles the step interrupted (its question withdrawn), and the
// execution stays rollback_failed.
func TestSweepSettlesTheStepOfACancelledRollback(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "echo")
	const deadID = "dededede-dede-4ded-8ded-dededededede"
	ex := e.create(e.admin, step("mt__echo", `{"message":"one"}`))
	callID := uuid.NewString()
	testkit.Exec(t, e.pool, `UPDATE tool_calls SET status = 'succeeded', finished_at = now() WHERE execution_id = $1`, ex.ID)
	testkit.Exec(t, e.pool, `UPDATE executions SET status = 'rollback_failed', error = 'the rollback was cancelled by boss',
		finished_at = now(), runner = 'replica-dededede', runner_id = $2 WHERE id = $1`, ex.ID, deadID)
	testkit.Exec(t, e.pool, `INSERT INTO tool_calls (execution_id, phase, position, tool_id, tool_name, arguments, risk, undoes,
		status, started_at, call_id)
		SELECT execution_id, 'rollback', 0, tool_id, tool_name, arguments, risk, 0, 'running', now(), $2 FROM tool_calls
		WHERE execution_id = $1 AND phase = 'run'`, ex.ID, callID)
	var q string
	if err := e.pool.QueryRow(e.ctx, `INSERT INTO collaborations (user_id, user_name, conversation_id, call_id, execution_id,
		source, prompt, heartbeat_at) VALUES ($1, 'boss', 'conv', $2, $3, 'execution', 'undo it?', now()) RETURNING id::text`,
		e.admin.Actor.ID, callID, ex.ID).Scan(&q); err != nil {
		t.Fatal(err)
	}
	e.sweeper("f0f0f0f0-f0f0-4f0f-8f0f-f0f0f0f0f0f0", func(id string) bool { return id != deadID })
	var undo executions.Step
	testkit.WaitFor(t, 30*time.Second, func() bool {
		for _, st := range e.steps(ex.ID) {
			if st.Phase == executions.PhaseRollback {
				undo = st
			}
		}
		return undo.Status == executions.StepInterrupted
	}, "the cancelled rollback's step was never settled")
	if !strings.Contains(undo.Error, "after its rollback was cancelled") {
		t.Errorf("the settled undo step's error: %q", undo.Error)
	}
	if got := e.get(ex.ID); got.Status != executions.RollbackFailed || got.Error != "the rollback was cancelled by boss" {
		t.Errorf("after the sweep: %s %q, want rollback_failed as it was", got.Status, got.Error)
	}
	if c, err := e.app.Grants.GetCollaboration(e.ctx, q); err != nil || c.Status != grants.StatusCancelled {
		t.Errorf("the undo step's question: %v %+v, want cancelled", err, c)
	}
	e.wantAudits(ex.ID, map[string]int{"execution.step_interrupted": 1})
}
