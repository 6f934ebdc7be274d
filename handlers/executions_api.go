package handlers

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/services/decide"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/verr"
)

// ExecutionsHandler serves plans, their approval, runs and rollbacks (seed 003's Safe
// Action flow): the API here, the pages in executions.go.
type ExecutionsHandler struct {
	*Shell
	Tools *tools.Service
	// Decide tells a requester up front when someone else must approve their plan.
	Decide *decide.Service
}

// callerOf is who asks, for the execution service.
func callerOf(c echo.Context) executions.Caller {
	return executions.Caller{Actor: ActorOf(c), Role: PrincipalOf(c).User.Role}
}

// createRequest is the body of POST /api/v1/executions (docs/api.md).
type createRequest struct {
	Prompt string              `json:"prompt"`
	Plan   *executions.Request `json:"plan"`
	// ConversationID is the agent conversation the steps run in (the built-in tools'
	// workspace); omitted: the requester's own.
	ConversationID string `json:"conversation_id"`
}

// apiExecution is an execution as the API shows it: docs/api.md's fields first.
type apiExecution struct {
	ID                 string            `json:"id"`
	Status             executions.Status `json:"status"`
	Risk               string            `json:"risk"`
	RiskWhy            string            `json:"risk_why"`
	ConfirmationPhrase string            `json:"confirmation_phrase,omitempty"`
	PlanHash           string            `json:"plan_hash"`
	Title              string            `json:"title"`
	Prompt             string            `json:"prompt,omitempty"`
	Planner            string            `json:"planner,omitempty"`
	Requester          string            `json:"requester"`
	ConversationID     string            `json:"conversation_id,omitempty"`
	Approval           string            `json:"approval,omitempty"`
	Approver           string            `json:"approver,omitempty"`
	SelfApproved       bool              `json:"self_approved,omitempty"` // its requester approved it: nobody else could
	ApprovedAt         *time.Time        `json:"approved_at,omitempty"`
	ExpiresAt          *time.Time        `json:"expires_at,omitempty"`
	Reason             string            `json:"reason,omitempty"`
	Error              string            `json:"error,omitempty"`
	CreatedAt          time.Time         `json:"created_at"`
	StartedAt          *time.Time        `json:"started_at,omitempty"`
	FinishedAt         *time.Time        `json:"finished_at,omitempty"`
	Runner             string            `json:"runner,omitempty"` // the replica that runs or ran it
	Steps              []executions.Step `json:"steps,omitempty"`
	Rollback           []executions.Step `json:"rollback,omitempty"`
	URL                string            `json:"url"`
}

func toAPIExecution(ex *executions.Execution) apiExecution {
	out := apiExecution{ID: ex.ID, Status: ex.Status, Risk: ex.Risk, RiskWhy: ex.RiskWhy, PlanHash: ex.Hash(), Title: ex.Title(),
		Prompt: ex.ShownPrompt(), Planner: ex.Planner, Requester: ex.RequesterName, ConversationID: ex.ConversationID, Approval: ex.Approval, Approver: ex.ApproverName,
		SelfApproved: ex.SelfApproved,
		ApprovedAt:   ex.ApprovedAt, ExpiresAt: ex.ExpiresAt, Reason: ex.Reason, Error: ex.Error, CreatedAt: ex.CreatedAt,
		StartedAt: ex.StartedAt, FinishedAt: ex.FinishedAt, Runner: ex.Runner, URL: "/executions/" + ex.ID}
	if ex.Status == executions.AwaitingApproval {
		out.ConfirmationPhrase = ex.ConfirmationPhrase
	}
	return out
}

