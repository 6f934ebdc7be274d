package executions_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/executions"
)

// waitingPlan is an execution of first (a step of mt__echo or mt__sleep) then mt__note,
// approved, whose step 1 waits for mt__note (disabled after the approval) once its job
// runs.
func (e *env) waitingPlan(t *testing.T, first executions.RequestStep) *executions.Execution {
	t.Helper()
	ex := e.create(e.admin, first, step("mt__note", `{"path":"/n"}`))
	if ex.Status == executions.AwaitingApproval {
		if _, err := e.svc.Confirm(e.ctx, e.admin, ex.ID, ex.Plan.Phrase(), ""); err != nil {
			t.Fatal(err)
		}
	}
	e.setEnabled(t, "mt__note", false)
	return ex
}

// workSnoozed works execution id's run job, which must be snoozed: its step waits.
func (e *env) workSnoozed(t *testing.T, id string) {
	t.Helper()
	var sn *rivertype.JobSnoozeError
	if err := executions.WorkRun(e.ctx, e.svc, id, 1, 3); !errors.As(err, &sn) {
		t.Fatalf("the job: got %v, want it snoozed while its step waits", err)
	}
}

// waitEvents are the tool.failed events on execution id's own topic, as the page's
// live view gets them.
func (e *env) waitEvents(t *testing.T, id string) []events.CallFailed {
	t.Helper()
	rows, err := e.pool.Query(e.ctx, `SELECT payload FROM events WHERE topic = $1 AND kind = $2 ORDER BY id`,
		executions.TopicOf(id), events.ToolFailed.String())
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []events.CallFailed
	for rows.Next() {
		var raw []byte
		var p events.CallFailed
		if err := rows.Scan(&raw); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// A step that begins to wait for its tool is announced on its execution's topic, in the
// transaction that notes it, so an open page shows the note at once; the re-checks that
// find it still waiting announce nothing more (nor on the router's topic: no call was
// made). Past the wait's bound the step is skipped without its note, in the row and in
// the execution.failed event's results. (Nothing was announced, and the skipped step
// still said it waited, "at most 10m0s".)
func TestWaitingStepAnnouncedAndClearedAtGiveUp(t *testing.T) {
	t.Parallel()
	e, _ := transientEnv(t, false)
	ex := e.waitingPlan(t, step("mt__echo", `{"message":"first"}`))
	e.workSnoozed(t, ex.ID)
	note := e.stepAt(t, ex.ID, executions.PhaseRun, 0).Error
	if !e.waitingNote(t, ex.ID, executions.Executing, executions.PhaseRun, 0, "step 2 (mt__note): ") {
		t.Fatalf("step 1 does not say it waits for mt__note: %q", note)
	}
	evs := e.waitEvents(t, ex.ID)
	if len(evs) != 1 {
		t.Fatalf("tool.failed events on the execution's topic as the step began to wait: got %d, want 1", len(evs))
	}
	if p := evs[0]; p.Tool != "mt__note" || p.ToolID != e.tool("mt__note").ID || p.Code != "tool_disabled" || p.Message != note || p.CallID != "" {
		t.Errorf("the event: %+v, want mt__note (%s), tool_disabled, the step's note %q and no call", p, e.tool("mt__note").ID, note)
	}
	if n := e.count(`SELECT count(*) FROM events WHERE topic <> $1 AND kind = 'tool.failed'`, executions.TopicOf(ex.ID)); n != 0 {
		t.Errorf("tool.failed events elsewhere: got %d, want none (no call was made)", n)
	}

	// Looked at again, still disabled: the same note, nothing new announced.
	e.clock.Advance(time.Minute)
	e.workSnoozed(t, ex.ID)
	if got := e.stepAt(t, ex.ID, executions.PhaseRun, 0).Error; got != note {
		t.Errorf("the note after a re-check: %q, want it unchanged %q", got, note)
	}
	if n := len(e.waitEvents(t, ex.ID)); n != 1 {
		t.Errorf("tool.failed events after a re-check: got %d, want still 1", n)
	}

	e.clock.Advance(10 * time.Minute)
	if err := executions.WorkRun(e.ctx, e.svc, ex.ID, 1, 3); err != nil {
		t.Fatal(err)
	}
	if got := e.get(ex.ID); got.Status != executions.Failed || !strings.Contains(got.Error, "could still not be called after Toolwarden waited") {
		t.Fatalf("got %s %q, want failed after the wait", got.Status, got.Error)
	}
	for _, st := range e.steps(ex.ID) {
		if st.Status != executions.StepSkipped || st.Error != "" {
			t.Errorf("step %d: %s %q, want skipped with no error", st.Position+1, st.Status, st.Error)
		}
	}
	var results []events.StepResult
	if err := e.pool.QueryRow(e.ctx, `SELECT payload->'results' FROM events WHERE topic = $1 AND kind = 'execution.failed'`,
		executions.TopicOf(ex.ID)).Scan(&results); err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if r.Status != executions.StepSkipped || r.Error != "" {
			t.Errorf("execution.failed result of step %d: %s %q, want skipped with no error", r.Position+1, r.Status, r.Error)
		}
	}
	if len(results) != 2 {
		t.Errorf("execution.failed results: %d, want 2", len(results))
	}
	checkInvariant(t, e, ex.ID)
}

// An execution cancelled while its step waits for its tool ends cancelled, the step
// skipped without the note that said it would run once the tool is back, and its
// snoozed job, run again by the runner, stops for good. (The skipped step kept saying
// it waited, "at most 10m0s".)
func TestCancelWhileStepWaits(t *testing.T) {
	t.Parallel()
	e, _ := transientEnv(t, false)
	ex := e.waitingPlan(t, step("mt__echo", `{"message":"first"}`))
	e.run(nil)
	testkit.WaitFor(t, 20*time.Second, func() bool {
		return e.waitingNote(t, ex.ID, executions.Executing, executions.PhaseRun, 0, "step 2 (mt__note): ")
	}, "step 1 never said it waits for mt__note")

	if _, err := e.svc.Cancel(e.ctx, e.admin, ex.ID, "not needed any more"); err != nil {
		t.Fatal(err)
	}
	if got := e.get(ex.ID); got.Status != executions.Cancelled {
		t.Fatalf("got %s %q, want cancelled", got.Status, got.Error)
	}
	check := func(when string) {
		t.Helper()
		for _, st := range e.steps(ex.ID) {
			if st.Status != executions.StepSkipped || st.Error != "" {
				t.Errorf("%s: step %d: %s %q, want skipped with no error", when, st.Position+1, st.Status, st.Error)
			}
		}
	}
	check("once cancelled")

	// The job, snoozed for a few seconds, runs again, finds the execution cancelled and
	// ends: nothing runs it again.
	jobs := func(state string) int {
		return e.count(`SELECT count(*) FROM river_job WHERE kind = 'execution.run' AND args->>'execution_id' = $1::text
			AND state::text = $2`, ex.ID, state)
	}
	testkit.WaitFor(t, 20*time.Second, func() bool { return jobs("completed") == 1 }, "the snoozed job never ended")
	if n := e.count(`SELECT count(*) FROM river_job WHERE kind = 'execution.run' AND args->>'execution_id' = $1::text
		AND state::text <> 'completed'`, ex.ID); n != 0 {
		t.Errorf("run jobs of the execution not completed: %d, want none", n)
	}
	if got := e.get(ex.ID); got.Status != executions.Cancelled {
		t.Errorf("after the job's last run: %s, want still cancelled", got.Status)
	}
	check("after the job's last run")
	e.wantAudits(ex.ID, map[string]int{"execution.cancel": 1})
	checkInvariant(t, e, ex.ID)
}

// A step that waited for its tool loses its note as it starts: while it runs, it does
// not say it still waits. (It did, until its end replaced the note.)
func TestWaitingNoteGoesWhenStepRuns(t *testing.T) {
	t.Parallel()
	e, _ := transientEnv(t, false)
	ex := e.waitingPlan(t, step("mt__sleep", `{"ms":3000}`))
	e.workSnoozed(t, ex.ID)
	if !e.waitingNote(t, ex.ID, executions.Executing, executions.PhaseRun, 0, "step 2 (mt__note): ") {
		t.Fatalf("step 1 does not say it waits for mt__note: %+v", e.stepAt(t, ex.ID, executions.PhaseRun, 0))
	}
	e.setEnabled(t, "mt__note", true)
	done := make(chan error, 1)
	go func() { done <- executions.WorkRun(e.ctx, e.svc, ex.ID, 1, 3) }()
	var st executions.Step
	testkit.WaitFor(t, 20*time.Second, func() bool {
		st = e.stepAt(t, ex.ID, executions.PhaseRun, 0)
		return st.Status != executions.StepPending
	}, "step 1 never started")
	if st.Status != executions.StepRunning || st.Error != "" {
		t.Errorf("step 1 as it runs: %s %q, want running with no error", st.Status, st.Error)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := e.get(ex.ID); got.Status != executions.Success {
		t.Fatalf("got %s %q, want success", got.Status, got.Error)
	}
	checkInvariant(t, e, ex.ID)
}
