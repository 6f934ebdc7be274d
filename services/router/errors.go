package router

import (
	"fmt"
	"net/http"
	"time"
)

// The error codes of a refused or failed call (DESIGN §1; the JSON API's error.code).
const (
	CodeInvalidArguments = "invalid_arguments" // 400
	CodeToolNotFound     = "tool_not_found"    // 404
	CodeToolDisabled     = "tool_disabled"     // 403
	CodeForbidden        = "forbidden"         // 403
	CodeApprovalRequired = "approval_required" // 403
	CodeRateLimited      = "rate_limited"      // 429
	CodeUpstream         = "upstream_error"    // 502
	CodeResultTooLarge   = "result_too_large"  // 502: the server answered with more than --max-message-size
	CodeTimeout          = "timeout"           // 504
	CodeCancelled        = "cancelled"         // 499: the caller went away
	CodeUnavailable      = "unavailable"       // 503: the call could not be recorded, so it did not run
	CodeStale            = "stale_plan"        // 409: the tool changed since the call was approved
)

var statusOf = map[string]int{
	CodeInvalidArguments: http.StatusBadRequest,
	CodeToolNotFound:     http.StatusNotFound,
	CodeToolDisabled:     http.StatusForbidden,
	CodeForbidden:        http.StatusForbidden,
	CodeApprovalRequired: http.StatusForbidden,
	CodeRateLimited:      http.StatusTooManyRequests,
	CodeUpstream:         http.StatusBadGateway,
	CodeResultTooLarge:   http.StatusBadGateway,
	CodeTimeout:          http.StatusGatewayTimeout,
	CodeCancelled:        499,
	CodeUnavailable:      http.StatusServiceUnavailable,
	CodeStale:            http.StatusConflict,
}

// Error is a call the router refused or could not complete. A tool's own error result
// (isError) is not an Error: it is data in the Result.
type Error struct {
	Code    string
	Message string
	// Details: []verr.Field for invalid_arguments, an Approval for approval_required.
	Details any
	// RetryAfter is how long a rate-limited caller should wait.
	RetryAfter time.Duration
	// CallID identifies the call in the usage log and events ("" when it never got one).
	CallID string
	// Ran reports whether the upstream server saw the call (timeouts and upstream
	// errors after sending), which matters to whoever might retry it.
	Ran bool
}

func (e *Error) Error() string { return fmt.Sprintf("router: %s: %s", e.Code, e.Message) }

// Audited reports whether the refusal is in the audit log already (the router records
// the refusals worth a row itself), so the web layer does not record it again.
func (e *Error) Audited() bool { return refusedAudited[e.Code] }

// Status is the HTTP status of the error's code.
func (e *Error) Status() int {
	if s, ok := statusOf[e.Code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

func fail(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
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
