package toolstate

import (
	"github.com/toolwarden/toolwarden/services/schema"
)

// Pending is a tool whose current definition is to be validated.
type Pending struct {
	ID     string
	Status string // its state now
	Hash   string // the definition hash being validated
	Def    schema.Tool
}

// Outcome is what validating one tool found and where it left the tool.
type Outcome struct {
	ID       string
	Status   string
	Worst    schema.Severity
	Findings []schema.Finding
}
