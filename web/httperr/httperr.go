// Package httperr is the one place that turns errors into what a person or a program
// sees: a fault's kind gives the HTTP status, its code, message and details the JSON
// error, and PageMessage the words a form or flash shows. Both the web error handler
// and the handlers use it, so the two never disagree.
package httperr

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/services/fault"
)

// StatusClientClosed is the status of a call whose caller went away (nginx's 499).
const StatusClientClosed = 499

var statusOf = map[fault.Kind]int{
	fault.KindNotFound:        http.StatusNotFound,
	fault.KindConflict:        http.StatusConflict,
	fault.KindStale:           http.StatusConflict,
	fault.KindForbidden:       http.StatusForbidden,
	fault.KindInvalid:         http.StatusBadRequest,
	fault.KindUnprocessable:   http.StatusUnprocessableEntity,
	fault.KindRateLimited:     http.StatusTooManyRequests,
	fault.KindUnauthenticated: http.StatusUnauthorized,
	fault.KindUnavailable:     http.StatusServiceUnavailable,
	fault.KindUpstream:        http.StatusBadGateway,
	fault.KindTimeout:         http.StatusGatewayTimeout,
	fault.KindCancelled:       StatusClientClosed,
}

// Status is the HTTP status of a fault kind (500 for KindInternal).
func Status(k fault.Kind) int {
	if s, ok := statusOf[k]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// Response is an error as the API answers it: {"error":{"code","message","details"}}
// with Status.
type Response struct {
	Status  int
	Code    string
	Message string
	Details any
}

// internalMessage is all a caller learns of a failure on our side.
const internalMessage = "Something went wrong on our side; it has been logged."

// Classify maps an error to its response: a fault by its kind, an echo.HTTPError (from
// routing and middleware) by its status, anything else to a 500.
func Classify(err error) Response {
	if f, ok := fault.As(err); ok {
		if f.Kind == fault.KindInternal {
			return Response{Status: http.StatusInternalServerError, Code: "internal", Message: internalMessage}
		}
		msg := f.Message
		if f.Code == "not_found" {
			msg = "Not found." // the API never says which kind of thing was missing
		}
		return Response{Status: Status(f.Kind), Code: f.Code, Message: msg, Details: f.Details}
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		msg := fmt.Sprint(he.Message)
		if he.Internal != nil && he.Code >= 500 {
			msg = http.StatusText(he.Code)
		}
		return Response{Status: he.Code, Code: codeFor(he.Code), Message: msg}
	}
	return Response{Status: http.StatusInternalServerError, Code: "internal", Message: internalMessage}
}

func codeFor(status int) string {
	switch status {
	case http.StatusNotFound:
		return "not_found"
	case http.StatusMethodNotAllowed:
		return "method_not_allowed"
	case http.StatusUnauthorized:
		return "unauthenticated"
	case http.StatusForbidden:
		return "forbidden"
	case http.StatusRequestEntityTooLarge:
		return "too_large"
	case http.StatusBadRequest:
		return "bad_request"
	case http.StatusTooManyRequests:
		return "rate_limited"
	case http.StatusServiceUnavailable:
		return "unavailable"
	}
	if status >= 500 {
		return "internal"
	}
	return strings.ReplaceAll(strings.ToLower(http.StatusText(status)), " ", "_")
}

// PageMessage is the text a page shows (a flash, or next to a form) for an error that
// is the person's to fix, and false for anything else (which goes to the error
// handler). The wording follows the service: calls, prompts and accounts say their
// message as it is; executions and tool states as a sentence. Any other refusal because
// of the current state (conflict, stale, unprocessable) says its message as a sentence:
// it is written for people, and an error page in its place would lose where they were.
func PageMessage(err error) (string, bool) {
	f, ok := fault.As(err)
	if !ok {
		return "", false
	}
	switch {
	case f.Kind == fault.KindInvalid:
		return f.Message, true
	case f.Code == "not_found":
		switch f.Subject {
		case "execution":
			return "That execution does not exist.", true
		case "tool":
			return "That tool no longer exists; it may have been removed with its server.", true
		case "test case":
			return "That test case no longer exists; it may have been deleted.", true
		case "category":
			return "That category no longer exists; it may have been deleted.", true
		}
		return "That no longer exists; it may have been deleted.", true
	case f.Code == "not_connected":
		return "This " + f.Message + ".", true
	case f.Subject == "call", f.Subject == "prompt", f.Subject == "user" && f.Kind == fault.KindConflict:
		return f.Message, true
	case f.Subject == "execution" && f.Kind != fault.KindInternal,
		f.Subject == "tool" && (f.Kind == fault.KindConflict || f.Kind == fault.KindUnprocessable):
		return Sentence(f.Message), true
	case f.Message != "" && (f.Kind == fault.KindConflict || f.Kind == fault.KindStale || f.Kind == fault.KindUnprocessable):
		return asSentence(f.Message), true
	}
	return "", false
}

// asSentence is Sentence for a message that may be one already ("You already have a
// view named …."): it gets no second full stop.
func asSentence(m string) string {
	r, n := utf8.DecodeRuneInString(m)
	m = string(unicode.ToUpper(r)) + m[n:]
	if !strings.HasSuffix(m, ".") && !strings.HasSuffix(m, "?") && !strings.HasSuffix(m, "!") {
		m += "."
	}
	return m
}

// Sentence capitalises a message written as a clause and ends it with a full stop.
func Sentence(m string) string {
	if m == "" {
		return m
	}
	return strings.ToUpper(m[:1]) + m[1:] + "."
}
