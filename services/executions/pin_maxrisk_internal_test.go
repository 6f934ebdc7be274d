package executions

import (
	"testing"

	"github.com/toolwarden/toolwarden/services/risk"
)

// A step is called pinned to the level its phase's plan approved it at: a run step its
// plan's, an undo step its rollback plan's own (not the level of the step it undoes).
func TestPinCarriesApprovedRisk(t *testing.T) {
	ex, rp := sealFixture()
	ex.RollbackPlan = rp
	var s Service
	for _, tc := range []struct {
		st   Step
		tool string
		want risk.Level
	}{
		{Step{Phase: PhaseRun, Position: 0}, "t-mt__add", risk.Medium},
		{Step{Phase: PhaseRun, Position: 1}, "t-mt__echo", risk.Low},
		{Step{Phase: PhaseRollback, Position: 0}, "t-mt__echo", risk.High},
	} {
		p := s.pinOf(ex, tc.st)
		if p == nil || p.ToolID != tc.tool || p.MaxRisk != tc.want {
			t.Errorf("pin of %s step %d: got %+v, want %s at %s", tc.st.Phase, tc.st.Position, p, tc.tool, tc.want)
		}
	}
	if p := s.pinOf(ex, Step{Phase: PhaseRollback, Position: 1}); p != nil {
		t.Errorf("pin of a rollback step the plan lacks: got %+v, want none", p)
	}
}
