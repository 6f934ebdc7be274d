package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/internal/canonjson"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/decide"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/usage"
	"github.com/toolwarden/toolwarden/services/verr"
	"github.com/toolwarden/toolwarden/views"
)

// The pages of one execution (seed 003's Safe Action flow): /executions/new and
// /executions/:id with its decisions. The API is in executions_api.go, the lists in
// executions_list.go.

const (
	// execToolHints bounds the tools the new-execution page lists.
	execToolHints = 40
	// execLogShown is how many of a log's newest lines a page shows.
	execLogShown = 1000
)

// Show is one execution: the plan, its approval, progress, log, results and rollback,
// following the execution's topic live.
func (h ExecutionsHandler) Show(c echo.Context) error {
	ctx := c.Request().Context()
	// The cursor first, then the state: whatever happens after the cursor is replayed
	// over the socket, and the state shown is at least as new as the cursor.
	last, err := h.Events.LatestID(ctx)
	if err != nil {
		return err
	}
	ex, err := h.Executions.Get(ctx, c.Param("id"))
	if err != nil {
		return err // executions.ErrNotFound: 404
	}
	x, preview, err := h.viewed(ctx, ex, PrincipalOf(c))
	if err != nil {
		return err
	}
	topic := executions.TopicOf(ex.ID)
	lines, omitted, err := h.executionLog(ctx, topic, last)
	if err != nil {
		return err
	}
	p := PrincipalOf(c)
	v := views.ExecutionPage{Layout: h.layout(c, ex.Title(), topic), X: x, Preview: preview, Log: lines, LogOmitted: omitted,
		// The requester while their role may plan executions: one made an auditor since
		// may no longer withdraw it (executions.Cancel).
		Mine: ex.RequestedBy != nil && *ex.RequestedBy == p.User.ID && p.Can(auth.PermExecutionCreate)}
	// A requester who may approve but not their own high-risk plan learns it before
	// typing the phrase (separation of duties), not from the refusal after.
	if v.Mine && ex.Status == executions.AwaitingApproval && ex.Risk == string(risk.High) && h.Decide != nil &&
		p.Can(auth.PermExecutionApprove) {
		_, err := h.Decide.Check(ctx, decide.Decision{Actor: ActorOf(c), Role: p.User.Role, Requester: p.User.ID,
			Level: risk.High, Verb: "approve a high-risk plan"})
		v.NeedsOther = decide.NeedsOther(err)
		if fe, _ := fault.As(err); err != nil && fe == nil {
			h.Logger.Warn("executions: who may approve is unknown; the page offers the phrase", "execution", ex.ID, "err", err)
		}
	}
	// The same for a high-risk rollback of one's own execution, whenever one is offered
	// (the page follows the execution live, so it is asked now).
	if v.Mine && h.Decide != nil && p.Can(auth.PermExecutionApprove) && ex.Status != executions.AwaitingApproval {
		_, err := h.Decide.Check(ctx, decide.Decision{Actor: ActorOf(c), Role: p.User.Role, Requester: p.User.ID,
			Level: risk.High, Verb: "roll executions back"})
		v.RollbackNeedsOther = decide.NeedsOther(err)
	}
	v.Live.LastEventID = last
	return render(c, http.StatusOK, views.ExecutionDetail(v))
}

// Results is an execution's results and rollback panels, and with ?preview=1 its
// preview, as its viewer may see them: an open page asks for them when a live update
// withheld something from them (views.LiveExecution; the preview when a decision's
// left its diffs out).
func (h ExecutionsHandler) Results(c echo.Context) error {
	ctx := c.Request().Context()
	ex, err := h.Executions.Get(ctx, c.Param("id"))
	if err != nil {
		return err // executions.ErrNotFound: 404
	}
	x, preview, err := h.viewed(ctx, ex, PrincipalOf(c))
	if err != nil {
		return err
	}
	if c.QueryParam("preview") != "1" {
		preview = nil // asked for when a decision withheld a diff only: it is large
	}
	return render(c, http.StatusOK, views.ExecutionResults(x, preview))
}

