package toolstate

import (
	"github.com/toolwarden/toolwarden/services/schema"
)

// Pending is a tool whose current definition is to be validated.
type Pending struct {
	ID     string
	Status string // its state now
	// Was is, for a tool updating (its definition changed), the state it was in
	// before: an enabled one goes back on by its auto-enable policy, one a person
	// disabled or whose tests failed does not.
	Was  string
	Hash string // the definition hash being validated
	Def  schema.Tool
}

// Outcome is what validating one tool found and where it left the tool.
type Outcome struct {
	ID       string
	Status   string
	Worst    schema.Severity
	Findings []schema.Finding
}
