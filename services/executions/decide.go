package executions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/decide"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/planner"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/verr"
)

// Caller is who asks: the audit actor and the role they act with.
type Caller struct {
	Actor audit.Actor
	Role  auth.Role
}

// The codes of the executions' own faults.
const (
	CodeWrongPhrase = "wrong_phrase"        // a HIGH plan confirmed without its exact phrase
	CodeStale       = "stale_plan"          // the plan's tools changed since it was made; it was cancelled
	CodePlanner     = "planner_unavailable" // the planner could not answer
)

// forbidden is a decision this caller may not make, and why.
// MaxConversationID is the longest conversation id an execution keeps: the longest a
// call may name.
const MaxConversationID = router.MaxConversationID

func forbidden(msg string) *fault.Error { return fault.Forbidden(msg).About("execution") }

// wrongPhrase is the phrase a refused confirmation should have typed: the cause of a
// CodeWrongPhrase fault, so the page can say it again (the API's details stay empty).
type wrongPhrase string

func (p wrongPhrase) Error() string { return "want phrase " + strconv.Quote(string(p)) }

// wrongPhraseFault is a HIGH plan confirmed without its exact phrase.
func wrongPhraseFault(phrase string) *fault.Error {
	return fault.Wrap(wrongPhrase(phrase), fault.KindUnprocessable, CodeWrongPhrase,
		fmt.Sprintf("the confirmation phrase does not match: type %q exactly", phrase)).About("execution")
}

// WrongPhrase returns the phrase a confirmation refused with CodeWrongPhrase needed.
func WrongPhrase(err error) (string, bool) {
	var p wrongPhrase
	if !errors.As(err, &p) {
		return "", false
	}
	return string(p), true
}

// stale is a plan whose tools changed since it was made; it was cancelled.
func stale(msg string) *fault.Error { return fault.Stale(CodeStale, msg).About("execution") }

// plannerFailed is a planner that could not answer (the model server is down, timed
// out or answered nonsense): not the person's input, so not a 4xx.
func plannerFailed(err error) *fault.Error {
	return fault.Wrap(err, fault.KindUpstream, CodePlanner,
		strings.TrimPrefix(err.Error(), "planner: ")+"; try again, or give the plan as explicit calls").About("execution")
}

// Input is what Create needs: a prompt for the planner, or a plan.
type Input struct {
	Prompt string
	Plan   *Request
	// Source and Client say where the request came from (SourceMCP and the MCP
	// client's name and version); empty for the API and the pages.
	Source, Client string
	// ConversationID is the agent conversation the steps run in (the built-in tools'
	// workspace); "" is the requester's own default one.
	ConversationID string
	// MaxWaiting, when above 0, refuses (*TooManyWaitingError) an execution whose
	// requester has that many of the same Source waiting for approval already (an
	// agent's calls are not held back by the plans its person made on a page); counted
	// and created under one lock per requester, so calls at once cannot all slip under it.
	// For an API token's request 0 is DefaultMaxWaiting, whatever route it came by.
	MaxWaiting int
}

// DefaultMaxWaiting is how many of one person's executions an agent may leave awaiting
// approval (Input.MaxWaiting) where it makes them: /mcp's held calls, and every plan an
// API token asks for (the API, the pages it may post to, the test panel).
const DefaultMaxWaiting = 20

// CodeTooManyWaiting is the code of a creation refused with TooManyWaitingError.
const CodeTooManyWaiting = "too_many_waiting"

// TooManyWaitingError: the requester has Waiting executions awaiting approval, as many
// as Input.MaxWaiting allows; nothing was created. It unwraps to a conflict fault, so
// every route answers it alike (409 too_many_waiting).
type TooManyWaitingError struct{ Waiting int }

func (e *TooManyWaitingError) Error() string {
	return fmt.Sprintf("executions: %d of the requester's executions already wait for approval", e.Waiting)
}

// Unwrap is the refusal as the web layer shows it.
func (e *TooManyWaitingError) Unwrap() error {
	return fault.Conflict(CodeTooManyWaiting, fmt.Sprintf("%d of your executions already wait for approval: "+
		"wait for decisions on them before asking for more; nothing was created", e.Waiting)).About("execution")
}

// SourceMCP is an execution asked for by a call through /mcp that needed approval.
const SourceMCP = "mcp"

