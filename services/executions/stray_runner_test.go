package executions_test

import (
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/risk"
)

// A run-phase job worked while the execution rolls back (a retry, a duplicate that
// waited) runs nothing and is not recorded as its runner: recorded, its live replica
// was taken for the rollback's runner, and a rollback whose picker died was never
// queued again (found by a red-team reviewer).
func TestStrayRunJobDoesNotClaimTheRollback(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "echo", "fail")
	e.setRisk("mt__fail", risk.Low)
	const stray = "dddddddd-dddd-4ddd-8ddd-dddddddddddd"
	ex, err := e.svc.Create(e.ctx, e.admin, executions.Input{Plan: &executions.Request{
		Steps:    []executions.RequestStep{step("mt__echo", `{"message":"do"}`), step("mt__fail", `{}`)},
		Rollback: []executions.RequestStep{step("mt__echo", `{"message":"undo"}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := executions.WorkRun(e.ctx, e.svc, ex.ID, 1, 25); err != nil {
		t.Fatal(err)
	}
	testkit.Exec(t, e.pool, `UPDATE river_job SET state = 'completed', finalized_at = now()
		WHERE kind = 'execution.run' AND args->>'execution_id' = $1::text`, ex.ID)
	if _, err := e.svc.Rollback(e.ctx, e.admin, ex.ID, executions.RollbackDecision{}); err != nil {
		t.Fatal(err)
	}
	if err := executions.WorkRun(e.ctx, e.replica(stray, func(string) bool { return true }), ex.ID, 1, 25); err != nil {
		t.Fatal(err)
	}
	if got := e.get(ex.ID); got.Status != executions.RollingBack || got.Runner != "" {
		t.Fatalf("after a run-phase job on a rolling-back execution: %s, runner %q", got.Status, got.Runner)
	}
	// The rollback's job is taken by a replica that dies before recording itself.
	testkit.Exec(t, e.pool, `UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now() - interval '10 minutes',
		attempted_by = ARRAY['replica-d'] WHERE kind = 'execution.run' AND args->>'execution_id' = $1::text AND state = 'available'`, ex.ID)
	e.forgottenBefore(ex.ID, "10 minutes")
	e.sweeper("cccccccc-cccc-4ccc-8ccc-cccccccccccc", func(string) bool { return true })
	testkit.WaitFor(t, 20*time.Second, func() bool {
		return e.count(`SELECT count(*) FROM river_job WHERE kind = 'execution.run' AND args->>'execution_id' = $1::text
			AND state = 'available'`, ex.ID) > 0 || e.get(ex.ID).Status != executions.RollingBack
	}, "the rollback whose picker died was not queued again")
}
