package executions

import "testing"

// A plan step expects the fingerprint of its preview; an undo step expects nothing (its
// preview is decided, not checked as it runs), whatever the plan step at its position.
func TestExpectOfPhase(t *testing.T) {
	t.Parallel()
	ex := &Execution{
		Plan:         Plan{Steps: []PlannedStep{{Preview: &StepPreview{Fingerprint: "run-0"}}, {}}},
		RollbackPlan: &Plan{Steps: []PlannedStep{{Preview: &StepPreview{Fingerprint: "undo-0"}}}},
	}
	for _, c := range []struct {
		st   Step
		want string
	}{
		{Step{Phase: PhaseRun, Position: 0}, "run-0"},
		{Step{Phase: PhaseRun, Position: 1}, ""},
		{Step{Phase: PhaseRun, Position: 2}, ""},
		{Step{Phase: PhaseRollback, Position: 0}, ""},
		{Step{Phase: PhaseRollback, Position: 1}, ""},
	} {
		if got := expectOf(ex, c.st); got != c.want {
			t.Errorf("step %s %d expects %q, want %q", c.st.Phase, c.st.Position, got, c.want)
		}
	}
	ex.RollbackPlan = nil
	if got := expectOf(ex, Step{Phase: PhaseRollback, Position: 0}); got != "" {
		t.Errorf("an undo step with no rollback decided expects %q", got)
	}
}
