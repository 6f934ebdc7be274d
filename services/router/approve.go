package router

import (
	"context"
	"fmt"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/decide"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/risk"
)

// Approval is the consent a risky call carries.
type Approval struct {
	Confirmed bool   // a person confirmed this call (enough for MEDIUM)
	Phrase    string // the phrase a person typed (HIGH)
	Execution string // the call is a step of this approved execution
}

// Phrase is what a person types to run a HIGH tool directly: its qualified name.
func Phrase(qualifiedName string) string { return qualifiedName }

// approve applies the approval rule (docs/architecture.md, The path of a tool call): LOW runs; MEDIUM needs a confirm; HIGH the typed phrase;
// a step of an approved execution carries its approval, as far as the level it was
// approved at (riskPinned). Who may give that approval is package decide's to say (a
// person, never a token; for HIGH someone other than the caller whenever another
// could). self reports a high-risk call its own caller approved because nobody else
// could; vet, a test run that vets the tool (vetting).
func (r *Router) approve(ctx context.Context, e *entry, c Call) (self, vet bool, err error) {
	if err := riskPinned(e, c.Pin); err != nil {
		return false, false, err
	}
	if vet, err = r.vetting(ctx, e, c); err != nil {
		return false, false, err
	}
	level := e.risk.Level
	if level == risk.Low || c.Approval.Execution != "" && c.Source == SourceExecution {
		return false, vet, nil
	}
	if err := consent(e, c); err != nil {
		return false, vet, err
	}
	// A person confirmed it (or typed the phrase): may they decide on their own call?
	v, err := r.dec.Check(ctx, decide.Decision{Actor: c.Actor, Role: c.Role, Requester: c.Actor.ID, Level: level,
		Verb: "run a " + string(level) + "-risk tool", Vetting: vet})
	fe, ok := fault.As(err)
	if !ok || fe.Kind != fault.KindForbidden {
		return v.SelfApproved, vet, err
	}
	need := ApprovalNeeded{Risk: string(level), Why: e.risk.Why, Needs: "approver", Executions: "/api/v1/executions"}
	return false, vet, fail(CodeApprovalRequired, "%s is %s risk (%s); %s: submit it as a plan, where they can approve it",
		e.t.QualifiedName(), level, e.risk.Why, fe.Message).with(need)
}

// riskPinned refuses a call rated riskier now, with its arguments, than the level it
// was approved at (Pin.MaxRisk): an execution's step carries its approval past consent,
// so a rise between the plan's last check and this call would otherwise go unasked.
func riskPinned(e *entry, p *Pin) error {
	if p == nil || p.MaxRisk == "" || risk.Max(p.MaxRisk, e.risk.Level) == p.MaxRisk {
		return nil
	}
	return fail(CodeStale, "%s is %s risk now, %s when it was approved (%s); plan and approve it again",
		e.t.QualifiedName(), e.risk.Level, p.MaxRisk, e.risk.Why)
}

// vetting reports a test run, by someone who may enable tools (Call.Test), of a tool
// never enabled (tools.Vetting): the runs that vet a tool before anyone else can call
// it. A tool disabled for the run, or back in validation after a change, was in use.
// Only test runs read the history; calls never do.
func (r *Router) vetting(ctx context.Context, e *entry, c Call) (bool, error) {
	if !c.Test {
		return false, nil
	}
	return r.tools.Vetting(ctx, e.t.ID, e.t.Status)
}

// approvalGiven is the approval c carries on its own: only a person in a page confirms
// a direct call, so an API or gateway call, or any call made with an API token,
// carries none, whatever its form fields say.
func approvalGiven(c Call) Approval {
	if c.Source == SourceAPI || c.Source == SourceGateway || c.Actor.Kind != audit.ActorUser {
		return Approval{}
	}
	return c.Approval
}

// consent is nil when c may run as far as its risk goes before anyone is asked (LOW,
// a step of an approved execution, or a confirm or phrase given), else the
// approval_required error saying what it needs.
func consent(e *entry, c Call) error {
	if c.Approval.Execution != "" && c.Source == SourceExecution {
		return nil
	}
	ap := approvalGiven(c)
	level := e.risk.Level
	name := e.t.QualifiedName()
	need := ApprovalNeeded{Risk: string(level), Why: e.risk.Why}
	switch level {
	case risk.Low:
		return nil
	case risk.Medium:
		if ap.Confirmed {
			return nil
		}
		need.Needs = "confirm"
	default:
		if ap.Phrase == Phrase(name) {
			return nil
		}
		need.Needs, need.Phrase = "phrase", Phrase(name)
	}
	msg := fmt.Sprintf("%s is %s risk (%s)", name, level, e.risk.Why)
	switch {
	case c.Source == SourceAPI || c.Source == SourceGateway:
		need.Executions = "/api/v1/executions"
		msg += "; submit it as a plan to POST /api/v1/executions, where a person can approve it"
	case c.Actor.Kind != audit.ActorUser:
		need.Executions = "/api/v1/executions"
		msg += "; an API token cannot confirm it: submit it as a plan to POST /api/v1/executions, where a person can approve it"
	case need.Needs == "phrase" && c.Approval.Phrase != "":
		msg += fmt.Sprintf("; the phrase typed does not match: type %q exactly", need.Phrase)
	case need.Needs == "phrase":
		msg += fmt.Sprintf("; type %q to run it", need.Phrase)
	default:
		msg += "; confirm to run it"
	}
	return errorOf(CodeApprovalRequired, msg).with(need)
}