// writeExecution answers status with out, the stored steps of ex (the run's, then the
// rollback's) added. It is written as it is read, large results one at a time: an
// execution's results can be fifty near a message's cap, most of a gigabyte held at once.
func (h ExecutionsHandler) writeExecution(c echo.Context, status int, ex *executions.Execution, out apiExecution) error {
	ctx := c.Request().Context()
	// The status goes with the first bytes sent: an error before them is still the error
	// handler's to answer (without a created execution's Location). One after them breaks
	// the transfer: ended cleanly, the answer would be cut JSON under a 200 (as the audit
	// export does).
	sw := &lazyWriter{res: c.Response(), status: status, contentType: echo.MIMEApplicationJSON}
	fail := func(err error) error {
		if !sw.started {
			c.Response().Header().Del(echo.HeaderLocation)
			return err
		}
		h.Logger.Error("handlers: an execution's answer cut off", "execution", ex.ID, "err", err, "request_id", RequestID(c))
		panic(http.ErrAbortHandler)
	}
	steps, err := h.Executions.StepsSized(ctx, ex.ID)
	if err != nil {
		return fail(err)
	}
	// Shown, not run: what is secret is masked (secretMasker), but to a person deciding
	// it, as on its page. Arguments are small: masked before anything is written, so
	// that an error here is still an answer of its own.
	m := h.masker(ex.RevealsSecretArgs(PrincipalOf(c)))
	for i := range steps {
		if steps[i].Arguments, err = m.step(ctx, ex, steps[i]); err != nil {
			return fail(err)
		}
	}
	private, whole := ex.RevealsBuiltinResults(PrincipalOf(c)), ex.RevealsResults(PrincipalOf(c))
	out.Steps, out.Rollback = nil, nil
	head, err := json.Marshal(out)
	if err != nil {
		return fail(err)
	}
	w := bufio.NewWriterSize(sw, 32<<10)
	w.Write(head[:len(head)-1]) // its closing brace comes after the steps
	for _, phase := range []string{executions.PhaseRun, executions.PhaseRollback} {
		n := 0
		for _, st := range steps {
			if st.Phase != phase {
				continue
			}
			if n++; n == 1 && phase == executions.PhaseRollback {
				w.WriteString(`,"rollback":[`)
			} else if n == 1 {
				w.WriteString(`,"steps":[`)
			} else {
				w.WriteByte(',')
			}
			if executions.WithholdsResult(st, private) {
				st.Result, st.ResultWithheld = nil, true // as on its page
			} else if st.HasResult {
				if st.Result == nil {
					if st.Result, err = h.Executions.StepResult(ctx, ex.ID, st.ID); err != nil {
						return fail(err)
					}
				}
				st.Result, _ = stepResultShown(st, whole) // masked but to its requester, as on its page
			}
			b, err := json.Marshal(st)
			if err != nil {
				return fail(err)
			}
			if _, err := w.Write(b); err != nil {
				return fail(err)
			}
		}
		switch {
		case n > 0:
			w.WriteByte(']')
		case phase == executions.PhaseRun:
			w.WriteString(`,"steps":[]`) // always there; "rollback" only once it has steps
		}
	}
	w.WriteString("}\n")
	if err := w.Flush(); err != nil {
		return fail(err)
	}
	return nil
}

// APICreate plans (from a prompt) or takes a plan, stores it and asks for its approval:
// 201 with its id, status, risk and, for HIGH, the phrase a person must type.
func (h ExecutionsHandler) APICreate(c echo.Context) error {
	var in createRequest
	if err := bindJSONStrict(c, &in); err != nil {
		return err
	}
	// A token's plans are capped by the service (executions.DefaultMaxWaiting): past it,
	// 409 too_many_waiting.
	ex, err := h.Executions.Create(c.Request().Context(), callerOf(c), executions.Input{Prompt: in.Prompt, Plan: in.Plan,
		ConversationID: in.ConversationID})
	if err != nil {
		return err
	}
	out := toAPIExecution(ex)
	if ex.Risk == "high" {
		out.ConfirmationPhrase = ex.ConfirmationPhrase
	}
	c.Response().Header().Set(echo.HeaderLocation, "/api/v1/executions/"+ex.ID)
	return h.writeExecution(c, http.StatusCreated, ex, out)
}

// APIGet is one execution with its steps.
func (h ExecutionsHandler) APIGet(c echo.Context) error {
	ex, err := h.Executions.Get(c.Request().Context(), c.Param("id"))
	return h.respond(c, ex, err)
}

// respond answers with the execution and its steps, or with err.
func (h ExecutionsHandler) respond(c echo.Context, ex *executions.Execution, err error) error {
	if err != nil {
		return err
	}
	return h.writeExecution(c, http.StatusOK, ex, toAPIExecution(ex))
}

