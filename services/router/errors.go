package router

import (
	"fmt"

	"github.com/toolwarden/toolwarden/services/fault"
)

// The error codes of a refused or failed call (docs/api.md; the JSON API's error.code),
// each with its kind.
const (
	CodeInvalidArguments = "invalid_arguments" // invalid
	CodeToolNotFound     = "tool_not_found"    // not found
	CodeToolDisabled     = "tool_disabled"     // forbidden
	CodeForbidden        = "forbidden"         // forbidden
	CodeApprovalRequired = "approval_required" // forbidden
	CodeRateLimited      = "rate_limited"      // rate limited
	CodeUpstream         = "upstream_error"    // upstream
	CodeResultTooLarge   = "result_too_large"  // upstream: the server answered with more than --max-message-size
	CodeTimeout          = "timeout"           // timeout
	CodeCancelled        = "cancelled"         // cancelled: the caller went away
	CodeUnavailable      = "unavailable"       // unavailable: the call could not be recorded, so it did not run
	CodeStale            = "stale_plan"        // stale: the tool changed since the call was approved
)

var kindOf = map[string]fault.Kind{
	CodeInvalidArguments: fault.KindInvalid,
	CodeToolNotFound:     fault.KindNotFound,
	CodeToolDisabled:     fault.KindForbidden,
	CodeForbidden:        fault.KindForbidden,
	CodeApprovalRequired: fault.KindForbidden,
	CodeRateLimited:      fault.KindRateLimited,
	CodeUpstream:         fault.KindUpstream,
	CodeResultTooLarge:   fault.KindUpstream,
	CodeTimeout:          fault.KindTimeout,
	CodeCancelled:        fault.KindCancelled,
	CodeUnavailable:      fault.KindUnavailable,
	CodeStale:            fault.KindStale,
}

// Fault is fault.Error under a name that can be embedded in Error (whose method Error
// would clash with a field of that name).
type Fault = fault.Error

// Error is a call the router refused or could not complete: its fault (kind, code,
// message, details: []verr.Field for invalid_arguments, an ApprovalNeeded for
// approval_required; RetryAfter when rate limited) and what the router knows of the
// call. errors.As to a *fault.Error finds the fault. A tool's own error result
// (isError) is not an Error: it is data in the Result.
type Error struct {
	*Fault
	// CallID identifies the call in the usage log and events ("" when it never got one).
	CallID string
	// Ran reports whether the upstream server saw the call (timeouts and upstream
	// errors after sending), which matters to whoever might retry it.
	Ran bool
}

func (e *Error) Error() string { return fmt.Sprintf("router: %s: %s", e.Code, e.Message) }

// Unwrap returns the fault.
func (e *Error) Unwrap() error { return e.Fault }

// Audited reports whether the refusal is in the audit log already (the router records
// the refusals worth a row itself), so the web layer does not record it again.
func (e *Error) Audited() bool { return refusedAudited[e.Code] }

// errorOf is a call error with code (its kind follows) and message.
func errorOf(code, msg string) *Error {
	return &Error{Fault: fault.New(kindOf[code], code, msg).About("call")}
}

func fail(code, format string, args ...any) *Error {
	return errorOf(code, fmt.Sprintf(format, args...))
}

// with sets the details and returns e.
func (e *Error) with(details any) *Error {
	e.Details = details
	return e
}

// ran marks e as a call the upstream server saw, and returns it.
func (e *Error) ran() *Error {
	e.Ran = true
	return e
}

// call sets the call id and returns e.
func (e *Error) call(id string) *Error {
	e.CallID = id
	return e
}

// ApprovalNeeded is the details of an approval_required error: what the call needs
// and where to ask for it.
type ApprovalNeeded struct {
	Risk       string `json:"risk"`
	Why        string `json:"why"`
	Needs      string `json:"needs"`                // "confirm", "phrase", or "approver": another person must approve
	Phrase     string `json:"phrase,omitempty"`     // the phrase to type, for HIGH
	Executions string `json:"executions,omitempty"` // where an API caller submits the call as a plan
}