// viewed is ex's live part, results read, and its preview, as viewer may see them.
func (h ExecutionsHandler) viewed(ctx context.Context, ex *executions.Execution, viewer *auth.Principal) (views.ExecutionView, []views.ExecutionPreviewStep, error) {
	x, err := h.executionView(ctx, ex, nil, true, viewer)
	if err != nil {
		return x, nil, err
	}
	preview, _, err := h.executionPreview(ctx, ex, viewer)
	return x, preview, err
}

// executionView is the live part of the page, from the database. progress holds the
// latest progress report by call id (a tool.output event's). Without results the
// steps' results are not read (a progress fragment shows none). It is rendered for
// viewer, or for every viewer when nil (a live fragment): then built-in steps' results
// (executions.PrivateResult) and the rollback plan's secret arguments are withheld, and
// the other steps' results masked (stepResultShown).
func (h ExecutionsHandler) executionView(ctx context.Context, ex *executions.Execution, progress map[string]string, results bool, viewer *auth.Principal) (views.ExecutionView, error) {
	private, whole := ex.RevealsBuiltinResults(viewer), ex.RevealsResults(viewer)
	x := views.ExecutionView{ID: ex.ID, Title: ex.Title(), Status: string(ex.Status), Risk: ex.Risk, RiskWhy: ex.RiskWhy,
		Requester: ex.RequesterName, RequesterKind: ex.RequesterKind, Planner: ex.Planner, PlanHash: ex.Hash(),
		Approval: ex.Approval, Approver: ex.ApproverName, SelfApproved: ex.SelfApproved, Reason: ex.Reason, Decision: ex.Decision,
		DecidedBy: ex.DecidedBy, Source: ex.Source, Client: ex.Client, Error: ex.Error, CreatedAt: ex.CreatedAt,
		ApprovedAt: ex.ApprovedAt, ExpiresAt: ex.ExpiresAt, StartedAt: ex.StartedAt, FinishedAt: ex.FinishedAt, Runner: ex.Runner}
	if ex.Status == executions.AwaitingApproval {
		x.Phrase = ex.ConfirmationPhrase
	}
	for _, st := range ex.Plan.Steps {
		x.PlanSteps = append(x.PlanSteps, views.ExecutionBrief{Tool: st.Tool, Server: st.Server, Risk: string(st.Risk.Level), RiskWhy: st.Risk.Why})
	}
	// Results larger than a page shows of one are read one at a time, and only as far as
	// they are shown (executionStepView): fifty near a message's cap would be most of a
	// gigabyte.
	list := h.Executions.StepsSized
	if !results {
		list = h.Executions.StepsBrief // a progress fragment: not even read
	}
	steps, err := list(ctx, ex.ID)
	if err != nil {
		return x, err
	}
	// Every event re-sends the results to every viewer: they are bounded
	// (views.BoundExecutionResult), the run's then the rollback's, each read and masked
	// only as far as it can be shown.
	total := views.ExecResultsShown
	for _, phase := range []string{executions.PhaseRun, executions.PhaseRollback} {
		for _, st := range steps {
			if (st.Phase == executions.PhaseRollback) != (phase == executions.PhaseRollback) {
				continue
			}
			sv, masked, err := executionStepView(st, results, private, whole, &total, func() (json.RawMessage, error) {
				return h.Executions.StepResult(ctx, ex.ID, st.ID)
			})
			if err != nil {
				return x, err
			}
			// A live fragment that masked a result has each page ask for it as its viewer:
			// the requester reads it whole.
			x.Withheld = x.Withheld || sv.Withheld || viewer == nil && masked
			if st.CallID != nil && st.Status == executions.StepRunning {
				sv.Progress = progress[*st.CallID]
			}
			if phase == executions.PhaseRollback {
				x.RollbackSteps = append(x.RollbackSteps, sv)
			} else {
				x.Steps = append(x.Steps, sv)
			}
		}
	}
	if ex.Status == executions.Failed {
		cur, rp, err := h.Executions.PlanRollback(ctx, ex.ID)
		_, conflict := executions.ConflictStatus(err)
		switch {
		case conflict:
			// It moved on since it was read; the event that says so renders it again.
		case err != nil:
			return x, err
		default:
			// A person who may roll it back reads its arguments whole (as GET …/rollback);
			// a live fragment that masked some has each page ask for the panel.
			m := h.masker(executions.RevealsRollbackArgs(viewer))
			// What an undo step puts back is shown as the plan's diffs are.
			diffs := executions.RevealsRollbackArgs(viewer) || cur.RevealsBuiltinResults(viewer)
			var withheld bool
			if x.Rollback, withheld, err = rollbackView(ctx, m, cur, rp, diffs); err != nil {
				return x, err
			}
			x.Withheld = x.Withheld || viewer == nil && (m.masked || withheld)
		}
	}
	return x, nil
}

