package router

import (
	"context"
	"errors"

	"github.com/toolwarden/toolwarden/services/tools"
)

// RunCases runs saved test cases in order through Call, each with base's caller and
// approval and the case's arguments, and judges each outcome against the case. A
// refusal that says nothing about the tool (approval missing, no permission, not
// runnable) stops the run and is returned instead: nothing ran, so nothing is judged.
func (r *Router) RunCases(ctx context.Context, base Call, cases []tools.TestCase) ([]tools.CaseResult, error) {
	var results []tools.CaseResult
	for _, tc := range cases {
		c := base
		c.Arguments, c.ID = tc.Arguments, ""
		res, err := r.Call(ctx, c)
		var re *Error
		if errors.As(err, &re) && (re.Code == CodeApprovalRequired || re.Code == CodeForbidden || re.Code == CodeToolDisabled) {
			return nil, re
		}
		cr := tools.CaseResult{CaseID: tc.ID, Name: tc.Name}
		text := ""
		if res != nil {
			cr.DurationMS, text = res.DurationMS, TextOf(res.Content)
		}
		cr.Passed, cr.Message = tc.Passes(err == nil && !res.IsError, text)
		if err != nil && !cr.Passed {
			cr.Message += ": " + err.Error()
		}
		results = append(results, cr)
	}
	return results, nil
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
