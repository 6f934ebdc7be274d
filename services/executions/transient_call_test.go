package executions_test

import (
	"context"
	"testing"

	"github.com/toolwarden/toolwarden/services/executions"
)

// disableAtRun is a Previewer whose run-time check of a step's preview (staleFile,
// between checkBinding and the step's call) disables the tool first, once, and waits
// until the router refuses it: a tool disabled in the window after the step's last
// check.
type disableAtRun struct {
	riseAtRun
	t *testing.T
}

func (p *disableAtRun) Fingerprint(context.Context, string, executions.PreviewCall) (string, error) {
	p.once.Do(func() { p.e.setEnabled(p.t, p.tool, false) })
	return "same", nil
}

// A step whose tool is disabled after checkBinding found it callable, just before its
// call, is refused by the router as tool_disabled: the step waits for its tool, as when
// checkBinding finds it disabled (pending, saying since when and why), and runs once the
// tool is enabled again. It failed the execution, though the tool was only off for a
// moment.
func TestStepRefusedDisabledAtItsCallWaits(t *testing.T) {
	t.Parallel()
	e, _ := transientEnv(t, false)
	hook := &disableAtRun{riseAtRun: riseAtRun{e: e, tool: "mt__note"}, t: t}
	svc, err := executions.New(e.pool, e.r, e.tools, &executions.Options{Now: e.clock.Now, Workers: 4, Keys: mustKeyring(t, e.key),
		Local: e.app.Local, Previewer: hook})
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	ex := e.create(e.admin, step("mt__note", `{"path":"/n"}`))
	if ex.Status == executions.AwaitingApproval {
		if _, err := e.svc.Confirm(e.ctx, e.admin, ex.ID, ex.Plan.Phrase(), ""); err != nil {
			t.Fatal(err)
		}
	}
	e.workSnoozed(t, ex.ID)
	if !e.waitingNote(t, ex.ID, executions.Executing, executions.PhaseRun, 0, "") {
		t.Fatalf("step 1 does not say it waits for mt__note: %+v", e.stepAt(t, ex.ID, executions.PhaseRun, 0))
	}
	e.setEnabled(t, "mt__note", true)
	if err := executions.WorkRun(e.ctx, e.svc, ex.ID, 1, 3); err != nil {
		t.Fatal(err)
	}
	if got := e.get(ex.ID); got.Status != executions.Success {
		t.Fatalf("once mt__note is enabled again: %s %q, want success", got.Status, got.Error)
	}
	e.wantAudits(ex.ID, map[string]int{"execution.stale": 0, "execution.failed": 0, "execution.success": 1})
	checkInvariant(t, e, ex.ID)
}
