// Package toolstate owns the persistent tool state machine (docs/architecture.md, State machines):
// which transitions are legal and which need an override. services/tools applies moves
// (the conditional update of mcp_tools.status and the tool_state_history row that goes
// with every transition, in the caller's transaction), since it is mcp_tools' one writer.
//
//	discovered → validating → validated | invalid
//	validated → configured → testing → verified | failed
//	verified → enabled ⇄ disabled
//	(any settled state) → updating → validating | validated   when the definition changes
//
// An administrator may enable a validated or configured tool directly (the history says
// testing was skipped), and an invalid or failed one only with a reason (an override).
// Runtime states (connecting, executing, completed, error) are not stored here.
package toolstate

import (
	"fmt"
	"slices"
	"strings"

	"github.com/toolwarden/toolwarden/services/fault"
)

// The persistent tool states.
const (
	Discovered = "discovered"
	Validating = "validating"
	Validated  = "validated"
	Invalid    = "invalid"
	Configured = "configured"
	Testing    = "testing"
	Verified   = "verified"
	Failed     = "failed"
	Enabled    = "enabled"
	Disabled   = "disabled"
	Updating   = "updating"
)

// States lists every persistent state in lifecycle order.
var States = []string{Discovered, Validating, Validated, Invalid, Configured, Testing, Verified, Failed,
	Enabled, Disabled, Updating}

// Topic is the event topic of tool changes (the same as the registry's "tools").
const Topic = "tools"

// edges are the legal transitions.
var edges = map[string][]string{
	Discovered: {Validating},
	Validating: {Validated, Invalid},
	Validated:  {Validating, Configured, Testing, Enabled, Updating},
	Invalid:    {Validating, Enabled, Updating},
	Configured: {Testing, Enabled, Updating},
	Testing:    {Verified, Failed, Updating},
	Verified:   {Testing, Enabled, Updating},
	Failed:     {Testing, Enabled, Updating},
	Enabled:    {Disabled, Updating},
	Disabled:   {Enabled, Updating},
	Updating:   {Validating, Validated},
}

// needsOverride are the transitions an administrator may make only with a reason.
var needsOverride = map[[2]string]string{
	{Invalid, Enabled}: "its definition has critical or error findings",
	{Failed, Enabled}:  "its last test failed",
}

// NeedsOverride reports whether from → to is made only with an override and a reason.
func NeedsOverride(from, to string) bool {
	_, ok := needsOverride[[2]string{from, to}]
	return ok
}

// Allowed reports whether from → to is a legal transition.
func Allowed(from, to string) bool { return slices.Contains(edges[from], to) }

// Next lists the states a tool in state from may move to.
func Next(from string) []string { return slices.Clone(edges[from]) }

// Valid reports whether s is a persistent state.
func Valid(s string) bool { return slices.Contains(States, s) }

// CodeIllegal is the code of a transition the state machine does not have.
const CodeIllegal = "illegal_transition"

// Transition is the details of an illegal transition.
type Transition struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// Illegal is the fault of a transition the state machine does not have.
func Illegal(from, to string) *fault.Error {
	var msg string
	switch next := edges[from]; {
	case !Valid(to):
		msg = fmt.Sprintf("%q is not a tool state (states: %s)", to, strings.Join(States, ", "))
	case len(next) == 0:
		msg = fmt.Sprintf("a tool that is %s cannot become %s", from, to)
	default:
		msg = fmt.Sprintf("a tool that is %s cannot become %s; from %s it can become %s", from, to, from, strings.Join(next, ", "))
	}
	return fault.Conflict(CodeIllegal, msg).About("tool").WithDetails(Transition{From: from, To: to})
}

// ErrOverrideRequired: the transition needs a reason from an administrator. Override
// says which transition and why; errors.Is matches either.
var ErrOverrideRequired = fault.Unprocessable("override_required", "toolstate: an override reason is required").About("tool")

// Override is ErrOverrideRequired saying why from → to needs an override.
func Override(from, to, why string) *fault.Error {
	return ErrOverrideRequired.Withf("a tool that is %s becomes %s only with an override: %s; give a reason", from, to, why)
}

// Moved: the tool was not in the state the caller saw (someone else moved it).
func Moved(toolID, expected, actual string) *fault.Error {
	if actual == "" {
		return fault.Conflict("", fmt.Sprintf("tool %s no longer exists", toolID)).About("tool")
	}
	return fault.Conflict("", fmt.Sprintf("tool %s is %s now, not %s: it changed meanwhile; reload and try again", toolID, actual, expected)).About("tool")
}

// Move is one transition. The update is conditional on From, so of two concurrent moves
// of one tool only the first succeeds.
type Move struct {
	ToolID   string
	From     string
	To       string
	Reason   string
	Actor    string // "system", or the user's name
	Override bool   // an administrator's decision (Reason says why): needed for invalid/failed → enabled
	Metadata map[string]any
}

// Check reports whether m is legal on its own (edge and override rules).
func (m Move) Check() error {
	if !Allowed(m.From, m.To) {
		return Illegal(m.From, m.To)
	}
	if why, ok := needsOverride[[2]string{m.From, m.To}]; ok && (!m.Override || strings.TrimSpace(m.Reason) == "") {
		return Override(m.From, m.To, why)
	}
	return nil
}
