// Package verr carries input errors that name the field at fault, so a form can show
// each message next to its field and the API can return them as details. An *Error is
// a fault of kind invalid (errors.As to a *fault.Error gives one, its fields as details).
package verr

import (
	"strings"

	"github.com/toolwarden/toolwarden/services/fault"
)

// Field is one problem with one input field.
type Field struct {
	Field   string `json:"path"`
	Message string `json:"message"`
	// Kind sorts argument errors the way seed 001 does: KindMissing, KindType or
	// KindValue ("" where nobody needs it).
	Kind string `json:"kind,omitempty"`
	// AuthorizationKey is, for a KindNotAllowed field a grant would allow, the
	// operation to ask for (user_collaboration's authorize_operation), and Target the
	// path it is for.
	AuthorizationKey string `json:"authorization_key,omitempty"`
	Target           string `json:"target,omitempty"`
}

// The kinds of argument error (seed 001's validation stages).
const (
	KindMissing = "missing"    // a required parameter is absent
	KindType    = "wrong_type" // present with the wrong JSON type
	KindValue   = "bad_value"  // the right type, but a value the schema does not allow
	// KindNotAllowed: a valid value the caller may not use now (a path outside the
	// conversation's workspace without a grant); what it says is what to do instead.
	KindNotAllowed = "not_allowed"
)

// Error is a set of field problems. A nil *Error means the input was fine.
type Error struct {
	Fields []Field
}

// Add records a problem with field.
func (e *Error) Add(field, message string) {
	e.Fields = append(e.Fields, Field{Field: field, Message: message})
}

// AddKind records a problem of a given kind with field.
func (e *Error) AddKind(field, kind, message string) {
	e.Fields = append(e.Fields, Field{Field: field, Message: message, Kind: kind})
}

// Err returns e as an error when it holds problems, and nil otherwise.
func (e *Error) Err() error {
	if e == nil || len(e.Fields) == 0 {
		return nil
	}
	return e
}

// For returns the message for field, or "".
func (e *Error) For(field string) string {
	if e == nil {
		return ""
	}
	for _, f := range e.Fields {
		if f.Field == field {
			return f.Message
		}
	}
	return ""
}

func (e *Error) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Field + ": " + f.Message
	}
	return "invalid input: " + strings.Join(parts, "; ")
}

// As lets errors.As see e as the invalid fault it is: code invalid_input, its text as
// the message and its fields as the details.
func (e *Error) As(target any) bool {
	f, ok := target.(**fault.Error)
	if ok {
		*f = fault.Invalid("", e.Error(), e.Fields)
	}
	return ok
}

// New is an Error with a single problem.
func New(field, message string) error {
	return &Error{Fields: []Field{{Field: field, Message: message}}}
}
