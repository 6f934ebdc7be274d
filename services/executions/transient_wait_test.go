package executions_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/riverqueue/river/rivertype"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/risk"
)

// noteTool is a tool of the tests' own, which the mcptest server then offers.
var noteTool = mcptest.ToolSpec{Name: "note", Description: "Keeps a note.",
	InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`),
	Annotations: &mcp.ToolAnnotations{DestructiveHint: new(false)}}

// transientEnv is an env with server mt offering echo, sleep, fail and note, all
// enabled. With runner, the env's runner runs (the rollback tests, whose undo tool
// changes while an earlier undo step runs); without, each test works the jobs itself
// (WorkRun), so that a step that waits is seen waiting, and looked at again when the
// test says.
func transientEnv(t *testing.T, runner bool) (*env, *mcptest.HTTPServer) {
	t.Helper()
	e := start(t)
	hs := e.server("mt", true, "echo", "sleep", "fail")
	e.setRisk("mt__fail", risk.Low)
	hs.Server().SetTool(noteTool)
	e.enable("mt__note")
	if runner {
		e.run(nil)
	}
	return e, hs
}

// rollingBack is an execution of two echo steps and a failing one that failed, whose
// rollback (mt__sleep undoing step 2, then mt__note undoing step 1: undo step 2) was
// approved; it returns once the sleep runs, for the test to change mt__note meanwhile.
func (e *env) rollingBack(t *testing.T) *executions.Execution {
	t.Helper()
	zero, one := 0, 1
	ex, err := e.svc.Create(e.ctx, e.admin, executions.Input{Plan: &executions.Request{
		Steps: []executions.RequestStep{step("mt__echo", `{"message":"do"}`), step("mt__echo", `{"message":"again"}`), step("mt__fail", `{}`)},
		Rollback: []executions.RequestStep{
			{Tool: "mt__note", Arguments: json.RawMessage(`{"path":"/n"}`), Undoes: &zero},
			{Tool: "mt__sleep", Arguments: json.RawMessage(`{"ms":3000}`), Undoes: &one},
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	e.waitStatus(ex.ID, executions.Failed, 20*time.Second)
	_, rp, err := e.svc.PlanRollback(e.ctx, ex.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Rollback(e.ctx, e.admin, ex.ID, executions.RollbackDecision{Confirmed: true, Hash: rp.Hash, Phrase: rp.Phrase}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, func() bool {
		return e.stepAt(t, ex.ID, executions.PhaseRollback, 0).Status == executions.StepRunning
	}, "the sleeping undo step never ran")
	return ex
}

// setEnabled enables or disables a tool as an administrator, and waits until the
// router sees it so.
func (e *env) setEnabled(t *testing.T, qualified string, enable bool) {
	t.Helper()
	outs, err := e.tools.SetEnabled(e.ctx, admin, []string{e.tool(qualified).ID}, enable, "maintenance", false)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range outs {
		if o.Error != "" {
			t.Fatalf("set %s enabled %v: %s", qualified, enable, o.Error)
		}
	}
	testkit.WaitFor(t, 20*time.Second, func() bool {
		_, err := e.prepared(qualified, sampleArgs(qualified))
		return (err == nil) == enable
	}, "the router never saw the change of "+qualified)
}

// stepAt is the step of phase at position.
func (e *env) stepAt(t *testing.T, id, phase string, position int) executions.Step {
	t.Helper()
	for _, st := range e.steps(id) {
		if st.Phase == phase && st.Position == position {
			return st
		}
	}
	t.Fatalf("no %s step at %d", phase, position)
	return executions.Step{}
}

// waitingNote reports whether execution id is still in status and its step at
// position of phase waits for mt__note, saying so (and, when about is given, naming
// the step whose tool it is).
func (e *env) waitingNote(t *testing.T, id string, status executions.Status, phase string, position int, about string) bool {
	t.Helper()
	if got := e.get(id); got.Status != status {
		t.Fatalf("while the step waits: %s %q, want still %s", got.Status, got.Error, status)
	}
	st := e.stepAt(t, id, phase, position)
	return st.Status == executions.StepPending && strings.HasPrefix(st.Error, "waiting since ") &&
		strings.Contains(st.Error, "for mt__note to be callable again") && strings.Contains(st.Error, about+"mt__note is disabled")
}

// An undo step whose tool is disabled for a moment (here while the undo step before it
// runs) waits for it, the rollback still rolling back and the step saying what it
// waits for, and runs once the tool is enabled again: the rollback completes. Nothing
// is audited as a stale plan. (It ended rollback_failed for good, audited as stale.)
func TestRollbackWaitsForDisabledUndoTool(t *testing.T) {
	t.Parallel()
	e, _ := transientEnv(t, true)
	ex := e.rollingBack(t)
	e.setEnabled(t, "mt__note", false)
	testkit.WaitFor(t, 20*time.Second, func() bool {
		return e.waitingNote(t, ex.ID, executions.RollingBack, executions.PhaseRollback, 1, "")
	}, "undo step 2 never said it waits for mt__note")
	if st := e.stepAt(t, ex.ID, executions.PhaseRollback, 0); st.Status != executions.StepSucceeded {
		t.Fatalf("undo step 1: %s, want succeeded", st.Status)
	}
	// Still disabled a few minutes on (the job looks again every few seconds): it waits.
	e.clock.Advance(5 * time.Minute)
	time.Sleep(6 * time.Second)
	if !e.waitingNote(t, ex.ID, executions.RollingBack, executions.PhaseRollback, 1, "") {
		t.Fatalf("undo step 2 no longer waits: %+v", e.stepAt(t, ex.ID, executions.PhaseRollback, 1))
	}

	e.setEnabled(t, "mt__note", true)
	e.waitStatus(ex.ID, executions.RolledBack, 20*time.Second)
	if st := e.stepAt(t, ex.ID, executions.PhaseRollback, 1); st.Status != executions.StepSucceeded || st.Error != "" {
		t.Errorf("undo step 2: %s %q, want succeeded with no error", st.Status, st.Error)
	}
	e.wantAudits(ex.ID, map[string]int{"execution.stale": 0, "execution.rolled_back": 1})
	checkInvariant(t, e, ex.ID)
}

// An undo step whose tool stays disabled past the wait's bound (10 minutes, the test's
// clock moved past it) ends the rollback rollback_failed, saying how long it waited
// for which tool, audited as the failure it is, not as a stale plan.
func TestRollbackGivesUpOnDisabledUndoTool(t *testing.T) {
	t.Parallel()
	e, _ := transientEnv(t, true)
	ex := e.rollingBack(t)
	e.setEnabled(t, "mt__note", false)
	testkit.WaitFor(t, 20*time.Second, func() bool {
		return e.waitingNote(t, ex.ID, executions.RollingBack, executions.PhaseRollback, 1, "")
	}, "undo step 2 never said it waits for mt__note")

	e.clock.Advance(11 * time.Minute)
	got := e.waitStatus(ex.ID, executions.RollbackFailed, 20*time.Second)
	const want = "undo step 2 (mt__note, which undoes step 1) was not run: mt__note could still not be called after Toolwarden waited 11m"
	if !strings.HasPrefix(got.Error, want) || !strings.Contains(got.Error, "s for it: mt__note is disabled") {
		t.Fatalf("error: got %q, want %q…, naming why", got.Error, want)
	}
	if st := e.stepAt(t, ex.ID, executions.PhaseRollback, 1); st.Status != executions.StepSkipped {
		t.Errorf("undo step 2: %s, want skipped", st.Status)
	}
	e.wantAudits(ex.ID, map[string]int{"execution.stale": 0, "execution.rollback_failed": 1})
	checkInvariant(t, e, ex.ID)
}

// An undo step whose tool changed its definition after the rollback was approved (here
// while the undo step before it runs) is not run: the rollback fails at once, audited
// as stale, naming the undo step once, as an undo step, with the run step it undoes.
func TestRollbackStepStale(t *testing.T) {
	t.Parallel()
	e, hs := transientEnv(t, true)
	ex := e.rollingBack(t)
	before := e.tool("mt__note").DefinitionHash
	changed := noteTool
	changed.Description = "Keeps a note, now differently."
	hs.Server().SetTool(changed)
	testkit.WaitFor(t, 20*time.Second, func() bool {
		p, err := e.prepared("mt__note", `{"path":"/n"}`)
		return err != nil || p.DefinitionHash != before
	}, "the router never saw the new definition of mt__note")
	got := e.waitStatus(ex.ID, executions.RollbackFailed, 20*time.Second)
	const want = "undo step 2 (mt__note, which undoes step 1) was not run: mt__note changed its definition since the plan was made"
	if got.Error != want {
		t.Fatalf("error: got %q, want %q", got.Error, want)
	}
	if st := e.stepAt(t, ex.ID, executions.PhaseRollback, 0); st.Status != executions.StepSucceeded {
		t.Errorf("undo step 1: %s, want succeeded", st.Status)
	}
	e.wantAudits(ex.ID, map[string]int{"execution.stale": 1})
	checkInvariant(t, e, ex.ID)
}

// The run phase has the same wait. Here the tool of step 2 is disabled before step 1:
// every step is checked before each one runs, so step 1 waits (saying for which step's
// tool), the job snoozed and the execution still executing, and the plan runs once the
// tool is enabled again.
func TestRunWaitsForDisabledTool(t *testing.T) {
	t.Parallel()
	e, _ := transientEnv(t, false)
	ex := e.create(e.admin, step("mt__echo", `{"message":"first"}`), step("mt__note", `{"path":"/n"}`))
	if ex.Status == executions.AwaitingApproval {
		if _, err := e.svc.Confirm(e.ctx, e.admin, ex.ID, ex.Plan.Phrase(), ""); err != nil {
			t.Fatal(err)
		}
	}
	e.setEnabled(t, "mt__note", false)
	var sn *rivertype.JobSnoozeError
	if err := executions.WorkRun(e.ctx, e.svc, ex.ID, 1, 3); !errors.As(err, &sn) {
		t.Fatalf("the job: got %v, want it snoozed while its step waits", err)
	}
	if !e.waitingNote(t, ex.ID, executions.Executing, executions.PhaseRun, 0, "step 2 (mt__note): ") {
		t.Fatalf("step 1 does not say it waits for mt__note: %+v", e.stepAt(t, ex.ID, executions.PhaseRun, 0))
	}
	e.setEnabled(t, "mt__note", true)
	if err := executions.WorkRun(e.ctx, e.svc, ex.ID, 1, 3); err != nil {
		t.Fatal(err)
	}
	if got := e.get(ex.ID); got.Status != executions.Success {
		t.Fatalf("got %s %q, want success", got.Status, got.Error)
	}
	for _, st := range e.steps(ex.ID) {
		if st.Status != executions.StepSucceeded || st.Error != "" {
			t.Errorf("step %d: %s %q, want succeeded with no error", st.Position+1, st.Status, st.Error)
		}
	}
	e.wantAudits(ex.ID, map[string]int{"execution.stale": 0})
	checkInvariant(t, e, ex.ID)
}
