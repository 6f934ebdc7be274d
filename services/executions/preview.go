package executions

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/toolwarden/toolwarden/services/router"
)

// Previewer shows, before approval, what steps will change (the built-in file tools:
// a unified diff against the files as they are), and tells at run time whether what a
// step expects to find is still there, and when a rollback is planned whether a write's
// snapshot still is (app wires services/builtin).
type Previewer interface {
	// PreviewPlan previews steps run in conversation for user (its id), in order (nil:
	// nothing to show, also for what user may not read).
	PreviewPlan(ctx context.Context, conversation, user string, steps []PreviewCall) ([]*StepPreview, error)
	// Fingerprint is what step would find now, to compare with its preview's.
	Fingerprint(ctx context.Context, conversation string, step PreviewCall) (string, error)
	// SnapshotGone says why the snapshot snapshotID, taken in conversation, can no
	// longer be restored ("its snapshot … is no longer in the snapshot store (…)"), or "" while it can: a
	// rollback lists a write whose snapshot is gone as not undone, not as a restore
	// that would fail and end it.
	SnapshotGone(ctx context.Context, conversation, snapshotID string) (string, error)
}

// PreviewCall is a step to preview: its tool's qualified name and its arguments.
type PreviewCall struct {
	Tool      string
	Arguments json.RawMessage
}

// StepPreview is what a step will change: a file, the unified diff, and the
// fingerprint of the content the diff was computed against.
type StepPreview struct {
	Path        string `json:"path"`
	Diff        string `json:"diff"`
	Fingerprint string `json:"fingerprint"`
}

// preview adds the previews of plan's steps, run in conversation for user (its id).
func (s *Service) preview(ctx context.Context, conversation, user string, plan *Plan) error {
	if s.opts.Display != nil {
		for i, st := range plan.Steps {
			plan.Steps[i].Display = s.opts.Display(st.Tool, st.Arguments)
		}
	}
	if s.opts.Previewer == nil {
		return nil
	}
	calls := make([]PreviewCall, len(plan.Steps))
	for i, st := range plan.Steps {
		calls[i] = PreviewCall{Tool: st.Tool, Arguments: st.runArguments()}
	}
	ps, err := s.opts.Previewer.PreviewPlan(ctx, conversation, user, calls)
	if err != nil {
		return fmt.Errorf("executions: preview: %w", err)
	}
	for i := range plan.Steps {
		if i < len(ps) {
			plan.Steps[i].Preview = ps[i]
		}
	}
	return nil
}

// staleFile says how the file step st of ex (about to run) changed since its preview
// ("" when it did not, or the step has no preview, as an undo step: plannedOf).
func (s *Service) staleFile(ctx context.Context, ex *Execution, st Step) (string, error) {
	planned := plannedOf(ex, st)
	if s.opts.Previewer == nil || planned == nil || planned.Preview == nil {
		return "", nil
	}
	want := planned.Preview
	got, err := s.opts.Previewer.Fingerprint(ctx, ex.conversation(), PreviewCall{Tool: st.Tool, Arguments: planned.runArguments()})
	if err != nil {
		return "", err
	}
	if got == "" || got == want.Fingerprint {
		return "", nil
	}
	return fmt.Sprintf("%s changed since the plan's preview was made (the diff approved is no longer what it would do); make the plan again", want.Path), nil
}

// runArguments are the arguments the step runs with: as given, with the tool's
// configured values merged (Effective; the plan's hash binds them), for a preview must
// show what the call will do (a default overwrite: true makes create_file replace a
// file). Only a plan stored before Effective was kept falls back to the arguments given.
func (st PlannedStep) runArguments() json.RawMessage {
	if len(st.Effective) > 0 && string(st.Effective) != "null" {
		return st.Effective
	}
	return st.Arguments
}

// expectOf is the fingerprint step st's file must have when it is written (the
// preview's), or "".
func expectOf(ex *Execution, st Step) string {
	if planned := plannedOf(ex, st); planned != nil && planned.Preview != nil {
		return planned.Preview.Fingerprint
	}
	return ""
}

// plannedOf is run step st of ex as planned; nil for an undo step, or none. An undo
// step's preview is shown and decided (it is in the rollback's hash) but not expected
// when the step runs: a restore refused there would end the rollback for good
// (rollback_failed cannot be rolled back again), while one that puts a path back that
// changed after the decision says so and keeps that change in its own snapshot.
func plannedOf(ex *Execution, st Step) *PlannedStep {
	if st.Phase != PhaseRun || st.Position < 0 || st.Position >= len(ex.Plan.Steps) {
		return nil
	}
	return &ex.Plan.Steps[st.Position]
}

// conversation is the conversation the execution's steps run in.
func (ex *Execution) conversation() string {
	if ex.ConversationID != "" {
		return ex.ConversationID
	}
	return router.DefaultConversation(ex.Requester().Actor)
}