// queryFrom reads the history's filters from the query string (pages and API alike).
func queryFrom(c echo.Context) (executions.Query, error) {
	q := executions.Query{Risk: c.QueryParam("risk"), Q: strings.TrimSpace(c.QueryParam("q")), Cursor: c.QueryParam("cursor")}
	for _, v := range c.QueryParams()["status"] {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				q.Status = append(q.Status, executions.Status(s))
			}
		}
	}
	switch by := c.QueryParam("requested_by"); by {
	case "":
	case "me":
		q.RequestedBy = PrincipalOf(c).User.ID
	default:
		q.RequestedBy = by
	}
	if l := c.QueryParam("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n == 0 { // 0 would read as "not given" (the default) below
			return q, verr.New("limit", "must be a whole number between 1 and 200")
		}
		q.Limit = n
	}
	return q, nil
}

// apiPage is a page of executions. NextCursor is "" on the last page, never left out,
// as the tools' and the audit log's lists send it (DESIGN §1).
type apiPage struct {
	Items      []apiExecution `json:"items"`
	NextCursor string         `json:"next_cursor"`
}

func (h ExecutionsHandler) list(c echo.Context, q executions.Query) error {
	page, err := h.Executions.List(c.Request().Context(), q)
	if err != nil {
		return err
	}
	out := apiPage{Items: []apiExecution{}, NextCursor: page.NextCursor}
	for i := range page.Items {
		out.Items = append(out.Items, toAPIExecution(&page.Items[i]))
	}
	return c.JSON(http.StatusOK, out)
}

// APIList is the execution history, newest first: ?status=a,b&risk=&requested_by=me|<id>&q=&cursor=&limit=.
func (h ExecutionsHandler) APIList(c echo.Context) error {
	q, err := queryFrom(c)
	if err != nil {
		return err
	}
	return h.list(c, q)
}

// APIApprovals lists what waits for approval, newest first.
func (h ExecutionsHandler) APIApprovals(c echo.Context) error {
	q, err := queryFrom(c)
	if err != nil {
		return err
	}
	q.Status = []executions.Status{executions.AwaitingApproval}
	return h.list(c, q)
}

// decisionRequest is the body of confirm, reject, cancel and rollback.
type decisionRequest struct {
	Phrase   string `json:"phrase"`
	PlanHash string `json:"plan_hash"`
	Reason   string `json:"reason"`
	Confirm  bool   `json:"confirm"`
	// RollbackHash is the rollback's hash as GET …/rollback showed it (optional).
	RollbackHash string `json:"rollback_hash"`
}

// decide reads a decision's optional JSON body (an empty one is fine for cancel), makes
// it and answers with the execution as it now is.
func (h ExecutionsHandler) decide(c echo.Context, do func(ctx context.Context, who executions.Caller, id string, in decisionRequest) (*executions.Execution, error)) error {
	var in decisionRequest
	if c.Request().ContentLength != 0 {
		// A misspelt "phrase" or "reason" would be decided on as if left out.
		if err := bindJSONStrict(c, &in); err != nil {
			return err
		}
	}
	ex, err := do(c.Request().Context(), callerOf(c), c.Param("id"), in)
	return h.respond(c, ex, err)
}

// APIConfirm approves: {"phrase"} for HIGH, optionally {"plan_hash"} the person saw →
// 200 | 409 already decided | 422 wrong phrase.
func (h ExecutionsHandler) APIConfirm(c echo.Context) error {
	return h.decide(c, func(ctx context.Context, who executions.Caller, id string, in decisionRequest) (*executions.Execution, error) {
		return h.Executions.Confirm(ctx, who, id, in.Phrase, in.PlanHash)
	})
}

// APIReject turns a plan down: {"reason"} is required.
func (h ExecutionsHandler) APIReject(c echo.Context) error {
	return h.decide(c, func(ctx context.Context, who executions.Caller, id string, in decisionRequest) (*executions.Execution, error) {
		return h.Executions.Reject(ctx, who, id, in.Reason)
	})
}

// APICancel stops a plan waiting for approval or running (between steps), or its
// rollback (which then ends rollback_failed).
func (h ExecutionsHandler) APICancel(c echo.Context) error {
	return h.decide(c, func(ctx context.Context, who executions.Caller, id string, in decisionRequest) (*executions.Execution, error) {
		return h.Executions.Cancel(ctx, who, id, in.Reason)
	})
}