// Create plans (when given a prompt), prepares and stores a plan, and asks for its
// approval: a LOW plan is approved by policy and starts at once; MEDIUM waits for a
// confirm and HIGH for the typed phrase. A plan a language model wrote is at least
// MEDIUM (modelFloor). Bad input is a *verr.Error (or a planner.NotUnderstood fault)
// and stores nothing.
func (s *Service) Create(ctx context.Context, c Caller, in Input) (*Execution, error) {
	if in.MaxWaiting == 0 && c.Actor.Kind == audit.ActorToken {
		// An agent in a loop must not bury the approvers, by whichever route its token
		// posts (the API, a page, the test panel). A person's own plans are not capped,
		// though they count toward the token's (same requester, same source).
		in.MaxWaiting = DefaultMaxWaiting
	}
	req, plannerName, err := s.request(ctx, c, in)
	if err != nil {
		return nil, err
	}
	if utf8.RuneCountInString(in.ConversationID) > MaxConversationID {
		return nil, verr.New("/conversation_id", fmt.Sprintf("at most %d characters", MaxConversationID))
	}
	plan, err := s.prepare(ctx, c.Actor, c.Role, in.ConversationID, req)
	if err != nil {
		return nil, err
	}
	conv := in.ConversationID
	if conv == "" {
		conv = router.DefaultConversation(c.Actor)
	}
	if err := s.preview(ctx, conv, c.Actor.ID, &plan); err != nil {
		return nil, err
	}
	if plan, err = s.asStored(ctx, plan); err != nil {
		return nil, err
	}
	hash, err := plan.Hash()
	if err != nil {
		return nil, err
	}
	level, why := plan.Risk()
	level, why = modelFloor(plannerName, level, why)
	st, err := s.Settings(ctx)
	if err != nil {
		return nil, err
	}
	now := s.opts.Now()
	expires := now.Add(st.ApprovalTTL)
	var requestedBy, requestedToken *string
	if c.Actor.ID != "" {
		requestedBy = &c.Actor.ID
	}
	if c.Actor.Kind == audit.ActorToken && c.Actor.TokenID != "" {
		requestedToken = &c.Actor.TokenID
	}
	kind := c.Actor.Kind
	if kind != audit.ActorToken && kind != audit.ActorSystem {
		kind = audit.ActorUser
	}
	var ex *Execution
	id := uuid.NewString() // made here, so the seal can cover it from the start
	err = db.WithTx(ctx, s.begin, func(tx pgx.Tx) error {
		if in.MaxWaiting > 0 && requestedBy != nil {
			// The lock first, then the count in a statement of its own: its snapshot then
			// sees what a creation that held the lock before committed.
			if _, err := tx.Exec(ctx, `/* executions.Create.lock */ SELECT pg_advisory_xact_lock(hashtextextended('executions.waiting:' || $1, 0))`,
				*requestedBy); err != nil {
				return fmt.Errorf("executions: count waiting: %w", err)
			}
			var n int
			if err := tx.QueryRow(ctx, `/* executions.Create.waiting */
				SELECT count(*) FROM executions WHERE requested_by = $1::uuid AND status = 'awaiting_approval' AND source = $2
					AND expires_at > $3`,
				*requestedBy, in.Source, now).Scan(&n); err != nil {
				return fmt.Errorf("executions: count waiting: %w", err)
			}
			if n >= in.MaxWaiting {
				return &TooManyWaitingError{Waiting: n}
			}
		}
		// The sealed fields, inserted as sealed.
		row := &Execution{ID: id, RequestedBy: requestedBy, RequestedToken: requestedToken, RequesterKind: kind,
			RequesterName: c.Actor.Name, RequesterRole: string(c.Role), ConversationID: in.ConversationID, Plan: plan, PlanHash: hash}
		_, err := tx.Exec(ctx, `/* executions.Create */
			INSERT INTO executions (id, requested_by, requester_name, requester_kind, requester_role, prompt, planner, plan,
			                        plan_hash, status, risk, risk_why, confirmation_phrase, expires_at, created_at, updated_at,
			                        requested_token, seal, source, client, conversation_id)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'planning', $10, $11, $12, $13, $14, $14, $15, $16, $17, $18, $19)`,
			row.ID, row.RequestedBy, row.RequesterName, row.RequesterKind, row.RequesterRole, storedPrompt(in.Prompt), plannerName,
			row.Plan, row.PlanHash, string(level), why, plan.Phrase(), expires, now, row.RequestedToken, s.sealOf(row, nil, nil, nil),
			in.Source, clip(in.Client, 200), row.ConversationID)
		if err != nil {
			return fmt.Errorf("executions: create: %w", err)
		}
		for i, step := range plan.Steps {
			if _, err := tx.Exec(ctx, `/* executions.Create.step */
				INSERT INTO tool_calls (execution_id, phase, position, tool_id, tool_name, arguments, risk)
				VALUES ($1, 'run', $2, $3, $4, $5, $6)`, id, i, step.ToolID, step.Tool, step.Arguments, string(step.Risk.Level)); err != nil {
				return fmt.Errorf("executions: create step %d: %w", i, err)
			}
		}
		kinds := []events.Kind[events.ExecutionPlanned]{events.PlanCreated, events.ApprovalRequested}
		if level == risk.Low {
			kinds = kinds[:1]
		}
		planned := func(b events.Execution) events.ExecutionPlanned {
			return events.ExecutionPlanned{Execution: b, Steps: len(plan.Steps), Rollback: len(plan.Rollback), RiskWhy: why}
		}
		ex, err = s.apply(ctx, tx, id, change{from: []Status{Planning}, to: AwaitingApproval, want: "planned",
			event: announce(planned, kinds...), actor: c.Actor, action: "execution.create"})
		if err != nil || level != risk.Low {
			return err
		}
		ex, err = s.start(ctx, tx, ex, c.Actor, "policy", false, now)
		return err
	})
	if err != nil {
		return nil, err
	}
	return ex, nil
}