// secretMasker masks the secret arguments (tools.ArgMasker) of the steps pages and the
// API show, unless reveal. What is stored and run is unchanged.
type secretMasker struct {
	*tools.ArgMasker
	reveal bool
	masked bool // some arguments were changed by masking
}

func (h ExecutionsHandler) masker(reveal bool) *secretMasker {
	return &secretMasker{ArgMasker: h.Tools.NewArgMasker(), reveal: reveal}
}

// Mask is args masked, or as they are when the masker reveals. planned are where the
// step's plan recorded its arguments secret (executions.PlannedStep.SecretArgs), masked
// whatever the tool's definition says now (tools.ArgMasker.MaskStep).
func (m *secretMasker) Mask(ctx context.Context, toolID, tool string, planned []string, args json.RawMessage) (json.RawMessage, error) {
	if m.reveal {
		return args, nil
	}
	out, err := m.ArgMasker.MaskStep(ctx, toolID, tool, planned, args)
	// Compared as values: masking re-encodes what it reads.
	if err == nil && !m.masked && !canonjson.Equal(args, out) {
		m.masked = true
	}
	return out, err
}

// step is a stored step of ex's arguments, masked.
func (m *secretMasker) step(ctx context.Context, ex *executions.Execution, st executions.Step) (json.RawMessage, error) {
	var id string
	if st.ToolID != nil {
		id = *st.ToolID
	}
	return m.Mask(ctx, id, st.Tool, plannedSecrets(ex, st), st.Arguments)
}

// plannedSecrets is where the plan step stored as st recorded its arguments secret: a
// run step is the plan's step at its position, a rollback step the approved rollback's
// (undoSecrets: with the plan's own undo step's).
func plannedSecrets(ex *executions.Execution, st executions.Step) []string {
	switch {
	case st.Position < 0:
	case st.Phase == executions.PhaseRun && st.Position < len(ex.Plan.Steps):
		return ex.Plan.Steps[st.Position].SecretArgs
	case st.Phase == executions.PhaseRollback && ex.RollbackPlan != nil && st.Position < len(ex.RollbackPlan.Steps):
		return undoSecrets(ex, ex.RollbackPlan.Steps[st.Position])
	}
	return nil
}

// undoSecrets is where a rollback plan's step st recorded its arguments secret, and,
// when it is the plan's own undo step (ex.Plan.Rollback) of the same tool, where that
// recorded them when the plan was made: a rollback plan is prepared when it is looked
// at or run, from the tool's definition as it is then.
func undoSecrets(ex *executions.Execution, st executions.PlannedStep) []string {
	out := st.SecretArgs
	if ex == nil || st.Undoes == nil {
		return out
	}
	for _, u := range ex.Plan.Rollback {
		if u.Undoes != nil && *u.Undoes == *st.Undoes && u.ToolID == st.ToolID {
			out = slices.Concat(out, u.SecretArgs)
		}
	}
	return out
}

// stepResult is a stored step's result (executions' runStep).
type stepResult struct {
	Content           []router.Content `json:"content"`
	StructuredContent json.RawMessage  `json:"structured_content"`
	IsError           bool             `json:"is_error"`
}

