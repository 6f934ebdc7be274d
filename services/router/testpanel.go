package router

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"
	"golang.org/x/time/rate"

	"github.com/toolwarden/toolwarden/internal/textcheck"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/usage"
)

// casesWait is the longest a run of cases waits, in all, for the caller's and the
// tool's rate limits to let its cases through one by one: the run is a browser's
// request, which must not hang for minutes.
const casesWait = 10 * time.Second

// casesTimeouts is how many cases in a row that time out stop a run: the server is
// not answering, and each further case would wait the tool's whole timeout for nothing.
const casesTimeouts = 2

// CasesStopped is a run of cases that stopped part way: Ran of Of cases ran (RunCases
// returns their outcomes with it: recorded, they verify nothing, since not every case
// ran), then Cause stopped it. errors.As finds the *Error of Cause through it.
type CasesStopped struct {
	Ran, Of int
	Cause   *Error
	// Silent: the last cases timed out one after another (casesTimeouts), so the run
	// stopped rather than wait on a server that does not answer.
	Silent bool
}

func (s *CasesStopped) Error() string { return "router: " + s.Message() }

// Unwrap is the refusal or failure that stopped the run.
func (s *CasesStopped) Unwrap() error { return s.Cause }

// Message says in a sentence how far the run went and why it stopped.
func (s *CasesStopped) Message() string {
	if s.Silent {
		return fmt.Sprintf("the server is not answering: %d of %d cases ran, the last %d timed out one after another, so the rest were not run (%s)",
			s.Ran, s.Of, casesTimeouts, s.Cause.Message)
	}
	return fmt.Sprintf("%d of %d cases ran, then the run stopped: %s", s.Ran, s.Of, s.Cause.Message)
}

// RunCases runs saved test cases in order through Call, each with base's caller and
// approval and the case's arguments, and judges each outcome against the case. A
// refusal that says nothing about the tool (approval missing, no permission, not
// runnable, a rate limit, the caller gone) stops the run. Every case's approval, and
// whether the rate limits can let every case through within casesWait, is checked
// before the first runs, so what would stop the run mostly stops it before any ran:
// then nothing ran, nothing is judged, and that refusal is returned. One that stops
// it part way (a limit another caller used up, the tool's risk rising, the caller
// gone), or casesTimeouts cases in a row timing out, returns the outcomes of the cases
// that ran with a *CasesStopped.
func (r *Router) RunCases(ctx context.Context, base Call, cases []tools.TestCase) ([]tools.CaseResult, error) {
	e, toTool, err := r.casesConsent(ctx, base, cases)
	if err != nil {
		return nil, err
	}
	userLim, toolLim := r.users.get(userKey(base.Actor)), (*rate.Limiter)(nil)
	if e != nil {
		toolLim = r.toolL.get(e.t.ID, e.t.RateLimit)
	}
	if re := casesRate(e, userLim, toolLim, len(cases), toTool); re != nil {
		return nil, re
	}
	deadline := time.Now().Add(casesWait)
	var results []tools.CaseResult
	timeouts := 0
	stop := func(re *Error, silent bool) ([]tools.CaseResult, error) {
		if len(results) == 0 {
			return nil, re // nothing ran: the refusal itself
		}
		return results, &CasesStopped{Ran: len(results), Of: len(cases), Cause: re, Silent: silent}
	}
	for i, tc := range cases {
		if re := pace(ctx, deadline, userLim, toolLim); re != nil {
			return stop(re, false)
		}
		c := base
		c.Arguments, c.ID = tc.Arguments, ""
		began := time.Now()
		res, err := r.Call(ctx, c)
		re := (*Error)(nil)
		if errors.As(err, &re) && stopsCases(re) {
			return stop(re, false)
		}
		cr := tools.CaseResult{CaseID: tc.ID, Name: tc.Name, Saved: tc.UpdatedAt}
		text := ""
		if res != nil {
			cr.DurationMS, text = res.DurationMS, TextOf(res.Content)
		} else {
			cr.DurationMS = ms(time.Since(began)) // a timeout took the tool's whole timeout, not 0 ms
		}
		cr.Passed, cr.Message = tc.Passes(err == nil && !res.IsError, text)
		if err != nil && !cr.Passed {
			// The server's error, of any length: shown to everyone who may see the tool and
			// audited, so what looks like a credential is masked (as calls.go does), and
			// stored, so a NUL is replaced. A router error is said as its message, without
			// the Go prefix ("router: timeout: ").
			why := err.Error()
			if re != nil {
				why = re.Message
			}
			cr.Message = tools.ClipCaseMessage(cr.Message + ": " + textcheck.Storable(usage.RedactText(why)))
		}
		results = append(results, cr)
		if re != nil && re.Code == CodeTimeout {
			timeouts++
		} else {
			timeouts = 0
		}
		if timeouts >= casesTimeouts && i < len(cases)-1 {
			return stop(re, true)
		}
	}
	return results, nil
}