// modelFloor is the level a plan waits at: its riskiest step's, but at least MEDIUM when
// a language model wrote it (its planner's name starts with "llm"). A model's steps are
// steered by what it reads, upstream servers' tool descriptions included, and nothing
// checks them against what the person asked, so a person sees and confirms them before
// any runs: a policy approval would start a run nobody saw. The steps keep their own
// levels; the rule-based planner's LOW plans still start at once.
func modelFloor(plannerName string, level risk.Level, why string) (risk.Level, string) {
	if level != risk.Low || !strings.HasPrefix(plannerName, "llm") {
		return level, why
	}
	return risk.Medium, "every step is low risk, but a language model (" + plannerName + ") wrote the plan: " +
		"a person confirms its steps before any runs"
}

// request is the plan to prepare: the one given, or the planner's for the prompt.
func (s *Service) request(ctx context.Context, c Caller, in Input) (Request, string, error) {
	if in.Plan != nil {
		if strings.TrimSpace(in.Prompt) != "" {
			return Request{}, "", verr.New("/prompt", "give a prompt or a plan, not both")
		}
		return *in.Plan, "", nil
	}
	if strings.TrimSpace(in.Prompt) == "" {
		return Request{}, "", verr.New("/prompt", "say what should be done, or give a plan")
	}
	if n := utf8.RuneCountInString(in.Prompt); n > MaxPrompt {
		// A planner's work grows with the prompt (the rule planner's faster than that):
		// a request is a sentence or a few, not a document.
		return Request{}, "", verr.New("/prompt", fmt.Sprintf("is %d characters; a prompt may have at most %d: say what should be done in a few sentences, or give a plan", n, MaxPrompt))
	}
	avail, err := s.plannable(ctx, c)
	if err != nil {
		return Request{}, "", err
	}
	// The person's, so a planner that asks a model counts the call against their rate.
	p, err := s.opts.Planner.Plan(planner.ForCaller(ctx, c.Actor.ID), in.Prompt, avail)
	if _, nu := planner.NotUnderstoodIn(err); err != nil && !nu && !PlannerRefused(err) && ctx.Err() == nil {
		return Request{}, "", plannerFailed(err)
	}
	if err != nil {
		return Request{}, "", err
	}
	req := Request{}
	for _, st := range p.Steps {
		req.Steps = append(req.Steps, RequestStep{Tool: st.Tool, Arguments: st.Arguments})
	}
	for _, st := range p.Rollback {
		req.Rollback = append(req.Rollback, RequestStep{Tool: st.Tool, Arguments: st.Arguments})
	}
	return req, s.opts.Planner.Name(), nil
}

// PlannerRefused: the planner would not ask its model now (busy, or the person's rate
// spent), a 503 or 429 of its own, not a failing planner.
func PlannerRefused(err error) bool {
	f, ok := fault.As(err)
	return ok && (f.Kind == fault.KindRateLimited || f.Code == planner.CodeBusy)
}

// MaxPrompt bounds a prompt, in characters.
const MaxPrompt = 8000

