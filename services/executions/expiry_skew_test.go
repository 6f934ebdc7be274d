package executions_test

import (
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/risk"
)

// An approval counts only before expires_at by the database's clock, not by this
// host's: a replica whose clock runs behind the database's cannot approve a plan just
// past its expiry (the conflict says expired, and it is), and its expiry job still
// expires a plan that is due.
func TestConfirmPastExpiryOnAClockBehind(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "add")
	e.setRisk("mt__add", risk.Medium)
	if err := e.svc.SetSettings(e.ctx, admin, executions.Settings{ApprovalTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	// This host's clock two minutes behind the database's: the plans it creates expire,
	// by the database's clock, a minute before they are made.
	e.clock.Advance(-2 * time.Minute)
	late := e.create(e.admin, step("mt__add", `{"a":1,"b":1}`))
	if late.Status != executions.AwaitingApproval || !e.clock.Now().Before(*late.ExpiresAt) {
		t.Fatalf("created %s, expiring %v (host clock %v); want awaiting_approval, not yet due by the host's clock",
			late.Status, late.ExpiresAt, e.clock.Now())
	}
	_, err := e.svc.Confirm(e.ctx, e.admin, late.ID, "", "")
	conflictIn(t, err, executions.Expired)
	if got := e.get(late.ID); got.Status != executions.Expired || got.Approval != "" || got.StartedAt != nil {
		t.Errorf("confirmed past its expiry by the database's clock: %s (approval %q, started %v), want expired, never approved",
			got.Status, got.Approval, got.StartedAt)
	}
	e.bothTopics(late.ID, "approval.granted", 0)
	e.bothTopics(late.ID, "execution.expired", 1)
	e.wantAudits(late.ID, map[string]int{"execution.approve": 0, "execution.expire": 1})
	if n := e.count(`SELECT count(*) FROM river_job WHERE args->>'execution_id' = $1::text`, late.ID); n != 0 {
		t.Errorf("%d run jobs queued for a plan that expired", n)
	}

	due := e.create(e.admin, step("mt__add", `{"a":2,"b":2}`))
	if n, err := e.svc.ExpireDue(e.ctx); err != nil || n != 1 {
		t.Fatalf("ExpireDue on a clock behind: got %d, %v; want 1", n, err)
	}
	if got := e.get(due.ID); got.Status != executions.Expired {
		t.Errorf("after ExpireDue: %s, want expired", got.Status)
	}
	checkInvariant(t, e, late.ID)
	checkInvariant(t, e, due.ID)
}
