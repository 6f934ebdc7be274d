package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/a-h/templ"
	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/planner"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/verr"
	"github.com/toolwarden/toolwarden/views"
	"github.com/toolwarden/toolwarden/web/httperr"
)

// The pages of one execution (seed 003's Safe Action flow): /executions/new and
// /executions/:id with its decisions. The API is in executions_api.go, the lists in
// executions_list.go.

const (
	// execToolHints bounds the tools the new-execution page lists.
	execToolHints = 40
	// execLogBatch and execLogMax bound the stored events a page reads for its log;
	// execLogShown is how many of the newest it shows.
	execLogBatch = 1000
	execLogMax   = 20000
	execLogShown = 1000
)

// New renders the empty form: a prompt, or a plan as JSON.
func (h ExecutionsHandler) New(c echo.Context) error {
	p := views.ExecutionNewPage{Mode: "prompt", Prompt: c.QueryParam("prompt")}
	return h.newPage(c, http.StatusOK, p)
}

func (h ExecutionsHandler) newPage(c echo.Context, status int, p views.ExecutionNewPage) error {
	p.Layout = h.layout(c, "New execution")
	page, err := h.Tools.List(c.Request().Context(), tools.Query{Status: []string{"enabled"}, Limit: execToolHints})
	if err != nil {
		return err
	}
	for _, t := range page.Items {
		desc := t.Description
		if r := []rune(desc); len(r) > 120 {
			desc = string(r[:120]) + "…"
		}
		p.Tools = append(p.Tools, views.ExecutionToolHint{ID: t.ID, Name: t.QualifiedName(), Description: desc, Risk: string(t.Risk().Level)})
	}
	p.MoreTools = page.NextCursor != ""
	return render(c, status, views.ExecutionNew(p))
}

// Create plans the prompt (or takes the JSON plan), stores it and shows it. Input the
// planner or the router refuses comes back on the form, as typed, with what is wrong.
func (h ExecutionsHandler) Create(c echo.Context) error {
	p := views.ExecutionNewPage{Mode: c.FormValue("mode"), Prompt: c.FormValue("prompt"), Plan: c.FormValue("plan")}
	var in executions.Input
	if p.Mode == "plan" {
		req, perr := parsePlanText(p.Plan)
		if perr != nil {
			p.Error = perr
			return h.newPage(c, http.StatusBadRequest, p)
		}
		in.Plan = req
	} else {
		p.Mode = "prompt"
		in.Prompt = p.Prompt
	}
	ex, err := h.Executions.Create(c.Request().Context(), callerOf(c), in)
	if err != nil {
		ie, status, ok := execInputError(p.Prompt, err)
		if !ok {
			return err
		}
		p.Error = ie
		return h.newPage(c, status, p)
	}
	msg := "Planned. It is low risk, so it was approved by policy and runs now."
	switch ex.Risk {
	case "medium":
		msg = "Planned. It is medium risk: it runs once someone who may approve executions confirms it."
	case "high":
		msg = "Planned. It is high risk: it runs once someone who may approve executions types its confirmation phrase."
	}
	setFlash(c, "success", msg, h.SecureCookies)
	return c.Redirect(http.StatusSeeOther, "/executions/"+ex.ID)
}

