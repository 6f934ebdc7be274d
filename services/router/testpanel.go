package router

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/toolwarden/toolwarden/internal/textcheck"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/usage"
)

// RunCases runs saved test cases in order through Call, each with base's caller and
// approval and the case's arguments, and judges each outcome against the case. A
// refusal that says nothing about the tool (approval missing, no permission, not
// runnable) stops the run and is returned instead. Every case's approval is checked
// before the first runs, so a case that would stop the run stops it before any ran:
// nothing ran, so nothing is judged.
func (r *Router) RunCases(ctx context.Context, base Call, cases []tools.TestCase) ([]tools.CaseResult, error) {
	if err := r.casesConsent(ctx, base, cases); err != nil {
		return nil, err
	}
	var results []tools.CaseResult
	for _, tc := range cases {
		c := base
		c.Arguments, c.ID = tc.Arguments, ""
		res, err := r.Call(ctx, c)
		if re := (*Error)(nil); errors.As(err, &re) && stopsCases(re) {
			return nil, re
		}
		cr := tools.CaseResult{CaseID: tc.ID, Name: tc.Name, Saved: tc.UpdatedAt}
		text := ""
		if res != nil {
			cr.DurationMS, text = res.DurationMS, TextOf(res.Content)
		}
		cr.Passed, cr.Message = tc.Passes(err == nil && !res.IsError, text)
		if err != nil && !cr.Passed {
			// The server's error, of any length: shown to everyone who may see the tool and
			// audited, so what looks like a credential is masked (as calls.go does), and
			// stored, so a NUL is replaced.
			cr.Message = tools.ClipCaseMessage(cr.Message + ": " + textcheck.Storable(usage.RedactText(err.Error())))
		}
		results = append(results, cr)
	}
	return results, nil
}

// stopsCases reports a refusal that stops a run of cases instead of failing one case:
// one about the caller, or one that kept the case from reaching the tool (a rate limit
// anyone calling the tool can use up, a call that could not be recorded, the caller
// gone), which says nothing of the tool and must neither fail it nor pass a case that
// expects an error.
func stopsCases(re *Error) bool {
	switch re.Code {
	case CodeApprovalRequired, CodeForbidden, CodeToolDisabled, CodeRateLimited, CodeUnavailable, CodeCancelled:
		return true
	}
	return false
}

// casesConsent is the refusal that would stop a run of cases, found before any case
// runs: each case is checked and rated as Call checks it, and its approval asked as
// Call asks it. Of several, it returns the one the caller can least give on their own
// (another approver, then the phrase, then a confirm), recorded as Call records its
// refusal; a case whose own arguments are refused is left to fail as that case.
func (r *Router) casesConsent(ctx context.Context, base Call, cases []tools.TestCase) error {
	var worst *Error
	var rec *callRecord
	for _, tc := range cases {
		c := base
		c.Arguments, c.ID = tc.Arguments, ""
		e, args, err := r.check(ctx, c)
		preflighted := false
		if err == nil {
			_, _, err = r.approve(ctx, e, c)
			if re := (*Error)(nil); errors.As(err, &re) && re.Code == CodeApprovalRequired {
				if pre := r.preflight(ctx, e, c, "", args.merged); pre != nil {
					err, preflighted = pre, true
				}
			}
		}
		re := (*Error)(nil)
		if !errors.As(err, &re) {
			continue // none, or a failure of the check itself: Call meets it again as that case's
		}
		if e != nil && stopsCases(re) && consentRank(re) > consentRank(worst) {
			worst = re
			rec = &callRecord{r: r, c: c, id: uuid.NewString(), e: e, args: args.recorded(c.Arguments), start: time.Now(), auditRefusal: preflighted}
		}
	}
	if worst == nil {
		return nil
	}
	return rec.refused(ctx, worst)
}

// consentRank orders the refusals that stop a run of cases by how little the caller
// can do about them from where they are (0 for none).
func consentRank(re *Error) int {
	if re == nil {
		return 0
	}
	if re.Code != CodeApprovalRequired {
		return 4
	}
	need, _ := re.Details.(ApprovalNeeded)
	switch need.Needs {
	case "confirm":
		return 1
	case "phrase":
		return 2
	}
	return 3
}

// Testable reports whether the test panel may run a tool in status (validated and later)
// for someone who may enable tools, though it is not enabled.
func Testable(status string) bool {
	switch status {
	case "validated", "configured", "testing", "verified", "failed", "enabled", "disabled":
		return true
	}
	return false
}