// stepResultShown is st's stored result as a viewer reads it: whole when whole (its
// requester: RevealsResults) or a built-in tool's (withheld or not by WithholdsResult),
// else masked by usage.Redact; masked says masking changed it.
func stepResultShown(st executions.Step, whole bool) (res json.RawMessage, masked bool) {
	if whole || executions.PrivateResult(st.Tool) || len(st.Result) == 0 || string(st.Result) == "null" {
		return st.Result, false
	}
	return usage.RedactChanged(st.Result) // (a picture's or a sound's data kept)
}

// stepResultCut is stepResultShown of about limit bytes of st's result (usage.Cut,
// usage.RedactCut): a page shows no more, and masking all of a large result for every
// event cost seconds. cut says some was left out.
func stepResultCut(st executions.Step, whole bool, limit int) (res json.RawMessage, masked, cut bool) {
	if len(st.Result) == 0 || string(st.Result) == "null" {
		return st.Result, false, false
	}
	if whole || executions.PrivateResult(st.Tool) {
		res, cut = usage.Cut(st.Result, limit)
		return res, false, cut
	}
	return usage.RedactCut(st.Result, limit)
}

// executionStepView is st as its page shows it, its result bounded with what is left
// of total (views.BoundExecutionResult); masked says its result was masked
// (stepResultShown). A result not read with st (StepsSized) is read by load, only
// when some of it is shown.
func executionStepView(st executions.Step, results, private, whole bool, total *int,
	load func() (json.RawMessage, error)) (sv views.ExecutionStepView, masked bool, err error) {
	sv = views.ExecutionStepView{Position: st.Position, Tool: st.Tool, Status: st.Status, Risk: st.Risk, Error: st.Error,
		Undoes: st.Undoes}
	if st.ToolID != nil {
		sv.ToolID = *st.ToolID
	}
	if st.DurationMS != nil {
		d := float64(*st.DurationMS)
		sv.DurationMS = &d
	}
	if !results {
		sv.HasResult = st.HasResult
		return sv, false, nil
	}
	if executions.WithholdsResult(st, private) {
		sv.HasResult, sv.Withheld = true, true
		return sv, false, nil
	}
	size := len(st.Result)
	if st.Result == nil {
		size = st.ResultBytes
	}
	left := min(views.ExecResultShown, *total)
	if left < views.ExecResultMin && size > left && st.HasResult {
		// It would be left out (unless masking shrank it): not read at all.
		sv.HasResult, sv.ResultOmitted, sv.ResultSize = true, true, size
		return sv, false, nil
	}
	if st.Result == nil && st.HasResult {
		if st.Result, err = load(); err != nil {
			return sv, false, err
		}
	}
	shown, masked, cut := stepResultCut(st, whole, left)
	var res stepResult
	if len(shown) > 0 && string(shown) != "null" && json.Unmarshal(shown, &res) == nil {
		sv.HasResult, sv.IsError = true, res.IsError
		for _, c := range res.Content {
			sv.Outputs = append(sv.Outputs, outputView(c))
		}
		if s := strings.TrimSpace(string(res.StructuredContent)); s != "" && s != "null" {
			sv.Structured = indentJSON(res.StructuredContent)
		}
	}
	views.BoundExecutionResult(&sv, total)
	if cut && !sv.ResultOmitted {
		if !sv.ResultShortened {
			sv.ResultShortened, sv.ResultShown = true, sv.ResultSize
		}
		sv.ResultSize = max(sv.ResultSize, size)
	}
	return sv, masked, nil
}

