package app

import (
	"context"
	"time"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/builtin"
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
