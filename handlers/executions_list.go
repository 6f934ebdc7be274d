package handlers

import (
	"context"

	"github.com/a-h/templ"

	"github.com/toolwarden/toolwarden/services/events"
)

// executionsParts renders an event of the executions topic for lists, the approvals
// inbox and the navigation's count.
func (l Live) executionsParts(ctx context.Context, ev events.Event) ([]templ.Component, error) {
	return nil, nil
}