// parsePlanText reads the JSON plan of the form; the error says where it is wrong.
func parsePlanText(text string) (*executions.Request, *views.ExecutionInputError) {
	if strings.TrimSpace(text) == "" {
		return nil, &views.ExecutionInputError{Message: `The plan is empty. Give it as {"steps": [{"tool": "server__tool", "arguments": {...}}]}, or write a prompt instead.`}
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	var req executions.Request
	err := dec.Decode(&req)
	if err == nil {
		if _, extra := dec.Token(); extra != io.EOF {
			err = errors.New("there is more after the plan's closing brace")
		}
	}
	if err == nil {
		return &req, nil
	}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	msg := strings.TrimPrefix(err.Error(), "json: ")
	switch {
	case errors.As(err, &se):
		line, col := lineCol(text, se.Offset)
		msg = fmt.Sprintf("%s (line %d, column %d)", msg, line, col)
	case errors.As(err, &te):
		where := te.Field
		if where == "" {
			where = "the plan"
		}
		msg = fmt.Sprintf("%s must be %s, not %s", where, jsonKind(te.Type.Kind().String()), te.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		msg = "it ends too early: a brace or bracket is not closed"
	}
	return nil, &views.ExecutionInputError{Message: "The plan is not valid JSON of the documented shape: " + msg + "."}
}

// lineCol turns a byte offset into a 1-based line and column.
func lineCol(s string, off int64) (int, int) {
	if off > int64(len(s)) {
		off = int64(len(s))
	}
	before := s[:off]
	line := strings.Count(before, "\n") + 1
	col := len([]rune(before[strings.LastIndex(before, "\n")+1:]))
	return line, max(col, 1)
}

func jsonKind(k string) string {
	switch k {
	case "slice":
		return "a list"
	case "struct", "map":
		return "an object"
	case "string":
		return "a string"
	case "int", "int64":
		return "a whole number"
	}
	return k
}

// execInputError is what the form says about input Create refused, with its status;
// ok is false for errors that are not the person's to fix.
func execInputError(prompt string, err error) (*views.ExecutionInputError, int, bool) {
	nu, isNU := planner.NotUnderstoodIn(err)
	pe, _ := fault.As(err)
	var ve *verr.Error
	switch {
	case isNU:
		ie := &views.ExecutionInputError{Message: nu.Message}
		if nu.Fragment != "" && nu.Offset >= 0 && nu.Offset <= len(prompt) && strings.HasPrefix(prompt[nu.Offset:], nu.Fragment) {
			ie.Before, ie.Fragment, ie.After = prompt[:nu.Offset], nu.Fragment, prompt[nu.Offset+len(nu.Fragment):]
		}
		return ie, http.StatusUnprocessableEntity, true
	case pe != nil && pe.Code == executions.CodePlanner:
		// The planner failed, not the person: 502, with the form kept to try again.
		return &views.ExecutionInputError{Message: httperr.Sentence(pe.Message)}, http.StatusBadGateway, true
	case errors.As(err, &ve):
		ie := &views.ExecutionInputError{Message: "The plan was not accepted; fix what is listed below."}
		for _, f := range ve.Fields {
			ie.Fields = append(ie.Fields, views.ExecutionFieldError{Path: f.Field, Message: f.Message})
		}
		return ie, http.StatusUnprocessableEntity, true
	}
	return nil, 0, false
}

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
	x, err := h.executionView(ctx, ex, nil)
	if err != nil {
		return err
	}
	preview, err := h.executionPreview(ctx, ex)
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
		Mine: ex.RequestedBy != nil && *ex.RequestedBy == p.User.ID}
	v.Live.LastEventID = last
	return render(c, http.StatusOK, views.ExecutionDetail(v))
}

// executionLog is the log of topic up to event last: its newest lines and how many
// older ones are left out.
func (h ExecutionsHandler) executionLog(ctx context.Context, topic string, last int64) ([]views.ExecutionLogLine, int, error) {
	var lines []views.ExecutionLogLine
	after := int64(0)
	for read := 0; read < execLogMax; {
		evs, err := h.Events.Since(ctx, after, []string{topic}, execLogBatch)
		if err != nil {
			return nil, 0, err
		}
		for _, ev := range evs {
			if ev.ID > last {
				return trimLog(lines)
			}
			lines = append(lines, executionLogLine(ev))
		}
		if len(evs) < execLogBatch {
			break
		}
		read += len(evs)
		after = evs[len(evs)-1].ID
	}
	return trimLog(lines)
}

func trimLog(lines []views.ExecutionLogLine) ([]views.ExecutionLogLine, int, error) {
	if len(lines) > execLogShown {
		return lines[len(lines)-execLogShown:], len(lines) - execLogShown, nil
	}
	return lines, 0, nil
}

// executionView is the live part of the page, from the database. progress holds the
// latest progress report by call id (a tool.output event's).
func (h ExecutionsHandler) executionView(ctx context.Context, ex *executions.Execution, progress map[string]string) (views.ExecutionView, error) {
	x := views.ExecutionView{ID: ex.ID, Title: ex.Title(), Status: string(ex.Status), Risk: ex.Risk, RiskWhy: ex.RiskWhy,
		Requester: ex.RequesterName, RequesterKind: ex.RequesterKind, Planner: ex.Planner, PlanHash: ex.Hash(),
		Approval: ex.Approval, Approver: ex.ApproverName, SelfApproved: ex.SelfApproved, Reason: ex.Reason, Error: ex.Error, CreatedAt: ex.CreatedAt,
		ApprovedAt: ex.ApprovedAt, ExpiresAt: ex.ExpiresAt, StartedAt: ex.StartedAt, FinishedAt: ex.FinishedAt}
	if ex.Status == executions.AwaitingApproval {
		x.Phrase = ex.ConfirmationPhrase
	}
	for _, st := range ex.Plan.Steps {
		x.PlanSteps = append(x.PlanSteps, views.ExecutionBrief{Tool: st.Tool, Server: st.Server, Risk: string(st.Risk.Level), RiskWhy: st.Risk.Why})
	}
	steps, err := h.Executions.Steps(ctx, ex.ID)
	if err != nil {
		return x, err
	}
	for _, st := range steps {
		sv := executionStepView(st)
		if st.CallID != nil && st.Status == executions.StepRunning {
			sv.Progress = progress[*st.CallID]
		}
		if st.Phase == executions.PhaseRollback {
			x.RollbackSteps = append(x.RollbackSteps, sv)
		} else {
			x.Steps = append(x.Steps, sv)
		}
	}
	if ex.Status == executions.Failed {
		_, rp, err := h.Executions.PlanRollback(ctx, ex.ID)
		_, conflict := executions.ConflictStatus(err)
		switch {
		case conflict:
			// It moved on since it was read; the event that says so renders it again.
		case err != nil:
			return x, err
		default:
			x.Rollback = rollbackView(rp)
		}
	}
	return x, nil
}

