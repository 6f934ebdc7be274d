package handlers

import (
	"context"

	"github.com/a-h/templ"

	"github.com/toolwarden/toolwarden/services/events"
)

// executionParts renders an event of one execution's topic for its page.
func (l Live) executionParts(ctx context.Context, ev events.Event) ([]templ.Component, error) {
	return nil, nil
}
