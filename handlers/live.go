package handlers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/a-h/templ"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/grants"
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
		var se events.Session // every kind on the topic carries one
		if err := ev.Decode(&se); err != nil {
			return nil, err
		}
		// Everyone signed in, by name and role: the topic is only for those who may see
		// that (TopicPermission), so the one rendering serves every follower.
		active, err := l.Auth.ActiveUsers(ctx)
		if err != nil {
			return nil, err
		}
		parts = append(parts, views.LiveSignedIn(signedInRows(active)))
		if events.SessionStarted.Is(ev) {
			parts = append(parts, views.LiveToast("info", se.Username+" signed in"))
		}
	case audit.Topic:
		s, err := events.AuditAppended.Decode(ev)
		if err != nil {
			return nil, err
		}
		parts = append(parts, views.LiveActivity(activityRow(s)), views.LiveAuditAppended(s.ID))
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
		if more, ok, err := l.listParts(ctx, ev); ok {
			if err != nil {
				return nil, err
			}
			parts = append(parts, more...)
		} else if user, ok := grants.UserOfTopic(ev.Topic); ok {
			// A question for the person, or its end (collaborations.go), and the count
			// of those still open: the topic is the person's own.
			var c events.Collaboration
			if err := ev.Decode(&c); err != nil {
				return nil, err
			}
			if l.Grants != nil {
				pending, err := l.Grants.Collaborations(ctx, user, grants.StatusPending)
				if err != nil {
					return nil, err
				}
				parts = append(parts, views.LiveNavBadge(questionsNavBadge(len(pending))))
			}
			if events.CollaborationRequested.Is(ev) {
				parts = append(parts, views.LiveCollaborationAsked(views.CollaborationPrompt{ID: c.ID, Prompt: c.Prompt,
					ConversationID: c.ConversationID, AuthorizeOperation: c.AuthorizeOperation, Target: c.Target,
					OneTime: c.GrantOneTime, TTL: time.Duration(c.GrantTTLSeconds) * time.Second}))
				parts = append(parts, views.LiveToast("info", "An agent asks you a question: answer it at the top of the page."))
			} else {
				parts = append(parts, views.LiveCollaborationEnded(c.ID))
			}
		} else if id, replica, ok := testRunOf(ev.Topic); ok {
			// A test panel's run: its progress, then its result (testlive.go).
			more, err := l.testRunParts(ctx, id, replica, ev)
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
	// What the event says besides the server it is about; the rest is read afresh.
	var (
		id        string
		status    events.ServerStatus // of a connection or an edit (connected, edited)
		connected bool
		edited    bool
		discovery *events.DiscoveryResult
		failure   *events.DiscoveryFailure
		err       error
	)
	switch ev.Kind {
	case string(events.ServerDeleted):
		p, err := events.ServerDeleted.Decode(ev)
		if err != nil {
			return nil, err
		}
		counts, err := l.serverCounts(ctx)
		if err != nil {
			return nil, err
		}
		return []templ.Component{views.LiveServerGone(p.ID), counts, views.LiveToast("info", "Server "+p.Name+" was deleted.")}, nil
	case string(events.DiscoveryProgress):
		p, err := events.DiscoveryProgress.Decode(ev)
		if err != nil {
			return nil, err
		}
		return []templ.Component{views.LiveDiscoveryProgress(p.ServerID, fmt.Sprintf("Discovering… %d tools from %d pages so far", p.Tools, p.Pages))}, nil
	case string(events.ServerStatusChanged):
		status, err = events.ServerStatusChanged.Decode(ev)
		id, connected = status.ID, true
	case string(events.ServerChanged):
		status, err = events.ServerChanged.Decode(ev)
		id, edited = status.ID, true
	case string(events.DiscoveryCompleted):
		var p events.DiscoveryResult
		p, err = events.DiscoveryCompleted.Decode(ev)
		id, discovery = p.ServerID, &p
	case string(events.DiscoveryFailed):
		var p events.DiscoveryFailure
		p, err = events.DiscoveryFailed.Decode(ev)
		id, failure = p.ServerID, &p
	default:
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	sv, err := l.Registry.GetServer(ctx, id)
	if errors.Is(err, registry.ErrNotFound) {
		return nil, nil // deleted since; its own event removes it
	}
	if err != nil {
		return nil, err
	}
	var parts []templ.Component
	card := serverCard(sv)
	// Lists opened before it have no card of it (a list that has one already drops
	// the second: app.js liveLists).
	if edited && status.Created {
		parts = append(parts, views.LiveServerNew(card))
	}
	// Rendered once for every viewer: the count of executions waiting or running on it
	// (its delete confirmation's warning) is in every copy, as the server's own page
	// has it for whoever may delete it.
	if l.Executions != nil {
		// Without it the card still says what changed; only the warning is left out.
		if n, err := l.Executions.WaitingByServer(ctx, []string{sv.ID}); err != nil {
			l.Logger.Warn("live: count the executions waiting on a server", "server", sv.ID, "err", err)
		} else {
			card.Waiting = n[sv.ID]
		}
	}
	parts = append(parts, views.LiveServer(card))
	if connected || edited {
		// An edit changes how the server is reached, a connection its circuit and health:
		// the page's panels of both, as Show renders them.
		health, err := serverHealth(ctx, l.Registry, sv)
		if err != nil {
			return nil, err
		}
		parts = append(parts, views.LiveServerPanels(serverConnection(l.MCP, l.MCP.Snapshot(sv.ID), l.Router, sv), health))
		// A creation, a connection, and an edit (disabling writes its status without
		// a status event of its own) each move the counts.
		counts, err := l.serverCounts(ctx)
		if err != nil {
			return nil, err
		}
		parts = append(parts, counts)
	}
	switch {
	case connected:
		// A connection brings what the server says about itself (its page's first panel).
		parts = append(parts, views.LiveServerInfo(serverInfo(sv)))
		switch {
		case status.Status == registry.StatusConnected && status.Previous != registry.StatusConnected:
			parts = append(parts, views.LiveToast("success", sv.Name+" connected"))
		case status.Status == registry.StatusError && status.Previous == registry.StatusConnected:
			parts = append(parts, views.LiveToast("error", sv.Name+" lost its connection: "+status.LastError))
		}
	case discovery != nil || failure != nil:
		var msg string
		if failure != nil {
			msg = "Last discovery failed: " + failure.Error
		} else {
			msg = fmt.Sprintf("Last discovery: %d tools (+%d added, ~%d updated, −%d removed)", discovery.Total, discovery.Added, discovery.Updated, discovery.Removed)
		}
		part, err := l.discoveryPart(ctx, sv, msg)
		if err != nil {
			return nil, err
		}
		parts = append(parts, part)
		if discovery != nil && discovery.Added+discovery.Updated+discovery.Removed > 0 {
			parts = append(parts, views.LiveToast("info", fmt.Sprintf("%s: %d tools added, %d updated, %d removed", sv.Name, discovery.Added, discovery.Updated, discovery.Removed)))
		}
	}
	return parts, nil
}

// serverCounts renders the server list's counts: all servers, and those in each status.
func (l Live) serverCounts(ctx context.Context) (templ.Component, error) {
	counts, all, err := countServers(ctx, l.Registry)
	if err != nil {
		return nil, err
	}
	return views.LiveServerCounts(all, statusOptions(), counts), nil
}

// maxLiveServerTools bounds the rows of a server's tool table pushed after a discovery:
// the fragment goes to every page following the servers topic, so a bigger table is
// replaced by a notice to reload the page.
const maxLiveServerTools = 100

// discoveryPart renders what a discovery changes on sv's page: its progress line, its
// tool table (or, past maxLiveServerTools, a notice to reload) and its runs.
func (l Live) discoveryPart(ctx context.Context, sv registry.Server, msg string) (templ.Component, error) {
	runs, err := serverRuns(ctx, l.Registry, sv.ID)
	if err != nil {
		return nil, err
	}
	// ToolCount counts the tools the server still lists, so a server past the bound by
	// it is not read at all; the table also lists unavailable tools, hence the check below.
	if sv.ToolCount > maxLiveServerTools {
		return views.LiveDiscoveryOmitted(sv.ID, msg, sv.ToolCount, runs), nil
	}
	page, err := l.Registry.ServerToolsPage(ctx, sv.ID, maxLiveServerTools, "")
	if err != nil {
		return nil, err
	}
	if page.NextCursor != "" {
		return views.LiveDiscoveryOmitted(sv.ID, msg, page.Total, runs), nil
	}
	return views.LiveDiscovery(sv.ID, msg, toolRows(page.Tools), runs), nil
}

// maxLiveTools bounds how many tools one event re-renders; a bigger change (a discovery
// of hundreds of tools) tells the pages in a toast instead.
const maxLiveTools = 50

// toolParts renders a tool event: the card (list) of each tool that changed state or
// settings.
func (l Live) toolParts(ctx context.Context, ev events.Event) ([]templ.Component, error) {
	var ids []string
	switch ev.Kind {
	case string(events.ServerDeleted):
		p, err := events.ServerDeleted.Decode(ev)
		if err != nil {
			return nil, err
		}
		return []templ.Component{views.LiveServerToolsGone(p.ID), views.LiveToast("info", "Server "+p.Name+" was deleted, and its tools with it.")}, nil
	case string(events.ToolChanged):
		p, err := events.ToolChanged.Decode(ev)
		if err != nil {
			return nil, err
		}
		ids = []string{p.ID}
	case string(events.ToolStateChanged):
		p, err := events.ToolStateChanged.Decode(ev)
		if err != nil {
			return nil, err
		}
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
		if _, _, ok := testRunOf(t); ok {
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