// maxPlannable bounds the tools a planner is shown.
const maxPlannable = 2000

// plannable are the tools that can be called now that c may use (the router's rule, as
// /mcp lists them; the router still checks each call), each with the input schema a
// caller sees: without the parameters its configuration fixes, which a plan may not
// give. A tool c may not use is neither shown to a planner nor named in its messages.
func (s *Service) plannable(ctx context.Context, c Caller) ([]planner.Tool, error) {
	all, err := s.router.Usable(ctx, c.Actor, c.Role)
	if err != nil {
		return nil, err
	}
	out := make([]planner.Tool, 0, min(len(all), maxPlannable))
	for _, t := range all[:min(len(all), maxPlannable)] {
		out = append(out, planner.Tool{Name: t.QualifiedName(), Description: t.Description, InputSchema: t.CallerSchema()})
	}
	return out, nil
}

// errDue: the approval time of an execution ran out by the database's clock, though
// not by this host's; Confirm expires it.
var errDue = errors.New("executions: the approval time ran out")

// start moves an approved execution to executing and queues its run, in tx (errDue
// when a person approves it at or past expires_at by the database's clock).
func (s *Service) start(ctx context.Context, tx pgx.Tx, ex *Execution, approver audit.Actor, how string, self bool, now time.Time) (*Execution, error) {
	var approvedBy *string
	name := approver.Name
	if how == "policy" {
		// Nobody approved a LOW plan: the policy did (docs/architecture.md, State machines), whoever asked for it
		// (an agent's token too), so no person is recorded as its approver.
		approver, name = audit.System, "policy"
	} else if approver.ID != "" && approver.Kind != audit.ActorSystem {
		approvedBy = &approver.ID
	}
	approved := func(b events.Execution) events.ExecutionApproved {
		return events.ExecutionApproved{Execution: b, Approval: how, Approver: name, SelfApproved: self}
	}
	if how != "policy" {
		// A person's approval counts only before expires_at by the database's clock, as
		// the grants and the expiry job read it: this host's clock (the checks Confirm
		// made) may run behind it. The row is locked until the transition below commits,
		// so an expiry cannot slip in between. A policy approval starts the plan in the
		// transaction that creates it.
		var due bool
		err := tx.QueryRow(ctx, `/* executions.start.expiry */ SELECT expires_at IS NOT NULL AND expires_at <= now()
			FROM executions WHERE id = $1 AND status = 'awaiting_approval' FOR UPDATE`, ex.ID).Scan(&due)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			// Decided meanwhile: the transition below reports what it is now.
		case err != nil:
			return nil, fmt.Errorf("executions: the expiry of %s: %w", ex.ID, err)
		case due:
			return nil, errDue
		}
	}
	ex, err := s.apply(ctx, tx, ex.ID, change{from: []Status{AwaitingApproval}, to: Executing, want: "approved",
		set: map[string]any{"approval": how, "approved_by": approvedBy, "approver_name": name, "approved_at": now,
			"approved_hash": ex.PlanHash, "started_at": now, "self_approved": self,
			"seal": s.sealOf(ex, ex.PlanHash, ex.RollbackHash, ex.RollbackPlan)},
		event: announce(approved, events.ApprovalGranted), actor: approver, action: "execution.approve"})
	if err != nil {
		return nil, err
	}
	return ex, s.enqueue(ctx, tx, ex.ID, PhaseRun)
}

