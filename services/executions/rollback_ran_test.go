package executions_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/tools"
)

// A step that failed after its server got the call (here: it outlived its timeout) may
// have taken effect: its rollback names it among the steps nothing undoes, as it names
// an interrupted step, rather than passing over it as a step that did nothing.
func TestRollbackNamesAStepThatFailedAfterTheServerGotIt(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "echo", "sleep")
	ms := 1000
	e.update("mt__sleep", tools.Patch{TimeoutMS: &ms})
	ex, err := e.svc.Create(e.ctx, e.admin, executions.Input{Plan: &executions.Request{
		Steps:    []executions.RequestStep{step("mt__echo", `{"message":"one"}`), step("mt__sleep", `{"ms":5000}`)},
		Rollback: []executions.RequestStep{step("mt__echo", `{"message":"undo one"}`)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	e.run(nil)
	e.waitStatus(ex.ID, executions.Failed, 30*time.Second)
	sts := e.steps(ex.ID)
	if s := stepStatuses(sts); !slices.Equal(s, []string{"succeeded", "failed"}) {
		t.Fatalf("steps: got %v, want succeeded, failed (error %q)", s, sts[1].Error)
	}
	if !strings.Contains(sts[1].Error, "did not answer within") || sts[1].CallID == nil {
		t.Fatalf("step 2: error %q, call %v; want it timed out", sts[1].Error, sts[1].CallID)
	}
	// The call reached the server: its audit row is written just before the server sees it.
	e.flush()
	if n := e.count(`SELECT count(*) FROM audit_log WHERE action = 'tool.call' AND payload->>'call_id' = $1`, *sts[1].CallID); n != 1 {
		t.Fatalf("audit rows of step 2's call: got %d, want 1", n)
	}

	_, rp, err := e.svc.PlanRollback(e.ctx, ex.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rp.Problems != nil || len(rp.Steps) != 1 || rp.Steps[0].Undoes == nil || *rp.Steps[0].Undoes != 0 {
		t.Fatalf("rollback: steps %+v, problems %v; want step 1 undone", rp.Steps, rp.Problems)
	}
	if !slices.ContainsFunc(rp.Missing, func(m string) bool {
		return strings.HasPrefix(m, "step 2 (mt__sleep)") && strings.Contains(m, "it may have taken effect")
	}) {
		t.Errorf("the rollback plan does not name the timed-out step as one that may have taken effect: %q", rp.Missing)
	}
}
