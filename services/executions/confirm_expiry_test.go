package executions_test

import (
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/risk"
)

// A confirm that comes too late expires the plan, unless another decision wins first
// (here a cancel that commits while the expiry waits for the row): its conflict then
// says what the execution is, cancelled, not expired.
func TestLateConfirmLosesToACancel(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "add")
	e.setRisk("mt__add", risk.Medium)
	ex := e.create(e.admin, step("mt__add", `{"a":1,"b":1}`))
	if ex.Status != executions.AwaitingApproval {
		t.Fatalf("status %s, want awaiting_approval", ex.Status)
	}
	e.clock.Advance(25 * time.Hour)

	tx, err := e.pool.Begin(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(e.ctx) }()
	testkit.Exec(t, tx, `SELECT 1 FROM executions WHERE id = $1 FOR UPDATE`, ex.ID)
	done := make(chan error, 1)
	go func() {
		_, err := e.svc.Confirm(e.ctx, e.admin, ex.ID, "", "")
		done <- err
	}()
	testkit.WaitForLockWait(t, e.pool, "executions.apply")
	testkit.Exec(t, tx, `UPDATE executions SET status = 'cancelled', finished_at = now() WHERE id = $1`, ex.ID)
	if err := tx.Commit(e.ctx); err != nil {
		t.Fatal(err)
	}
	conflictIn(t, <-done, executions.Cancelled)
	if got := e.get(ex.ID); got.Status != executions.Cancelled {
		t.Errorf("after the race: %s, want cancelled", got.Status)
	}
	e.wantAudits(ex.ID, map[string]int{"execution.expire": 0})
}