// executionPreview is the ActionPreviewCard: every step with how it would be undone,
// for viewer, or for every viewer when nil (a live fragment). A built-in file write's
// diff holds the requester's file as it was: it is shown to whoever sees the step's
// result (RevealsBuiltinResults) or decides the plan (RevealsSecretArgs); withheld
// says a diff was left out.
func (h ExecutionsHandler) executionPreview(ctx context.Context, ex *executions.Execution, viewer *auth.Principal) (out []views.ExecutionPreviewStep, withheld bool, err error) {
	reveal := ex.RevealsSecretArgs(viewer)
	diffs := reveal || ex.RevealsBuiltinResults(viewer)
	out = make([]views.ExecutionPreviewStep, 0, len(ex.Plan.Steps))
	comps := map[string]*views.ExecutionUndo{}
	m := h.masker(reveal)
	for i, st := range ex.Plan.Steps {
		pv, err := m.previewStep(ctx, i, st.Prepared, st.SecretArgs)
		if err != nil {
			return nil, false, err
		}
		pv.Undo = views.ExecutionUndo{Kind: "none"}
		if st.Preview != nil {
			if diffs {
				pv.Diff = views.NewDiff(st.Preview.Path, st.Preview.Diff)
			} else {
				pv.DiffWithheld, withheld = st.Preview.Path, true
			}
			pv.Undo = views.ExecutionUndo{Kind: "snapshot"} // a built-in file write undoes itself
		}
		for _, u := range ex.Plan.Rollback {
			if u.Undoes != nil && *u.Undoes == i {
				args, err := m.Mask(ctx, u.ToolID, u.Tool, u.SecretArgs, u.Effective)
				if err != nil {
					return nil, false, err
				}
				pv.Undo = views.ExecutionUndo{Kind: "step", Tool: u.Tool, ToolID: u.ToolID, Arguments: compactJSON(args)}
			}
		}
		if pv.Undo.Kind == "none" && st.ToolID != "" {
			u, ok := comps[st.ToolID]
			if !ok {
				var err error
				if u, err = h.compensationUndo(ctx, st.ToolID); err != nil {
					return nil, false, err
				}
				comps[st.ToolID] = u
			}
			if u != nil {
				pv.Undo = *u
			}
		}
		out = append(out, pv)
	}
	return out, withheld, nil
}

// compensationUndo is the compensation configured for a tool, or nil.
func (h ExecutionsHandler) compensationUndo(ctx context.Context, toolID string) (*views.ExecutionUndo, error) {
	comp, err := h.Executions.CompensationOf(ctx, toolID)
	if errors.Is(err, tools.ErrNotFound) || (err == nil && comp == nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	u := &views.ExecutionUndo{Kind: "compensation", Tool: comp.UndoToolID, ToolID: comp.UndoToolID}
	if t, err := h.Tools.Target(ctx, comp.UndoToolID); err == nil {
		u.Tool = t.QualifiedName()
	} else if !errors.Is(err, tools.ErrNotFound) {
		return nil, err
	}
	return u, nil
}

// previewStep is a prepared step as a preview shows it, its secrets (and planned, where
// its plan recorded them) masked.
func (m *secretMasker) previewStep(ctx context.Context, i int, p router.Prepared, planned []string) (views.ExecutionPreviewStep, error) {
	args, err := m.Mask(ctx, p.ToolID, p.Tool, planned, p.Effective)
	if err != nil {
		return views.ExecutionPreviewStep{}, err
	}
	return views.ExecutionPreviewStep{Position: i, Tool: p.Tool, ToolID: p.ToolID, Server: p.Server,
		Arguments: indentJSON(args), Risk: string(p.Risk.Level), RiskWhy: p.Risk.Why, RiskSource: p.Risk.Source}, nil
}

func compactJSON(raw json.RawMessage) string {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		return "{}"
	}
	return s
}

// rollbackView is the RollbackPanel of a failed execution ex, with what its undo
// steps change unless diffs is false (withheld: a diff was left out).
func rollbackView(ctx context.Context, m *secretMasker, ex *executions.Execution, rp *executions.RollbackPlan, diffs bool) (out *views.ExecutionRollbackPlan, withheld bool, err error) {
	out = &views.ExecutionRollbackPlan{Missing: rp.Missing, Risk: string(rp.Risk), RiskWhy: rp.RiskWhy, Phrase: rp.Phrase, Hash: rp.Hash}
	for _, st := range rp.Steps {
		pv, err := m.previewStep(ctx, 0, st.Prepared, undoSecrets(ex, st))
		if err != nil {
			return nil, false, err
		}
		if st.Preview != nil {
			if diffs {
				pv.Diff = views.NewDiff(st.Preview.Path, st.Preview.Diff)
			} else {
				pv.DiffWithheld, withheld = st.Preview.Path, true
			}
		}
		if st.Undoes != nil {
			pv.Position = *st.Undoes
			u := *st.Undoes
			pv.Undoes = &u
		}
		out.Steps = append(out.Steps, pv)
	}
	var ve *verr.Error
	if errors.As(rp.Problems, &ve) {
		for _, f := range ve.Fields {
			out.Problems = append(out.Problems, views.ExecutionFieldError{Path: f.Field, Message: f.Message})
		}
	} else if rp.Problems != nil {
		out.Problems = []views.ExecutionFieldError{{Message: rp.Problems.Error()}}
	}
	if len(rp.Steps) == 0 {
		out.Nothing = "no step completed"
		if len(rp.Missing) > 0 {
			out.Nothing = "nothing undoes the steps that ran"
		}
	}
	return out, withheld, nil
}

