// Package fault is the one error vocabulary of the services: an error a caller can act
// on has a kind (not found, conflict, forbidden, ...), a stable code, a message for
// people, optional details, and may wrap a cause. Services return faults and know no
// HTTP; the web layer maps kinds to statuses, JSON and page messages in one place.
package fault

import (
	"errors"
	"fmt"
	"time"
)

// Kind sorts faults by what the caller can do about them.
type Kind uint8

// The kinds. The zero Kind is not a fault: something failed on our side.
const (
	KindInternal        Kind = iota
	KindNotFound             // the thing does not exist (or the caller may not see it)
	KindConflict             // refused because of the current state; reload and retry
	KindStale                // what the caller saw changed since; reload and decide again
	KindForbidden            // the caller may not do this
	KindInvalid              // bad input, ideally field by field (verr)
	KindUnprocessable        // well-formed input that cannot be acted on as given (a wrong phrase, a prompt not understood)
	KindRateLimited          // too many attempts; RetryAfter says when to try again
	KindUnauthenticated      // nobody is signed in
	KindUnavailable          // cannot be done right now on our side; try again shortly
	KindUpstream             // a server or model we depend on failed
	KindTimeout              // a server we depend on did not answer in time
	KindCancelled            // the caller went away
)

var kindCodes = [...]string{
	KindInternal:        "internal",
	KindNotFound:        "not_found",
	KindConflict:        "conflict",
	KindStale:           "stale",
	KindForbidden:       "forbidden",
	KindInvalid:         "invalid_input",
	KindUnprocessable:   "unprocessable",
	KindRateLimited:     "rate_limited",
	KindUnauthenticated: "unauthenticated",
	KindUnavailable:     "unavailable",
	KindUpstream:        "upstream_error",
	KindTimeout:         "timeout",
	KindCancelled:       "cancelled",
}

// String is the kind's default code.
func (k Kind) String() string {
	if int(k) < len(kindCodes) {
		return kindCodes[k]
	}
	return fmt.Sprintf("kind(%d)", k)
}

// Error is a fault. Construct it with the functions below; a package's sentinel (such
// as registry.ErrNotFound) is a *Error too, and errors.Is matches it by identity.
type Error struct {
	Kind Kind
	// Code is stable (the JSON API's error.code): the kind's default or a finer one
	// ("wrong_phrase", "illegal_transition").
	Code string
	// Subject is what the fault is about ("execution", "tool", "user", "call"): it
	// picks the words a page uses where the message alone does not say.
	Subject string
	// Message is for people, written as a clause ("execution 1a2b is running, so
	// it cannot be confirmed"); it is also what Error returns.
	Message string
	// Details is machine-readable context (the JSON API's error.details), nil when none.
	Details any
	// RetryAfter is how long a rate-limited caller should wait (0: unknown).
	RetryAfter time.Duration
	// Err is the cause, if any.
	Err error
	// audited: the refusal is in the audit log already.
	audited bool
}

func (e *Error) Error() string {
	if e.Message == "" && e.Err != nil {
		return e.Err.Error()
	}
	return e.Message
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Audited reports whether the service already wrote the refusal to the audit log, so
// the web layer does not record it again.
func (e *Error) Audited() bool { return e.audited }

// MarkAudited records that the refusal is in the audit log already, and returns e.
func (e *Error) MarkAudited() *Error {
	e.audited = true
	return e
}

// About sets the subject and returns e.
func (e *Error) About(subject string) *Error {
	e.Subject = subject
	return e
}

// WithDetails sets the details and returns e.
func (e *Error) WithDetails(details any) *Error {
	e.Details = details
	return e
}

// Withf is a copy of e (same kind, code, subject and details) with a message from
// format that wraps e, so errors.Is(err, e) still holds: a sentinel with more to say.
func (e *Error) Withf(format string, args ...any) *Error {
	c := *e
	c.Message, c.Err = fmt.Sprintf(format, args...), e
	return &c
}

// New is a fault of kind k with a code ("" for the kind's default) and a message.
func New(k Kind, code, message string) *Error {
	if code == "" {
		code = k.String()
	}
	return &Error{Kind: k, Code: code, Message: message}
}

// Wrap is a fault of kind k with a code, a message and a cause.
func Wrap(err error, k Kind, code, message string) *Error {
	f := New(k, code, message)
	f.Err = err
	return f
}

// NotFound is a subject ("execution", "tool") that does not exist.
func NotFound(subject string) *Error {
	return &Error{Kind: KindNotFound, Code: KindNotFound.String(), Subject: subject, Message: subject + " not found"}
}

// Conflict is an action refused because of the current state.
func Conflict(code, message string) *Error { return New(KindConflict, code, message) }

// Stale is an action on something that changed since the caller saw it.
func Stale(code, message string) *Error { return New(KindStale, code, message) }

// Forbidden is an action the caller may not take; message says why.
func Forbidden(message string) *Error { return New(KindForbidden, "", message) }

// Invalid is bad input; details are usually the fields at fault ([]verr.Field).
func Invalid(code, message string, details any) *Error {
	return New(KindInvalid, code, message).WithDetails(details)
}

// Unprocessable is well-formed input that cannot be acted on as given.
func Unprocessable(code, message string) *Error { return New(KindUnprocessable, code, message) }

// RateLimited is a caller that should slow down and try again after wait.
func RateLimited(message string, wait time.Duration) *Error {
	f := New(KindRateLimited, "", message)
	f.RetryAfter = wait
	return f
}

// Unauthenticated is a request from nobody where somebody is needed.
func Unauthenticated(message string) *Error { return New(KindUnauthenticated, "", message) }

// Unavailable is something that cannot be done right now; try again shortly.
func Unavailable(code, message string) *Error { return New(KindUnavailable, code, message) }

// Upstream is a server or model we depend on that failed.
func Upstream(code, message string) *Error { return New(KindUpstream, code, message) }

// As returns the outermost fault in err's chain.
func As(err error) (*Error, bool) {
	var f *Error
	ok := errors.As(err, &f)
	return f, ok
}

// KindOf is the kind of the outermost fault in err's chain, KindInternal for none.
func KindOf(err error) Kind {
	if f, ok := As(err); ok {
		return f.Kind
	}
	return KindInternal
}

// Is reports whether err is (or wraps) a fault of kind k.
func Is(err error, k Kind) bool { return err != nil && KindOf(err) == k }
