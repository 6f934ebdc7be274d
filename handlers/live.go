package handlers

import (
	"bytes"
	"context"
	"fmt"

	"github.com/a-h/templ"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/views"
)

// Live renders domain events into the HTML fragments pushed over the websocket, with
// the same components the pages use. Fragments do not depend on who receives them
// (topic permissions decide who gets them at all), so the hub renders each event once.
type Live struct{ *Deps }

// Render returns the fragment for ev, ending with the page's new cursor.
func (l Live) Render(ctx context.Context, ev events.Event) ([]byte, error) {
	var parts []templ.Component
	switch ev.Topic {
	case auth.SessionsTopic:
		var se auth.SessionEvent
		if err := ev.Decode(&se); err != nil {
			return nil, err
		}
		active, err := l.Auth.ActiveUsers(ctx)
		if err != nil {
			return nil, err
		}
		parts = append(parts, views.LiveSignedIn(signedInRows(active)))
		if ev.Kind == "session.started" {
			parts = append(parts, views.LiveToast("info", se.Username+" signed in"))
		}
	case audit.Topic:
		var s audit.Summary
		if err := ev.Decode(&s); err != nil {
			return nil, err
		}
		parts = append(parts, views.LiveActivity(activityRow(s)))
	}
	parts = append(parts, views.LiveCursor(ev.ID))
	var buf bytes.Buffer
	for _, p := range parts {
		if err := p.Render(ctx, &buf); err != nil {
			return nil, fmt.Errorf("handlers: render %s event: %w", ev.Kind, err)
		}
	}
	return buf.Bytes(), nil
}

// Reload renders the fragment that tells a page it fell too far behind.
func (l Live) Reload(ctx context.Context, cursor int64) ([]byte, error) {
	var buf bytes.Buffer
	if err := views.LiveReload().Render(ctx, &buf); err != nil {
		return nil, err
	}
	if err := views.LiveCursor(cursor).Render(ctx, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