// Confirm approves an execution awaiting approval: MEDIUM with a confirm, HIGH with
// its exact phrase. planHash, when given (hex), must be the hash the person saw. Who
// may approve is package decide's to say (a person, not a token; for HIGH someone
// other than the requester whenever another could). What is stored to run and the
// requester are checked again (checkBinding): a plan altered while it waited, one whose
// tools changed, or one whose requester can no longer act is cancelled instead. Of
// concurrent confirms exactly one wins; the others get a conflict.
func (s *Service) Confirm(ctx context.Context, c Caller, id, phrase, planHash string) (*Execution, error) {
	const verb = "approve executions"
	if err := s.mayDecide(c, verb); err != nil {
		return nil, err
	}
	ex, err := s.get(ctx, s.pool, id)
	if err != nil {
		return nil, err
	}
	if ex.Status != AwaitingApproval {
		return nil, conflict(id, ex.Status, "approved")
	}
	now := s.opts.Now()
	// expired expires the plan when its time ran out (due: by the database's clock, which
	// start reads; else by this host's) and says so with a conflict.
	expired := func(due bool) error {
		if due || ex.ExpiresAt != nil && !now.Before(*ex.ExpiresAt) {
			ok, err := s.expire(ctx, id)
			if err != nil {
				return err
			}
			if ok {
				return conflict(id, Expired, "approved")
			}
			// Another decision won (an approval, a cancel): the conflict says what it
			// is now, not expired.
			cur, err := s.get(ctx, s.pool, id)
			if err != nil {
				return err
			}
			return conflict(id, cur.Status, "approved")
		}
		return nil
	}
	if err := expired(false); err != nil {
		return nil, err
	}
	if planHash != "" && !strings.EqualFold(planHash, ex.Hash()) {
		return nil, conflict(id, ex.Status, "approved as shown (the plan is not the one you saw; reload it)")
	}
	// The level and phrase come from the stored plan, not from the risk and phrase
	// columns, which no seal covers. checkBinding below proves the plan is the one hashed
	// and sealed, its steps' risk levels included when the seal is v3; a v2 seal left them
	// out, but a level lowered under one is still found as a risk that rose since.
	how, want := "confirm", ex.Plan.Phrase()
	level, _ := ex.Plan.Risk()
	if level == risk.High {
		if phrase != want {
			s.refusal(ctx, c, ex, "wrong phrase")
			return nil, wrongPhraseFault(want)
		}
		how = "phrase"
	}
	verdict, err := s.mayDecideOn(ctx, c, ex, level, verb)
	if err != nil {
		return nil, err
	}
	if _, _, b, err := s.checkBinding(ctx, ex, PhaseRun); err != nil {
		return nil, err
	} else if b != nil && b.transient {
		// Nothing about the plan changed: it can be approved once the tool is back.
		return nil, conflict(id, ex.Status, "approved now: "+b.reason)
	} else if b != nil {
		_, err := s.decide(ctx, c, id, change{from: []Status{AwaitingApproval}, to: Cancelled, want: "cancelled",
			set: map[string]any{"reason": b.reason, "finished_at": now}, action: b.action,
			event: decided(events.ExecutionCancelled, b.reason, "")})
		if err != nil {
			return nil, err
		}
		return nil, stale(b.reason + "; the plan was cancelled, plan it again")
	}
	// The checks above prepare every step through the router and may take a while:
	// a plan whose time ran out meanwhile is not approved.
	now = s.opts.Now()
	if err := expired(false); err != nil {
		return nil, err
	}
	var out *Execution
	err = db.WithTx(ctx, s.begin, func(tx pgx.Tx) error {
		var err error
		out, err = s.start(ctx, tx, ex, c.Actor, how, verdict.SelfApproved, now)
		return err
	})
	if errors.Is(err, errDue) {
		return nil, expired(true)
	}
	return out, err
}

// mayDecideOn asks package decide whether c may decide on ex at the risk given, and
// audits a refusal (as denied) before it returns it.
func (s *Service) mayDecideOn(ctx context.Context, c Caller, ex *Execution, level risk.Level, verb string) (decide.Verdict, error) {
	requester := ""
	if ex.RequestedBy != nil {
		requester = *ex.RequestedBy
	}
	v, err := s.dec.Check(ctx, decide.Decision{Actor: c.Actor, Role: c.Role, Requester: requester, Level: level, Verb: verb})
	if fe, ok := fault.As(err); ok && fe.Kind == fault.KindForbidden {
		s.refusal(ctx, c, ex, fe.Message)
		out := forbidden(fe.Message)
		if fe.Code == decide.CodeNeedsOther {
			// forbidden as it has always answered, and the details tell a client that
			// someone else may decide (it can offer to ask them).
			out = out.WithDetails(map[string]string{"reason": decide.CodeNeedsOther})
		}
		return v, out.MarkAudited()
	}
	return v, err
}

// mayDecide refuses at once what no execution could change: a token, or a role that
// may not decide.
func (s *Service) mayDecide(c Caller, verb string) error {
	if err := decide.Person(c.Actor, verb); err != nil {
		return forbidden(err.Error())
	}
	if !c.Role.Can(auth.PermExecutionApprove) {
		return forbidden("your role may not " + verb)
	}
	return nil
}