// stepResult is a stored step's result (executions' runStep).
type stepResult struct {
	Content           []router.Content `json:"content"`
	StructuredContent json.RawMessage  `json:"structured_content"`
	IsError           bool             `json:"is_error"`
}

func executionStepView(st executions.Step) views.ExecutionStepView {
	sv := views.ExecutionStepView{Position: st.Position, Tool: st.Tool, Status: st.Status, Risk: st.Risk, Error: st.Error,
		Undoes: st.Undoes, Arguments: indentJSON(st.Arguments)}
	if st.ToolID != nil {
		sv.ToolID = *st.ToolID
	}
	if st.DurationMS != nil {
		d := float64(*st.DurationMS)
		sv.DurationMS = &d
	}
	var res stepResult
	if len(st.Result) > 0 && string(st.Result) != "null" && json.Unmarshal(st.Result, &res) == nil {
		sv.HasResult, sv.IsError = true, res.IsError
		for _, c := range res.Content {
			sv.Outputs = append(sv.Outputs, outputView(c))
		}
		if s := strings.TrimSpace(string(res.StructuredContent)); s != "" && s != "null" {
			sv.Structured = indentJSON(res.StructuredContent)
		}
	}
	return sv
}

// executionPreview is the ActionPreviewCard: every step with how it would be undone.
func (h ExecutionsHandler) executionPreview(ctx context.Context, ex *executions.Execution) ([]views.ExecutionPreviewStep, error) {
	out := make([]views.ExecutionPreviewStep, 0, len(ex.Plan.Steps))
	comps := map[string]*views.ExecutionUndo{}
	for i, st := range ex.Plan.Steps {
		pv := previewStep(i, st.Prepared)
		pv.Undo = views.ExecutionUndo{Kind: "none"}
		for _, u := range ex.Plan.Rollback {
			if u.Undoes != nil && *u.Undoes == i {
				pv.Undo = views.ExecutionUndo{Kind: "step", Tool: u.Tool, ToolID: u.ToolID, Arguments: compactJSON(u.Effective)}
			}
		}
		if pv.Undo.Kind == "none" && st.ToolID != "" {
			u, ok := comps[st.ToolID]
			if !ok {
				var err error
				if u, err = h.compensationUndo(ctx, st.ToolID); err != nil {
					return nil, err
				}
				comps[st.ToolID] = u
			}
			if u != nil {
				pv.Undo = *u
			}
		}
		out = append(out, pv)
	}
	return out, nil
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

func previewStep(i int, p router.Prepared) views.ExecutionPreviewStep {
	return views.ExecutionPreviewStep{Position: i, Tool: p.Tool, ToolID: p.ToolID, Server: p.Server,
		Arguments: indentJSON(p.Effective), Risk: string(p.Risk.Level), RiskWhy: p.Risk.Why, RiskSource: p.Risk.Source}
}

func compactJSON(raw json.RawMessage) string {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		return "{}"
	}
	return s
}

// rollbackView is the RollbackPanel of a failed execution.
func rollbackView(rp *executions.RollbackPlan) *views.ExecutionRollbackPlan {
	out := &views.ExecutionRollbackPlan{Missing: rp.Missing, Risk: string(rp.Risk), RiskWhy: rp.RiskWhy, Phrase: rp.Phrase, Hash: rp.Hash}
	for _, st := range rp.Steps {
		pv := previewStep(0, st.Prepared)
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
			out.Nothing = "the plan has no undo step for the completed steps, and their tools have no compensation"
		}
	}
	return out
}

