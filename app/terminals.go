package app

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/builtin"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/events"
)

// auditTerminalInput records a line typed into a terminal (terminal.input), or
// "[hidden input]" when the terminal had echo off (a password prompt).
func (a *App) auditTerminalInput(t *builtin.Terminal, who builtin.TerminalCaller, line string, hidden bool) {
	if hidden {
		line = "[hidden input]"
	}
	if a.Pool == nil {
		return
	}
	actor := audit.Actor{Kind: audit.ActorUser, ID: who.UserID, Name: who.UserName}
	if who.UserID == "" && who.UserName == "" {
		actor = audit.System
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := audit.AppendAlone(ctx, a.Local, audit.Entry{Actor: actor, Action: "terminal.input", TargetType: "terminal", TargetID: t.ID,
		TargetName: t.ConversationID, Payload: map[string]any{"input": line, "hidden": hidden, "source": who.Source, "kind": t.Kind}})
	if err != nil {
		a.log.Warn("audit terminal input", "terminal", t.ID, "err", err)
	}
}

// announceTerminal publishes a terminal's change on everyone's terminals topic and its
// owner's, so /terminals shows it live. Terminals live in this process; the event
// carries the row, so a page served by any process can show it.
func (a *App) announceTerminal(t *builtin.Terminal, change builtin.TerminalChange) {
	if a.Pool == nil {
		return
	}
	cols, rows := t.Size()
	ev := events.Terminal{ID: t.ID, Kind: t.Kind, ConversationID: t.ConversationID, OwnerID: t.OwnerID, OwnerName: t.OwnerName,
		Dir: t.Dir, Command: t.Command, Started: t.Started, Exited: t.Exited(), Cols: int(cols), Rows: int(rows)}
	kind := map[builtin.TerminalChange]events.Kind[events.Terminal]{builtin.TerminalOpened: events.TerminalOpened,
		builtin.TerminalExited: events.TerminalExited, builtin.TerminalClosed: events.TerminalClosed}[change]
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := db.WithTx(ctx, a.Local, func(tx pgx.Tx) error {
		if _, err := kind.Publish(ctx, tx, builtin.TerminalsTopic, ev); err != nil {
			return err
		}
		if t.OwnerID == "" {
			return nil
		}
		_, err := kind.Publish(ctx, tx, builtin.OwnerTopic(t.OwnerID), ev)
		return err
	})
	if err != nil {
		// Stopping: the pool may be closed before the last terminals are.
		a.log.Debug("announce a terminal", "terminal", t.ID, "err", err)
	}
}