// APIRollback rolls a failed execution back: {"confirm": true} when the undo steps are
// MEDIUM, {"phrase"} when HIGH → 200 | 409 not allowed in this state.
func (h ExecutionsHandler) APIRollback(c echo.Context) error {
	return h.decide(c, func(ctx context.Context, who executions.Caller, id string, in decisionRequest) (*executions.Execution, error) {
		return h.Executions.Rollback(ctx, who, id, executions.RollbackDecision{Confirmed: in.Confirm, Phrase: in.Phrase, Hash: in.RollbackHash})
	})
}

// apiRollbackPlan is what a rollback would run.
type apiRollbackPlan struct {
	Steps     []apiRollbackStep `json:"steps"`
	NotUndone []string          `json:"not_undone,omitempty"`
	Risk      string            `json:"risk"`
	RiskWhy   string            `json:"risk_why"`
	Phrase    string            `json:"confirmation_phrase,omitempty"`
	Problems  any               `json:"problems,omitempty"`
	// Hash binds a rollback to what was shown: send it back as rollback_hash.
	Hash string `json:"rollback_hash"`
}

type apiRollbackStep struct {
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	Risk      string          `json:"risk"`
	Undoes    *int            `json:"undoes,omitempty"`
	// Preview is what the step changes (a built-in write's restore: the diff of what it
	// puts back), for those the page shows it to.
	Preview *apiStepPreview `json:"preview,omitempty"`
}

// apiStepPreview is a step's preview as the API shows it.
type apiStepPreview struct {
	Path string `json:"path"`
	Diff string `json:"diff"`
}