// decisionToast reports whether ev decides an execution (approved, rejected, cancelled,
// expired) and the kind of toast it shows ("" for none: an approval by policy follows
// the plan at once and needs no news).
func decisionToast(ev events.Event) (toast string, decided bool) {
	switch ev.Kind {
	case string(events.ApprovalGranted):
		if g, err := events.ApprovalGranted.Decode(ev); err == nil && g.Approval == "policy" {
			return "", true
		}
		return "info", true
	case string(events.ApprovalRejected):
		return "error", true
	case string(events.ExecutionCancelled), string(events.ExecutionExpired):
		return "info", true
	}
	return "", false
}

// executionParts renders an event of one execution's topic for its page: every part
// that follows the execution, from the database (so events that arrive in any order
// converge), and the event's log line.
func (l Live) executionParts(ctx context.Context, ev events.Event) ([]templ.Component, error) {
	id := strings.TrimPrefix(ev.Topic, executions.TopicOf(""))
	h := ExecutionsHandler{Shell: l.Deps.Shell(), Tools: l.Tools}
	ex, err := l.Executions.Get(ctx, id)
	if errors.Is(err, executions.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	// A progress fragment is the stepper alone: the results are neither parsed nor shown.
	// Rendered once for every viewer: what some may see is withheld, and the page asks
	// for it as its viewer (Results) when there is any.
	x, err := h.executionView(ctx, ex, progressText(ev), !events.ToolOutput.Is(ev), nil)
	if err != nil {
		return nil, err
	}
	line := executionLogLine(ev)
	if events.ToolOutput.Is(ev) {
		// A long step may report progress many times a second, to every page that
		// follows it: only what progress changes is sent (and redrawn).
		return []templ.Component{views.LiveExecutionProgress(x, &line)}, nil
	}
	// A decision masks the secret arguments again (whoever read them while deciding no
	// longer does) and replaces the approval controls someone may be using on this page
	// (an open dialog, a phrase being typed): a toast (unless toast is "") says who decided.
	// Its preview leaves the diffs out (the requester's files): each page then asks for
	// it as its viewer, with the results, through LiveExecution's one loader.
	toast, decided := decisionToast(ev)
	var preview []views.ExecutionPreviewStep
	if decided {
		var withheld bool
		if preview, withheld, err = h.executionPreview(ctx, ex, nil); err != nil {
			return nil, err
		}
		x.PreviewWithheld = withheld
	}
	parts := []templ.Component{views.LiveExecution(x, &line)}
	if decided {
		parts = append(parts, views.LiveExecutionPreview(x, preview))
		if toast != "" {
			parts = append(parts, views.LiveToast(toast, line.Text))
		}
	}
	switch ev.Kind {
	case string(events.ExecutionSucceeded):
		parts = append(parts, views.LiveToast("success", "The execution finished: every step succeeded."))
	case string(events.ExecutionFailed):
		parts = append(parts, views.LiveToast("error", "The execution failed: "+ex.Error))
	case string(events.RollbackCompleted):
		parts = append(parts, views.LiveToast("success", "The execution was rolled back."))
	case string(events.RollbackFailed):
		parts = append(parts, views.LiveToast("error", "The rollback failed: "+ex.Error))
	}
	return parts, nil
}
