package executions_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/risk"
)

// A plan refused before a step (its requester can no longer act) whose transition to
// failed does not commit (here a trigger refuses it, as a dropped connection or a
// failed audit append would) leaves its steps pending, not skipped: the retried job
// refuses it again and it fails, never finding nothing left to run and succeeding.
func TestRefusedPlanWhoseFailureDidNotCommit(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "echo")
	ex := e.create(e.admin, step("mt__echo", `{"message":"one"}`), step("mt__echo", `{"message":"two"}`))
	if ex.Status != executions.Executing {
		t.Fatalf("status %s, want executing", ex.Status)
	}
	e.disable(e.admin)
	testkit.Exec(t, e.app.Owner, `CREATE FUNCTION test_refuse_failed() RETURNS trigger LANGUAGE plpgsql AS
		$$ BEGIN RAISE EXCEPTION 'test: the transition to failed does not commit'; END $$`)
	testkit.Exec(t, e.app.Owner, `CREATE TRIGGER test_refuse_failed BEFORE UPDATE ON executions FOR EACH ROW
		WHEN (NEW.status = 'failed') EXECUTE FUNCTION test_refuse_failed()`)
	if err := executions.WorkRun(e.ctx, e.svc, ex.ID, 1, 3); err == nil || !strings.Contains(err.Error(), "does not commit") {
		t.Fatalf("the first attempt: %v, want the transition's failure", err)
	}
	if got, s := e.get(ex.ID), stepStatuses(e.steps(ex.ID)); got.Status != executions.Executing || !slices.Equal(s, []string{"pending", "pending"}) {
		t.Fatalf("after the failed transition: %s, steps %v; want executing, both steps pending", got.Status, s)
	}

	testkit.Exec(t, e.app.Owner, `DROP TRIGGER test_refuse_failed ON executions`)
	if err := executions.WorkRun(e.ctx, e.svc, ex.ID, 2, 3); err != nil {
		t.Fatal(err)
	}
	got := e.get(ex.ID)
	if got.Status != executions.Failed || !strings.Contains(got.Error, "step 1 (mt__echo) was not run: boss can no longer act") {
		t.Fatalf("after the retried job: %s %q; want failed, its requester gone", got.Status, got.Error)
	}
	if s := stepStatuses(e.steps(ex.ID)); !slices.Equal(s, []string{"skipped", "skipped"}) {
		t.Errorf("steps: %v, want skipped, skipped", s)
	}
	e.wantAudits(ex.ID, map[string]int{"execution.requester_gone": 1, "execution.success": 0})
	e.bothTopics(ex.ID, "execution.failed", 1)
	// The event lists the steps as the transition left them: skipped.
	var raw []byte
	if err := e.pool.QueryRow(e.ctx, `SELECT payload->'results' FROM events WHERE topic = $1 AND kind = 'execution.failed'`,
		executions.TopicOf(ex.ID)).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var results []struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(raw, &results); err != nil || len(results) != 2 || results[0].Status != "skipped" || results[1].Status != "skipped" {
		t.Errorf("the event's results: %s (%v), want both steps skipped", raw, err)
	}
}

// An executing plan whose steps are all skipped (as a release that skipped them before
// its failed transition left it) is not a success: the next job fails it, saying why.
func TestAllSkippedIsNoSuccess(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "echo")
	ex := e.create(e.admin, step("mt__echo", `{"message":"one"}`), step("mt__echo", `{"message":"two"}`))
	if ex.Status != executions.Executing {
		t.Fatalf("status %s, want executing", ex.Status)
	}
	testkit.Exec(t, e.pool, `UPDATE tool_calls SET status = 'skipped' WHERE execution_id = $1`, ex.ID)
	if err := executions.WorkRun(e.ctx, e.svc, ex.ID, 1, 3); err != nil {
		t.Fatal(err)
	}
	got := e.get(ex.ID)
	if got.Status != executions.Failed || got.Error != "step 1 (mt__echo) is skipped, not succeeded, so the plan did not complete" {
		t.Fatalf("after the job: %s %q; want failed, saying step 1 never succeeded", got.Status, got.Error)
	}
	e.wantAudits(ex.ID, map[string]int{"execution.success": 0, "execution.failed": 1})
	e.bothTopics(ex.ID, "execution.failed", 1)
}

// The same for a rollback: one whose steps are all skipped ends rollback_failed, not
// rolled_back.
func TestAllSkippedRollbackIsNotRolledBack(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "echo", "fail")
	e.setRisk("mt__fail", risk.Low)
	ex, err := e.svc.Create(e.ctx, e.admin, executions.Input{Plan: &executions.Request{
		Steps:    []executions.RequestStep{step("mt__echo", `{"message":"one"}`), step("mt__fail", `{"message":"no"}`)},
		Rollback: []executions.RequestStep{step("mt__echo", `{"message":"undo one"}`)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := executions.WorkRun(e.ctx, e.svc, ex.ID, 1, 3); err != nil {
		t.Fatal(err)
	}
	if got := e.get(ex.ID); got.Status != executions.Failed {
		t.Fatalf("after the run: %s %q, want failed", got.Status, got.Error)
	}
	_, rp, err := e.svc.PlanRollback(e.ctx, ex.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Rollback(e.ctx, e.admin, ex.ID, executions.RollbackDecision{Hash: rp.Hash, Phrase: rp.Phrase}); err != nil {
		t.Fatal(err)
	}
	testkit.Exec(t, e.pool, `UPDATE tool_calls SET status = 'skipped' WHERE execution_id = $1 AND phase = 'rollback'`, ex.ID)
	if err := executions.WorkRollback(e.ctx, e.svc, ex.ID, 1, 3); err != nil {
		t.Fatal(err)
	}
	got := e.get(ex.ID)
	if got.Status != executions.RollbackFailed || got.Error != "undo step 1 (mt__echo, which undoes step 1) is skipped, not succeeded, so the rollback did not complete" {
		t.Fatalf("after the rollback job: %s %q; want rollback_failed, saying its step never succeeded", got.Status, got.Error)
	}
	e.wantAudits(ex.ID, map[string]int{"execution.rolled_back": 0, "execution.rollback_failed": 1})
}