// casesRate is the rate_limited refusal of a run of n cases (toTool of which reach the
// tool's own limiter: the rest are refused before it) that the caller's limiter
// (user) or the tool's (tool) cannot let through within casesWait, nil when both can.
// It spends nothing: the limiters have no reservation that Call could later use, so
// this reads how many calls each holds now (untilToken's Tokens) and how fast it
// refills, and RunCases then paces the cases by the same reading (pace).
func casesRate(e *entry, user, tool *rate.Limiter, n, toTool int) *Error {
	check := func(lim *rate.Limiter, n int, who, or string) *Error {
		wait, most := casesNeed(lim, n)
		if wait <= casesWait {
			return nil
		}
		perMin := int(math.Round(float64(lim.Limit()) * 60))
		re := fail(CodeRateLimited, "%s %d calls a minute; running %d cases needs more calls than that allows within the %s a run of cases may wait: "+
			"run at most %d of them at a time%s", who, perMin, n, casesWait, most, or)
		if n <= most {
			re = fail(CodeRateLimited, "%s %d calls a minute; running %d cases now would wait %s for them, more than the %s a run of cases may wait: "+
				"try again in %s", who, perMin, n, wait.Round(time.Second), casesWait, (wait - casesWait).Round(time.Second))
			re.RetryAfter = wait - casesWait
		}
		return re
	}
	if user != nil {
		if re := check(user, n, "you may make", ""); re != nil {
			return re
		}
	}
	if tool != nil && e != nil && toTool > 0 {
		return check(tool, toTool, e.t.QualifiedName()+" allows", ", or raise the tool's rate limit")
	}
	return nil
}

// casesNeed is how long lim makes n calls made one after another wait in all, and
// how many calls it could let through within casesWait when full.
func casesNeed(lim *rate.Limiter, n int) (time.Duration, int) {
	perSec := float64(lim.Limit())
	most := lim.Burst()
	if perSec > 0 {
		most += int(perSec * casesWait.Seconds())
	}
	short := float64(n) - lim.Tokens()
	switch {
	case short <= 0:
		return 0, most
	case perSec <= 0:
		return time.Duration(math.MaxInt64), most
	}
	return time.Duration(short / perSec * float64(time.Second)), most
}

// pace waits until each limiter has a call for the next case, but never past deadline
// (then Call meets the limit and answers rate_limited); nil, or the caller gone.
func pace(ctx context.Context, deadline time.Time, lims ...*rate.Limiter) *Error {
	var d time.Duration
	for _, lim := range lims {
		if lim != nil {
			d = max(d, untilToken(lim))
		}
	}
	d = min(d, time.Until(deadline))
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return errorOf(CodeCancelled, "the caller cancelled the run")
	case <-t.C:
		return nil
	}
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
// refusal; a case whose own arguments are refused is left to fail as that case. It
// returns too the tool (nil when no case named one) and how many cases passed the check
// (those reach the tool's own rate limit).
func (r *Router) casesConsent(ctx context.Context, base Call, cases []tools.TestCase) (*entry, int, error) {
	var worst *Error
	var rec *callRecord
	var tool *entry
	checked := 0
	for _, tc := range cases {
		c := base
		c.Arguments, c.ID = tc.Arguments, ""
		e, args, err := r.check(ctx, c)
		if e != nil && tool == nil {
			tool = e
		}
		preflighted := false
		if err == nil {
			checked++
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
		return tool, checked, nil
	}
	return tool, checked, rec.refused(ctx, worst)
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
