package handlers

import (
	"context"

	"github.com/a-h/templ"

	"github.com/toolwarden/toolwarden/services/builtin"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/grants"
	"github.com/toolwarden/toolwarden/views"
)

// The lists of /grants and /terminals, live. Each event goes to everyone's topic
// (administrators; auditors for terminals) and to its person's (the giver of a grant,
// the owner of a terminal), so what a page receives is what it may show.

// grantParts renders a grant's event: a new row, the row as it is now (a use counted),
// or its removal once it can no longer be used.
func (l Live) grantParts(ctx context.Context, ev events.Event) ([]templ.Component, error) {
	if l.Grants == nil {
		return nil, nil
	}
	var ref events.GrantRef
	if err := ev.Decode(&ref); err != nil {
		return nil, err
	}
	g, err := l.Grants.Get(ctx, ref.ID)
	if fault.Is(err, fault.KindNotFound) {
		return []templ.Component{views.LiveGrantGone(ref.ID)}, nil
	} else if err != nil {
		return nil, err
	}
	if !l.Grants.Usable(g) {
		// One table part a message (a second would be parsed into the first's table):
		// app.js removes the active row when its ended row arrives.
		return []templ.Component{views.LiveGrantEnded(endedGrantRow(l.Grants, g))}, nil
	}
	if events.GrantCreated.Is(ev) {
		return []templ.Component{views.LiveGrantNew(grantRow(g))}, nil
	}
	return []templ.Component{views.LiveGrantRow(grantRow(g))}, nil
}

func grantRow(g grants.Grant) views.GrantRow {
	return views.GrantRow{ID: g.ID, ConversationID: g.ConversationID, Operation: g.Operation, Target: g.Target,
		OneTime: g.OneTime, Uses: g.Uses, By: g.UserName, CreatedAt: g.CreatedAt, ExpiresAt: g.ExpiresAt}
}

// endedGrantRow is g, which can no longer be used, with how it ended.
func endedGrantRow(s *grants.Service, g grants.Grant) views.GrantRow {
	row := grantRow(g)
	row.Ended, row.EndedAt = s.EndOf(g)
	return row
}

// terminalParts renders a terminal's event from the row it carries (the terminal
// lives in the process that runs it).
func terminalParts(ev events.Event) ([]templ.Component, error) {
	var t events.Terminal
	if err := ev.Decode(&t); err != nil {
		return nil, err
	}
	row := views.TerminalRow{ID: t.ID, Kind: t.Kind, Owner: t.OwnerName, Conversation: t.ConversationID, Command: t.Command,
		Dir: t.Dir, Started: t.Started, Exited: t.Exited, Cols: t.Cols, Rows: t.Rows, Replica: t.Replica, ReplicaStopped: t.ReplicaStopped}
	if row.Owner == "" {
		row.Owner = "system"
	}
	switch {
	case events.TerminalOpened.Is(ev):
		return []templ.Component{views.LiveTerminalNew(row)}, nil
	case events.TerminalClosed.Is(ev):
		return []templ.Component{views.LiveTerminalGone(t.ID)}, nil
	}
	return []templ.Component{views.LiveTerminalRow(row)}, nil
}

// listParts reports whether ev's topic is one of the lists' and renders its event.
func (l Live) listParts(ctx context.Context, ev events.Event) ([]templ.Component, bool, error) {
	if _, ok := grants.GiverOfTopic(ev.Topic); ok || ev.Topic == grants.Topic {
		parts, err := l.grantParts(ctx, ev)
		return parts, true, err
	}
	if _, ok := builtin.OwnerOfTopic(ev.Topic); ok || ev.Topic == builtin.TerminalsTopic {
		parts, err := terminalParts(ev)
		return parts, true, err
	}
	return nil, false, nil
}