// executionLogLine is the log line of one event of an execution's topic: one of the
// executions' kinds or the router's call events (events catalogue). An event that
// does not decode gets a line too, its kind.
func executionLogLine(ev events.Event) views.ExecutionLogLine {
	l := views.ExecutionLogLine{EventID: ev.ID, At: ev.CreatedAt, Kind: ev.Kind, Level: "info", Text: ev.Kind}
	switch ev.Kind {
	case string(events.PlanCreated):
		if p, err := events.PlanCreated.Decode(ev); err == nil {
			l.Text = fmt.Sprintf("Plan created by %s: %d step(s)", p.Requester, p.Steps)
			if p.Risk != "" {
				l.Text += ", " + p.Risk + " risk"
			}
		}
	case string(events.ApprovalRequested):
		p, _ := events.ApprovalRequested.Decode(ev)
		l.Text, l.Level = "Waiting for approval ("+p.Risk+" risk)", "warn"
	case string(events.ApprovalGranted):
		p, _ := events.ApprovalGranted.Decode(ev)
		l.Level = "ok"
		switch p.Approval {
		case "policy":
			l.Text = "Approved by policy: every step is low risk"
		case "phrase":
			l.Text = "Approved by " + p.Approver + " with the typed phrase"
		default:
			l.Text = "Confirmed by " + p.Approver
		}
		if p.SelfApproved {
			l.Text += " (its own requester: nobody else could approve it)"
		}
	case string(events.ApprovalRejected):
		p, _ := events.ApprovalRejected.Decode(ev)
		l.Text, l.Level = "Rejected by "+p.By+": "+p.Reason, "error"
	case string(events.ExecutionCancelled):
		p, _ := events.ExecutionCancelled.Decode(ev)
		l.Text, l.Level = "Cancelled", "warn"
		if p.By != "" {
			l.Text += " by " + p.By
		}
		if p.Reason != "" {
			l.Text += ": " + p.Reason
		}
	case string(events.ExecutionExpired):
		l.Text, l.Level = "Expired: nobody approved it in time", "warn"
	case string(events.ExecutionSucceeded):
		l.Text, l.Level = "Finished: every step succeeded", "ok"
	case string(events.ExecutionFailed):
		p, _ := events.ExecutionFailed.Decode(ev)
		l.Text, l.Level = "Failed: "+p.Error, "error"
	case string(events.RollbackStarted):
		l.Text = "Rollback started"
		if p, err := events.RollbackStarted.Decode(ev); err == nil {
			l.Text += fmt.Sprintf(": %d undo step(s)", p.Steps)
			if len(p.NotUndone) > 0 {
				l.Text += "; nothing undoes " + strings.Join(p.NotUndone, ", ")
			}
		}
	case string(events.RollbackCompleted):
		l.Text, l.Level = "Rolled back", "ok"
	case string(events.RollbackFailed):
		p, _ := events.RollbackFailed.Decode(ev)
		l.Text, l.Level = "Rollback failed: "+p.Error, "error"
	case string(events.ToolStarted):
		p, _ := events.ToolStarted.Decode(ev)
		l.Text = p.Tool + " started"
	case string(events.ToolOutput):
		p, _ := events.ToolOutput.Decode(ev)
		l.Text = p.Tool + ": "
		if p.Progress.Message != "" {
			l.Text += p.Progress.Message
		} else {
			l.Text += "working"
		}
		if p.Progress.Total > 0 {
			l.Text += fmt.Sprintf(" (%g of %g)", p.Progress.Progress, p.Progress.Total)
		}
	case string(events.ToolCompleted):
		p, _ := events.ToolCompleted.Decode(ev)
		dur := fmt.Sprintf(" in %.1f ms", p.DurationMS)
		if p.IsError {
			l.Text, l.Level = p.Tool+" reported an error"+dur, "error"
		} else {
			l.Text, l.Level = p.Tool+" completed"+dur, "ok"
		}
		if p.Summary != "" {
			l.Text += ": " + p.Summary
		}
	case string(events.ToolFailed):
		p, _ := events.ToolFailed.Decode(ev)
		l.Text, l.Level = p.Tool+" failed", "error"
		if p.Code != "" {
			l.Text += " (" + p.Code + ")"
		}
		if p.Message != "" {
			l.Text += ": " + p.Message
		}
	}
	return l
}