// APIRollbackPlan shows what a rollback of a failed execution would run, without running it.
func (h ExecutionsHandler) APIRollbackPlan(c echo.Context) error {
	ex, rp, err := h.Executions.PlanRollback(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	out := apiRollbackPlan{Steps: []apiRollbackStep{}, NotUndone: rp.Missing, Risk: string(rp.Risk), RiskWhy: rp.RiskWhy, Phrase: rp.Phrase,
		Hash: rp.Hash}
	p := PrincipalOf(c)
	m := h.masker(executions.RevealsRollbackArgs(p))
	diffs := executions.RevealsRollbackArgs(p) || ex.RevealsBuiltinResults(p) // as the page shows them
	for _, st := range rp.Steps {
		// The arguments as given, what is secret masked but to a person who may roll back.
		args, err := m.Mask(c.Request().Context(), st.ToolID, st.Tool, undoSecrets(ex, st), st.Arguments)
		if err != nil {
			return err
		}
		step := apiRollbackStep{Tool: st.Tool, Arguments: args, Risk: string(st.Risk.Level), Undoes: st.Undoes}
		if st.Preview != nil && diffs {
			step.Preview = &apiStepPreview{Path: st.Preview.Path, Diff: st.Preview.Diff}
		}
		out.Steps = append(out.Steps, step)
	}
	var ve *verr.Error
	if rp.Problems != nil && errors.As(rp.Problems, &ve) {
		out.Problems = ve.Fields
	}
	return c.JSON(http.StatusOK, out)
}

// apiSettings are the execution settings as the API shows them. high_separation is
// auto, always or off; separate_high_approver is its older boolean form (true:
// always), still read when high_separation is not given.
type apiSettings struct {
	ApprovalTTLSeconds   *int64            `json:"approval_ttl_seconds"`
	HighSeparation       decide.Separation `json:"high_separation"`
	SeparateHighApprover *bool             `json:"separate_high_approver,omitempty"`
}

// APISettings reads the execution settings.
func (h ExecutionsHandler) APISettings(c echo.Context) error {
	st, err := h.Executions.Settings(c.Request().Context())
	if err != nil {
		return err
	}
	always := st.HighSeparation == decide.SeparationAlways
	secs := int64(st.ApprovalTTL / time.Second)
	return c.JSON(http.StatusOK, apiSettings{ApprovalTTLSeconds: &secs, HighSeparation: st.HighSeparation,
		SeparateHighApprover: &always})
}

// APISetSettings changes them, as GET shows them; a field left out keeps its value.
func (h ExecutionsHandler) APISetSettings(c echo.Context) error {
	var in apiSettings
	if _, err := bindJSONChange(c, &in); err != nil {
		return err
	}
	// Both forms of the separation, disagreeing: neither is taken over the other.
	if in.HighSeparation != "" && in.SeparateHighApprover != nil &&
		(in.HighSeparation == decide.SeparationAlways) != *in.SeparateHighApprover {
		e := &verr.Error{}
		why := fmt.Sprintf("high_separation %q and separate_high_approver %v disagree (true is \"always\"): give one of them", in.HighSeparation, *in.SeparateHighApprover)
		e.Add("high_separation", why)
		e.Add("separate_high_approver", why)
		return e
	}
	// Fields left out are merged with the stored ones by the service, in the transaction
	// that writes them: merged here, a concurrent PUT of another field would be undone.
	var p executions.SettingsPatch
	if in.ApprovalTTLSeconds != nil {
		ttl := executions.TTLSeconds(*in.ApprovalTTLSeconds)
		p.ApprovalTTL = &ttl
	}
	// With neither separation field, the separation is kept (not loosened to "auto").
	switch sep := in.HighSeparation; {
	case sep != "":
		p.HighSeparation = &sep
	case in.SeparateHighApprover != nil && *in.SeparateHighApprover:
		sep = decide.SeparationAlways
		p.HighSeparation = &sep
	case in.SeparateHighApprover != nil:
		sep = decide.SeparationAuto
		p.HighSeparation = &sep
	}
	if p.ApprovalTTL == nil && p.HighSeparation == nil {
		// Fields given only as null or "" keep their value: refused like a body naming no
		// field (bindJSONChange), not answered 200 as if something were saved.
		return verr.New("body", "changes nothing (null and \"\" keep a setting as it is); it changes: approval_ttl_seconds, high_separation, separate_high_approver")
	}
	if _, err := h.Executions.PatchSettings(c.Request().Context(), ActorOf(c), p); err != nil {
		// Named as the API names it.
		if ve := (*verr.Error)(nil); errors.As(err, &ve) {
			for i := range ve.Fields {
				if ve.Fields[i].Field == "approval_ttl" {
					ve.Fields[i].Field = "approval_ttl_seconds"
				}
			}
		}
		return err
	}
	return h.APISettings(c)
}

// compensationRequest is the body of PUT /api/v1/tools/:id/compensation.
type compensationRequest struct {
	UndoTool    string                               `json:"undo_tool"`
	ArgumentMap map[string]executions.MappedArgument `json:"argument_map"`
}

// APICompensation shows how a tool is undone (404 when nothing is configured).
func (h ExecutionsHandler) APICompensation(c echo.Context) error {
	comp, err := h.Executions.CompensationOf(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	if comp == nil {
		// Not a fault, whose not_found message is always "Not found." (so that a missing id
		// confirms nothing): the tool was found, and whoever may inspect it may see that it
		// exists, so the answer says what it lacks (docs/api.md, Errors).
		return echo.NewHTTPError(http.StatusNotFound, "no compensation is configured for this tool")
	}
	return c.JSON(http.StatusOK, comp)
}

// APISetCompensation configures how a tool is undone: {"undo_tool","argument_map"}; an
// undo_tool given as "" (or null) removes it.
func (h ExecutionsHandler) APISetCompensation(c echo.Context) error {
	var in compensationRequest
	given, err := bindJSONChange(c, &in)
	if err != nil {
		return err
	}
	// Removal only when asked for: an empty body or a misspelt key ("undoTool") must not
	// remove the configured undo.
	if !given["undo_tool"] {
		return verr.New("undo_tool", `is required: the tool that undoes this one, or "" to remove the compensation`)
	}
	ctx := c.Request().Context()
	if err := h.Executions.SetCompensation(ctx, ActorOf(c), c.Param("id"), in.UndoTool, in.ArgumentMap); err != nil {
		return err
	}
	if strings.TrimSpace(in.UndoTool) == "" {
		return c.NoContent(http.StatusNoContent)
	}
	return h.APICompensation(c)
}
