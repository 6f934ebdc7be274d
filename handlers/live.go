package handlers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/a-h/templ"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/tools"
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
	case registry.ServersTopic:
		more, err := l.serverParts(ctx, ev)
		if err != nil {
			return nil, err
		}
		parts = append(parts, more...)
	case tools.Topic:
		more, err := l.toolParts(ctx, ev)
		if err != nil {
			return nil, err
		}
		parts = append(parts, more...)
	case executions.Topic:
		// Lists, the approvals inbox and the navigation's count (executions_list.go).
		more, err := l.executionsParts(ctx, ev)
		if err != nil {
			return nil, err
		}
		parts = append(parts, more...)
	default:
		if id, ok := testRunOf(ev.Topic); ok {
			// A test panel's run: its progress, then its result (testlive.go).
			more, err := l.testRunParts(ctx, id, ev)
			if err != nil {
				return nil, err
			}
			parts = append(parts, more...)
		} else if strings.HasPrefix(ev.Topic, executions.TopicOf("")) {
			// One execution's page: its state, steps and logs (executions.go).
			more, err := l.executionParts(ctx, ev)
			if err != nil {
				return nil, err
			}
			parts = append(parts, more...)
		}
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

// serverParts renders a server event: the card and head of the server, its tools and
// discovery runs after a discovery, progress while one runs, and toasts for changes of
// connection status that people want to notice.
func (l Live) serverParts(ctx context.Context, ev events.Event) ([]templ.Component, error) {
	var p struct {
		ID       string `json:"id"`
		ServerID string `json:"server_id"`
		Name     string `json:"name"`
		Server   string `json:"server"`
		Status   string `json:"status"`
		Previous string `json:"previous"`
		Error    string `json:"last_error"`
		RunError string `json:"error"`
		Pages    int    `json:"pages"`
		Tools    int    `json:"tools"`
		Added    int    `json:"added"`
		Updated  int    `json:"updated"`
		Removed  int    `json:"removed"`
		Total    int    `json:"total"`
	}
	if err := ev.Decode(&p); err != nil {
		return nil, err
	}
	id := p.ID
	if id == "" {
		id = p.ServerID
	}
	switch ev.Kind {
	case "server.deleted":
		return []templ.Component{views.LiveServerGone(id), views.LiveToast("info", "Server "+p.Name+" was deleted.")}, nil
	case "discovery.progress":
		return []templ.Component{views.LiveDiscoveryProgress(id, fmt.Sprintf("Discovering… %d tools from %d pages so far", p.Tools, p.Pages))}, nil
	}
	sv, err := l.Registry.GetServer(ctx, id)
	if errors.Is(err, registry.ErrNotFound) {
		return nil, nil // deleted since; its own event removes it
	}
	if err != nil {
		return nil, err
	}
	parts := []templ.Component{views.LiveServer(serverCard(sv))}
	switch ev.Kind {
	case "server.status":
		switch {
		case p.Status == registry.StatusConnected && p.Previous != registry.StatusConnected:
			parts = append(parts, views.LiveToast("success", sv.Name+" connected"))
		case p.Status == registry.StatusError && p.Previous == registry.StatusConnected:
			parts = append(parts, views.LiveToast("error", sv.Name+" lost its connection: "+p.Error))
		}
	case "discovery.completed", "discovery.failed":
		tools, runs, err := serverToolsAndRuns(ctx, l.Registry, id)
		if err != nil {
			return nil, err
		}
		msg := fmt.Sprintf("Last discovery: %d tools (+%d added, ~%d updated, −%d removed)", p.Total, p.Added, p.Updated, p.Removed)
		if ev.Kind == "discovery.failed" {
			msg = "Last discovery failed: " + p.RunError
		}
		parts = append(parts, views.LiveDiscovery(id, msg, tools, runs))
		if ev.Kind == "discovery.completed" && p.Added+p.Updated+p.Removed > 0 {
			parts = append(parts, views.LiveToast("info", fmt.Sprintf("%s: %d tools added, %d updated, %d removed", sv.Name, p.Added, p.Updated, p.Removed)))
		}
	}
	return parts, nil
}

// maxLiveTools bounds how many tools one event re-renders; a bigger change (a discovery
// of hundreds of tools) tells the pages in a toast instead.
const maxLiveTools = 50

// toolParts renders a tool event: the card (list) of each tool that changed state or
// settings.
func (l Live) toolParts(ctx context.Context, ev events.Event) ([]templ.Component, error) {
	var p struct {
		ID      string `json:"id"`
		Count   int    `json:"count"`
		Changes []struct {
			ID string `json:"id"`
		} `json:"changes"`
	}
	if err := ev.Decode(&p); err != nil {
		return nil, err
	}
	var ids []string
	switch ev.Kind {
	case "tool.changed":
		ids = []string{p.ID}
	case "tool.state":
		if p.Count > maxLiveTools || len(p.Changes) == 0 {
			return []templ.Component{views.LiveToast("info", fmt.Sprintf("%d tools changed state; reload to see them.", p.Count))}, nil
		}
		for _, c := range p.Changes {
			ids = append(ids, c.ID)
		}
	default:
		return nil, nil
	}
	var parts []templ.Component
	for _, id := range ids {
		it, err := l.Tools.Get(ctx, id)
		if errors.Is(err, tools.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		parts = append(parts, views.LiveToolCard(toolCard(it)), views.LiveToolHead(toolCard(it)))
	}
	return parts, nil
}

// Reload renders the fragment that tells a page it fell too far behind.
// Refused is the fragment that tells a page which test runs it asked to follow the
// socket does not follow (the run is not known here, or not the caller's), so their
// panels ask instead of waiting; nil when it refused none. Other topics a page asks for
// and may not see are simply not sent.
func (l Live) Refused(ctx context.Context, topics []string) ([]byte, error) {
	var runs []string
	for _, t := range topics {
		if _, ok := testRunOf(t); ok {
			runs = append(runs, t)
		}
	}
	if len(runs) == 0 {
		return nil, nil
	}
	var buf bytes.Buffer
	if err := views.LiveRefused(strings.Join(runs, ",")).Render(ctx, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

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