// progressText is a tool.output event's progress for the stepper, by call id.
func progressText(ev events.Event) map[string]string {
	if !events.ToolOutput.Is(ev) {
		return nil
	}
	p, err := events.ToolOutput.Decode(ev)
	if err != nil || p.CallID == "" {
		return nil
	}
	t := p.Progress.Message
	if p.Progress.Total > 0 {
		if t != "" {
			t += " · "
		}
		t += fmt.Sprintf("%.0f%%", 100*p.Progress.Progress/p.Progress.Total)
	}
	return map[string]string{p.CallID: t}
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
	x, err := h.executionView(ctx, ex, progressText(ev))
	if err != nil {
		return nil, err
	}
	line := executionLogLine(ev)
	parts := []templ.Component{views.LiveExecution(x, &line)}
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

// The decisions the page posts. Each redirects back to the page with a flash: what
// happened, or why nothing did.

// ConfirmForm approves: the plan hash the page showed and, for HIGH, the typed phrase.
func (h ExecutionsHandler) ConfirmForm(c echo.Context) error {
	return h.pageDecision(c, "Not approved", func(ctx context.Context, who executions.Caller, id string) (*executions.Execution, error) {
		return h.Executions.Confirm(ctx, who, id, c.FormValue("phrase"), c.FormValue("plan_hash"))
	}, func(*executions.Execution) string { return "Approved: the plan is running." })
}

// RejectForm turns a plan down with a reason.
func (h ExecutionsHandler) RejectForm(c echo.Context) error {
	return h.pageDecision(c, "Not rejected", func(ctx context.Context, who executions.Caller, id string) (*executions.Execution, error) {
		return h.Executions.Reject(ctx, who, id, c.FormValue("reason"))
	}, func(*executions.Execution) string { return "Rejected: nothing of the plan runs." })
}

// CancelForm withdraws a plan waiting for approval or stops a running one.
func (h ExecutionsHandler) CancelForm(c echo.Context) error {
	return h.pageDecision(c, "Not cancelled", func(ctx context.Context, who executions.Caller, id string) (*executions.Execution, error) {
		return h.Executions.Cancel(ctx, who, id, c.FormValue("reason"))
	}, func(ex *executions.Execution) string {
		if ex.StartedAt != nil {
			return "Cancelled: the step that was running finishes, and no further step starts."
		}
		return "Cancelled: nothing of the plan runs."
	})
}

// RollbackForm starts the rollback of a failed execution: confirm for MEDIUM undo
// steps, the phrase for HIGH.
func (h ExecutionsHandler) RollbackForm(c echo.Context) error {
	return h.pageDecision(c, "Not rolled back", func(ctx context.Context, who executions.Caller, id string) (*executions.Execution, error) {
		return h.Executions.Rollback(ctx, who, id, executions.RollbackDecision{Confirmed: c.FormValue("confirm") != "",
			Phrase: c.FormValue("phrase"), Hash: c.FormValue("rollback_hash")})
	}, func(*executions.Execution) string {
		return "Rollback started: the completed steps are undone, last first."
	})
}

// pageDecision makes a decision and redirects back to the execution with a flash. An
// unknown execution is a 404; refusals a person can act on (a wrong phrase, a conflict,
// a missing reason, not allowed) are error flashes.
func (h ExecutionsHandler) pageDecision(c echo.Context, refused string,
	do func(ctx context.Context, who executions.Caller, id string) (*executions.Execution, error),
	ok func(*executions.Execution) string) error {
	id := c.Param("id")
	if _, err := uuid.Parse(id); err != nil {
		return executions.ErrNotFound
	}
	ex, err := do(c.Request().Context(), callerOf(c), id)
	to := "/executions/" + id
	if errors.Is(err, executions.ErrNotFound) {
		return err
	}
	if err != nil {
		if msg, mine := decisionMessage(refused, err); mine {
			setFlash(c, "error", msg, h.SecureCookies)
			return c.Redirect(http.StatusSeeOther, to)
		}
	}
	return h.redirectWithOutcome(c, err, func() string { return ok(ex) }, to)
}

// decisionMessage says why a decision was refused, for the errors worth saying better
// than userMessage does.
func decisionMessage(refused string, err error) (string, bool) {
	phrase, wrongPhrase := executions.WrongPhrase(err)
	var ve *verr.Error
	switch {
	case wrongPhrase:
		return fmt.Sprintf("%s: the phrase you typed does not match. Type %q exactly (letters, spaces and case); nothing was run.",
			refused, phrase), true
	case errors.As(err, &ve):
		msgs := make([]string, 0, len(ve.Fields))
		for _, f := range ve.Fields {
			msgs = append(msgs, f.Message)
		}
		return refused + ": " + strings.Join(msgs, "; ") + ".", true
	}
	if msg, mine := userMessage(err); mine {
		return refused + ". " + msg, true
	}
	return "", false
}