// refusal audits an approval attempt that was turned down.
func (s *Service) refusal(ctx context.Context, c Caller, ex *Execution, why string) {
	err := audit.AppendAlone(ctx, s.begin, audit.Entry{Actor: c.Actor, Action: "execution.approve.refused", TargetType: "execution",
		TargetID: ex.ID, TargetName: ex.Title(), Payload: map[string]any{"reason": why}, Result: audit.ResultDenied})
	if err != nil {
		s.log.Error("executions: could not audit a refused approval", "err", err)
	}
}

// decide applies one change in its own transaction.
func (s *Service) decide(ctx context.Context, c Caller, id string, ch change) (*Execution, error) {
	ch.actor = c.Actor
	var out *Execution
	err := db.WithTx(ctx, s.begin, func(tx pgx.Tx) error {
		var err error
		out, err = s.apply(ctx, tx, id, ch)
		return err
	})
	return out, err
}

// MaxReason bounds a rejection or cancellation reason.
const MaxReason = 500

// Reject turns down an execution awaiting approval, with a reason.
func (s *Service) Reject(ctx context.Context, c Caller, id, reason string) (*Execution, error) {
	if err := s.mayDecide(c, "decide on executions"); err != nil {
		return nil, err
	}
	reason = strings.TrimSpace(reason)
	var bad error
	switch {
	case reason == "":
		bad = verr.New("reason", "say why the plan is rejected")
	case len([]rune(reason)) > MaxReason:
		bad = verr.New("reason", fmt.Sprintf("keep it under %d characters", MaxReason))
	}
	if bad != nil {
		// The state first (DESIGN §1: reject → 200 | 409): one already decided is a
		// conflict whatever the reason; the reason is refused only on one still waiting.
		// Nothing changes here, so a state read outside the transition is enough.
		ex, err := s.get(ctx, s.pool, id)
		if err != nil {
			return nil, err
		}
		if ex.Status != AwaitingApproval {
			return nil, conflict(id, ex.Status, "rejected")
		}
		return nil, bad
	}
	return s.decide(ctx, c, id, change{from: []Status{AwaitingApproval}, to: Cancelled, want: "rejected",
		set:    map[string]any{"reason": reason, "finished_at": s.opts.Now(), "decision": "rejected", "decided_by": c.Actor.Name},
		action: "execution.reject",
		event:  decided(events.ApprovalRejected, reason, c.Actor.Name)})
}

// Cancel stops an execution that waits for approval, or one that runs (the step
// running finishes, but one waiting for a person's answer is stopped: whileRunning; no
// further step starts), or one whose rollback runs, in the same way. Its requester or
// an approver may; a rollback only a person who may roll executions back.
func (s *Service) Cancel(ctx context.Context, c Caller, id, reason string) (*Execution, error) {
	ex, err := s.get(ctx, s.pool, id)
	if err != nil {
		return nil, err
	}
	rollback := ex.Status == RollingBack
	mine := ex.RequestedBy != nil && *ex.RequestedBy == c.Actor.ID
	switch {
	case rollback:
		// Stopping a rollback reverses a person's decision to roll back, and leaves what
		// the run changed in place: a decision too, never an API token's or a requester's
		// who may not roll back.
		if err := s.mayDecide(c, "cancel a rollback"); err != nil {
			return nil, err
		}
	case !mine && !c.Role.Can(auth.PermExecutionApprove):
		return nil, forbidden("only its requester or an approver may cancel an execution")
	case mine && !c.Role.Can(auth.PermExecutionCreate):
		// A requester whose role changed since (an auditor now) changes nothing: the plan
		// will not run as them anyway; an approver may cancel it.
		return nil, forbidden("your role may no longer plan executions, so it may not withdraw one: an approver may cancel it")
	case !mine && c.Actor.Kind == audit.ActorToken:
		// Cancelling another's waiting plan turns it down, as a rejection does.
		return nil, forbidden("an API token may cancel only its own user's executions: an approver cancels another's from a browser session")
	}
	reason = strings.TrimSpace(reason)
	if len([]rune(reason)) > MaxReason {
		return nil, verr.New("reason", fmt.Sprintf("keep it under %d characters", MaxReason))
	}
	if rollback {
		return s.cancelRollback(ctx, c, id, reason)
	}
	return s.decide(ctx, c, id, change{from: []Status{AwaitingApproval, Executing}, to: Cancelled, want: "cancelled",
		set:    map[string]any{"reason": reason, "finished_at": s.opts.Now(), "decision": "cancelled", "decided_by": c.Actor.Name},
		action: "execution.cancel",
		event:  decided(events.ExecutionCancelled, reason, c.Actor.Name)})
}

