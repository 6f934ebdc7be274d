package schema

import (
	"cmp"
	"encoding/json"
	"slices"
)

// Severity says how much a finding matters (seed 004 §6).
type Severity string

// The severities, most serious first.
const (
	// SeverityCritical marks a definition that is dangerous to show to a model:
	// hidden characters, instructions aimed at the model, requests for secrets.
	SeverityCritical Severity = "critical"
	// SeverityError marks a definition that is broken or breaks the MCP rules;
	// the tool needs fixing (or an admin's override) before it may be enabled.
	SeverityError Severity = "error"
	// SeverityWarning suggests an improvement; it never blocks a tool.
	SeverityWarning Severity = "warning"
	// SeverityInfo is a best-practice note.
	SeverityInfo Severity = "info"
)

// Rank orders severities for sorting: critical 0, error 1, warning 2, info 3,
// anything else 4.
func (s Severity) Rank() int {
	switch s {
	case SeverityCritical:
		return 0
	case SeverityError:
		return 1
	case SeverityWarning:
		return 2
	case SeverityInfo:
		return 3
	}
	return 4
}

// Finding is one problem found in a tool definition.
type Finding struct {
	// Path is a JSON pointer into the definition as MCP sends it: "/name",
	// "/description", "/inputSchema/properties/path/description",
	// "/inputSchema/required/2".
	Path string `json:"path"`
	// Code is stable snake_case (see the package documentation); UIs and
	// tests match on it, never on Message.
	Code     string   `json:"code"`
	Severity Severity `json:"severity"`
	// Message is for people: what is wrong and what to do about it.
	Message string `json:"message"`
}

// Tool is an MCP tool definition as tools/list returns it. The JSON field
// names are MCP's, so a tools/list entry unmarshals straight into a Tool.
type Tool struct {
	Name         string          `json:"name"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"` // nil when the tool has none
	Annotations  json.RawMessage `json:"annotations,omitempty"`  // nil when the tool has none
}

// Blocking reports whether fs holds a critical or error finding: such a tool
// may not be enabled without an admin's override (docs/architecture.md, State machines).
func Blocking(fs []Finding) bool {
	for _, f := range fs {
		if f.Severity == SeverityCritical || f.Severity == SeverityError {
			return true
		}
	}
	return false
}

// Worst returns the most serious severity in fs, or "" when fs is empty.
func Worst(fs []Finding) Severity {
	var worst Severity
	for _, f := range fs {
		if worst == "" || f.Severity.Rank() < worst.Rank() {
			worst = f.Severity
		}
	}
	return worst
}

// SortFindings orders findings by severity (most serious first), then path,
// then code, so that lists are stable across runs and easy to diff.
func SortFindings(fs []Finding) {
	slices.SortStableFunc(fs, func(a, b Finding) int {
		return cmp.Or(
			cmp.Compare(a.Severity.Rank(), b.Severity.Rank()),
			cmp.Compare(a.Path, b.Path),
			cmp.Compare(a.Code, b.Code),
			cmp.Compare(a.Message, b.Message),
		)
	})
}
