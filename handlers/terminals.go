package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/builtin"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/views"
)

// TerminalsHandler serves /terminals: the built-in terminals (terminal_operations'
// PTY sessions and background commands), live in the browser.
type TerminalsHandler struct {
	*Shell
	Terminals *builtin.Terminals // nil without the built-in server
}

// TerminalAccess is what p may do with terminal t: see it (its owner, administrators
// and auditors) and type into it (its owner when they may use tools, and
// administrators; only a PTY session takes input). Auditors watch read-only.
func TerminalAccess(p *auth.Principal, t *builtin.Terminal) (see, typeIn bool) {
	if p == nil || t == nil {
		return false, false
	}
	own := t.OwnerID != "" && t.OwnerID == p.User.ID
	see = own || p.Can(auth.PermAuditView)
	typeIn = see && t.Kind == builtin.KindPTY && (p.User.Role == auth.RoleAdmin || own && p.Can(auth.PermToolUse))
	return see, typeIn
}

func terminalRow(t *builtin.Terminal) views.TerminalRow {
	owner := t.OwnerName
	if owner == "" {
		owner = "system"
	}
	cols, rows := t.Size()
	return views.TerminalRow{ID: t.ID, Kind: t.Kind, Owner: owner, Conversation: t.ConversationID, Command: t.Command,
		Dir: t.Dir, Started: t.Started, Exited: t.Exited(), Cols: int(cols), Rows: int(rows)}
}

// List shows the terminals the caller may see, oldest first.
func (h TerminalsHandler) List(c echo.Context) error {
	p := PrincipalOf(c)
	topic := builtin.OwnerTopic(p.User.ID)
	if p.Can(auth.PermAuditView) {
		topic = builtin.TerminalsTopic
	}
	page := views.TerminalsPage{Layout: h.layout(c, "Terminals", topic), SeesAll: p.Can(auth.PermAuditView)}
	if h.Terminals != nil {
		for _, t := range h.Terminals.List() {
			if see, _ := TerminalAccess(p, t); see {
				page.Rows = append(page.Rows, terminalRow(t))
			}
		}
	}
	return render(c, http.StatusOK, views.Terminals(page))
}

// Show is one terminal, live (static/js/terminal.js over /terminals/:id/ws).
func (h TerminalsHandler) Show(c echo.Context) error {
	t := h.find(c)
	see, typeIn := TerminalAccess(PrincipalOf(c), t)
	if !see {
		return fault.NotFound("terminal")
	}
	row := terminalRow(t)
	return render(c, http.StatusOK, views.Terminal(views.TerminalPage{Layout: h.layout(c, "Terminal "+t.ID), Row: row,
		ReadOnly: !typeIn, Socket: "/terminals/" + t.ID + "/ws"}))
}

func (h TerminalsHandler) find(c echo.Context) *builtin.Terminal {
	if h.Terminals == nil {
		return nil
	}
	return h.Terminals.Get(c.Param("id"))
}