// cancelRollback ends the rollback of execution id as failed: the state machine has
// no cancelled edge from rolling_back, and some completed steps may not have been
// undone. Its runner stops as for a cancelled run (whileRunning, skipRest); the
// execution's approval (decision, decided_by) is left as it was.
func (s *Service) cancelRollback(ctx context.Context, c Caller, id, reason string) (*Execution, error) {
	msg := "the rollback was cancelled by " + c.Actor.Name
	if reason != "" {
		msg += ": " + reason
	}
	return s.decide(ctx, c, id, change{from: []Status{RollingBack}, to: RollbackFailed, want: "cancelled",
		set:    map[string]any{"error": msg, "finished_at": s.opts.Now()},
		action: "execution.rollback_cancel", result: audit.ResultSuccess,
		// rollback.failed, as any rollback that ends failed: the pages following it
		// update and say why.
		event: announce(func(b events.Execution) events.ExecutionEnded {
			return events.ExecutionEnded{Execution: b, Error: msg}
		}, events.RollbackFailed)})
}

// ClaimRetry records that the single-use retry token nonce of execution id (a
// requestState the gateway gave a client) was used; false when it had been already.
func (s *Service) ClaimRetry(ctx context.Context, id, nonce string, expires time.Time) (bool, error) {
	tag, err := s.pool.Exec(ctx, `/* executions.ClaimRetry */
		INSERT INTO execution_retries (nonce, execution_id, expires_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
		nonce, id, expires)
	if err != nil {
		return false, fmt.Errorf("executions: claim a retry: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// Withdraw cancels an execution that still waits for approval because its requester
// stopped waiting for it (an MCP client that gave up its call); one already approved
// runs on. Only its requester may.
func (s *Service) Withdraw(ctx context.Context, c Caller, id, reason string) (*Execution, error) {
	ex, err := s.get(ctx, s.pool, id)
	if err != nil {
		return nil, err
	}
	if ex.RequestedBy == nil || *ex.RequestedBy != c.Actor.ID {
		return nil, forbidden("only its requester may withdraw an execution")
	}
	return s.decide(ctx, c, id, change{from: []Status{AwaitingApproval}, to: Cancelled, want: "withdrawn",
		set:    map[string]any{"reason": clip(reason, MaxReason), "finished_at": s.opts.Now(), "decision": "cancelled", "decided_by": c.Actor.Name},
		action: "execution.cancel", event: decided(events.ExecutionCancelled, reason, c.Actor.Name)})
}

// ExpireDue moves every execution whose approval time ran out to expired; it returns
// how many. The runner calls it every minute, and forgets the retry tokens that can
// no longer be used.
func (s *Service) ExpireDue(ctx context.Context) (int, error) {
	if _, err := s.pool.Exec(ctx, `/* executions.ExpireDue.retries */
		DELETE FROM execution_retries WHERE expires_at < $1`, s.opts.Now().Add(-time.Hour)); err != nil {
		return 0, fmt.Errorf("executions: forget used retries: %w", err)
	}
	// Due by this host's clock or by the database's (which Confirm's approval reads),
	// whichever is later: a host whose clock runs behind still expires a plan no one can
	// approve any more.
	ids, err := db.Column[string](ctx, s.pool, "executions: due", `/* executions.ExpireDue */
		SELECT id FROM executions WHERE status = 'awaiting_approval' AND expires_at <= greatest(now(), $1)
		ORDER BY expires_at LIMIT 1000`,
		s.opts.Now())
	if err != nil {
		return 0, err
	}
	n := 0
	for _, id := range ids {
		ok, err := s.expire(ctx, id)
		if err != nil {
			return n, err
		}
		if ok {
			n++
		}
	}
	return n, nil
}

// expire moves one execution to expired; false when someone decided first.
func (s *Service) expire(ctx context.Context, id string) (bool, error) {
	_, err := s.decide(ctx, Caller{Actor: audit.System}, id, change{from: []Status{AwaitingApproval}, to: Expired,
		want: "expired", set: map[string]any{"finished_at": s.opts.Now()}, event: just(events.ExecutionExpired),
		action: "execution.expire"})
	if _, ok := ConflictStatus(err); ok {
		return false, nil
	}
	return err == nil, err
}

// Settings are the execution settings administrators change at run time.
type Settings struct {
	// ApprovalTTL is how long a plan waits for approval before it expires. Default 24 h.
	ApprovalTTL time.Duration
	// HighSeparation is when a HIGH plan needs an approver other than its requester
	// (package decide). Default: whenever another active person could approve.
	HighSeparation decide.Separation
}

// DefaultApprovalTTL is ApprovalTTL when nobody set one.
const DefaultApprovalTTL = 24 * time.Hour

const settingTTL = "executions.approval_ttl_seconds"

// Settings reads the current settings.
func (s *Service) Settings(ctx context.Context) (Settings, error) {
	st := Settings{ApprovalTTL: DefaultApprovalTTL}
	var raw json.RawMessage
	err := s.pool.QueryRow(ctx, `/* executions.Settings */ SELECT value FROM settings WHERE key = $1`, settingTTL).Scan(&raw)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return Settings{}, fmt.Errorf("executions: settings: %w", err)
	}
	var secs int64
	if err == nil && json.Unmarshal(raw, &secs) == nil && secs > 0 {
		st.ApprovalTTL = time.Duration(secs) * time.Second
	}
	if st.HighSeparation, err = s.dec.Separation(ctx, s.pool); err != nil {
		return Settings{}, err
	}
	return st, nil
}

// SetSettings stores the settings, audited.
func (s *Service) SetSettings(ctx context.Context, actor audit.Actor, st Settings) error {
	if err := CheckSettings(st); err != nil {
		return err
	}
	return db.WithTx(ctx, s.begin, func(tx pgx.Tx) error {
		return StoreSettings(ctx, tx, actor, st)
	})
}

// CheckSettings names what is wrong with settings before they are stored.
// TTLSeconds is n seconds as an approval TTL; a number of seconds no duration holds
// (18446744134 wrapped to 60 s) is out of CheckSettings' range, not wrapped into it.
func TTLSeconds(n int64) time.Duration {
	if n < 0 || n > int64(math.MaxInt64/time.Second) {
		return -1
	}
	return time.Duration(n) * time.Second
}

func CheckSettings(st Settings) error {
	e := &verr.Error{}
	if st.ApprovalTTL < time.Minute || st.ApprovalTTL > 30*24*time.Hour {
		e.Add("approval_ttl", "must be between one minute and 30 days")
	}
	if st.HighSeparation != "" && !st.HighSeparation.Valid() {
		e.Add("high_separation", "must be auto (another person approves whenever there is one), always or off")
	}
	return e.Err()
}

// ReadSettings reads the current settings through q (SettingsOf a service, or a
// configuration export).
func ReadSettings(ctx context.Context, q db.Querier) (Settings, error) {
	st := Settings{ApprovalTTL: DefaultApprovalTTL}
	var raw json.RawMessage
	err := q.QueryRow(ctx, `/* executions.ReadSettings */ SELECT value FROM settings WHERE key = $1`, settingTTL).Scan(&raw)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return Settings{}, fmt.Errorf("executions: settings: %w", err)
	}
	var secs int64
	if err == nil && json.Unmarshal(raw, &secs) == nil && secs > 0 {
		st.ApprovalTTL = time.Duration(secs) * time.Second
	}
	if st.HighSeparation, err = decide.ReadSeparation(ctx, q); err != nil {
		return Settings{}, err
	}
	return st, nil
}

// StoreSettings writes settings checked by CheckSettings in the caller's transaction, audited.
func StoreSettings(ctx context.Context, tx pgx.Tx, actor audit.Actor, st Settings) error {
	if st.HighSeparation == "" {
		st.HighSeparation = decide.SeparationAuto
	}
	raw, _ := json.Marshal(int64(st.ApprovalTTL / time.Second))
	if _, err := tx.Exec(ctx, `/* executions.SetSettings */
		INSERT INTO settings (key, value, updated_by) VALUES ($1, $2, $3)
		ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_by = EXCLUDED.updated_by, updated_at = now()`,
		settingTTL, raw, actor.Name); err != nil {
		return fmt.Errorf("executions: settings: %w", err)
	}
	if err := decide.SetSeparation(ctx, tx, st.HighSeparation, actor.Name); err != nil {
		return err
	}
	_, err := audit.Append(ctx, tx, audit.Entry{Actor: actor, Action: "settings.executions", TargetType: "settings",
		TargetID: "executions", Payload: map[string]any{"approval_ttl_seconds": int64(st.ApprovalTTL / time.Second),
			"high_separation": st.HighSeparation}})
	return err
}

// clip cuts s to at most n runes (a client's self-declared name is not trusted to be short).
func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n])
	}
	return s
}
