package executions_test

import (
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/executions"
)

// An undo step found running with nobody running it (its runner died) is named as an
// undo step in how the rollback ended: "step 1" would read as the run step of that
// number.
func TestInterruptedUndoStepNamedAsOne(t *testing.T) {
	t.Parallel()
	e, _ := transientEnv(t, false)
	ex, err := e.svc.Create(e.ctx, e.admin, executions.Input{Plan: &executions.Request{
		Steps:    []executions.RequestStep{step("mt__echo", `{"message":"do"}`), step("mt__fail", `{}`)},
		Rollback: []executions.RequestStep{step("mt__echo", `{"message":"undo"}`)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := executions.WorkRun(e.ctx, e.svc, ex.ID, 1, 3); err != nil {
		t.Fatal(err)
	}
	_, rp, err := e.svc.PlanRollback(e.ctx, ex.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Rollback(e.ctx, e.admin, ex.ID, executions.RollbackDecision{Hash: rp.Hash, Phrase: rp.Phrase}); err != nil {
		t.Fatal(err)
	}
	testkit.Exec(t, e.pool, `UPDATE tool_calls SET status = 'running', started_at = now() WHERE execution_id = $1 AND phase = 'rollback'`, ex.ID)
	if err := executions.WorkRollback(e.ctx, e.svc, ex.ID, 1, 3); err != nil {
		t.Fatal(err)
	}
	got := e.get(ex.ID)
	if got.Status != executions.RollbackFailed || !strings.Contains(got.Error, "interrupted: Toolwarden stopped while undo step 1 ran") {
		t.Fatalf("after the rollback job: %s %q; want rollback_failed, naming the undo step", got.Status, got.Error)
	}
	e.wantAudits(ex.ID, map[string]int{"execution.interrupted": 1, "execution.rollback_failed": 0})
}
