package handlers

import (
	"context"
	"errors"
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/builtin"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/views"
)

// TerminalsHandler serves /terminals: the built-in terminals (terminal_operations'
// PTY sessions and background commands), live in the browser.
type TerminalsHandler struct {
	*Shell
	Terminals *builtin.Terminals // nil without the built-in server
	Router    *router.Router     // who may type: who may call the terminal tool now
}

// TerminalAccess is what p may do with terminal t: see it (its owner, administrators
// and auditors) and type into it (its owner when they may use tools, and
// administrators, signed in and not with an API token; only a PTY session takes input). Auditors watch read-only.
func TerminalAccess(p *auth.Principal, t *builtin.Terminal) (see, typeIn bool) {
	if t == nil {
		return false, false
	}
	return access(p, t.OwnerID, t.Kind)
}

// TerminalSizer reports whether p's page sets t's size to its window: only the
// owner's, who may type. The terminal is the agent's; anyone else who may type in it
// (an administrator) sees it at the size its agent and owner gave it, and a second
// window of the owner's takes it over when it connects or is resized.
func TerminalSizer(p *auth.Principal, t *builtin.Terminal) bool {
	_, typeIn := TerminalAccess(p, t)
	return typeIn && t.OwnerID == p.User.ID
}

// TerminalTyping reports whether p may type into terminals now, beyond TerminalAccess:
// keys reach the shell past the router, so whoever types must be able to call the
// terminal tool now (router.Admits: enabled, not refused to them), as send_input's
// caller must. err is set, and may false, when that could not be told (the database
// did not answer), not when the router refuses.
func TerminalTyping(ctx context.Context, r *router.Router, p *auth.Principal) (may bool, err error) {
	if r == nil {
		return true, nil
	}
	err = r.Admits(ctx, p.Actor("", ""), p.User.Role, builtin.TerminalToolName)
	var re *router.Error
	if err != nil && !errors.As(err, &re) {
		return false, err
	}
	return err == nil, nil
}

// RecordAccess is TerminalAccess for a terminal another replica runs.
func RecordAccess(p *auth.Principal, r builtin.TerminalRecord) (see, typeIn bool) {
	return access(p, r.OwnerID, r.Kind)
}

func access(p *auth.Principal, ownerID, kind string) (see, typeIn bool) {
	if p == nil {
		return false, false
	}
	own := ownerID != "" && ownerID == p.User.ID
	see = own || p.Can(auth.PermAuditView)
	// Keys from an API token would reach the shell past the router, where send_input's
	// risk is judged and approval asked: only a person's session types.
	typeIn = see && kind == builtin.KindPTY && p.Kind != audit.ActorToken &&
		(p.User.Role == auth.RoleAdmin || own && p.Can(auth.PermToolUse))
	return see, typeIn
}

func (h TerminalsHandler) terminalRow(t *builtin.Terminal) views.TerminalRow {
	owner := t.OwnerName
	if owner == "" {
		owner = "system"
	}
	cols, rows := t.Size()
	row := views.TerminalRow{ID: t.ID, Kind: t.Kind, Owner: owner, Conversation: t.ConversationID, Command: t.Command,
		Dir: t.Dir, Started: t.Started, Exited: t.Exited(), Cols: int(cols), Rows: int(rows)}
	if s := h.Terminals.Store(); s != nil {
		row.Replica = s.Replica()
	}
	return row
}

// recordRow is the row of a terminal another replica runs (or ran).
func recordRow(r builtin.TerminalRecord) views.TerminalRow {
	owner := r.OwnerName
	if owner == "" {
		owner = "system"
	}
	row := views.TerminalRow{ID: r.ID, Kind: r.Kind, Owner: owner, Conversation: r.ConversationID, Command: r.Command,
		Dir: r.Dir, Started: r.StartedAt, Exited: r.Ended(), Cols: r.Cols, Rows: r.Rows, Replica: r.Replica}
	if r.EndedReason == "replica_stopped" {
		row.ReplicaStopped = true
	}
	return row
}

// List shows the terminals the caller may see, oldest first.
func (h TerminalsHandler) List(c echo.Context) error {
	p := PrincipalOf(c)
	topic := builtin.OwnerTopic(p.User.ID)
	if p.Can(auth.PermAuditView) {
		topic = builtin.TerminalsTopic
	}
	// The cursor is read before the list, so a terminal that starts or ends in between
	// is replayed (never 0: a socket from 0 replays the whole history).
	last, err := h.Events.LatestID(c.Request().Context())
	if err != nil {
		return err
	}
	page := views.TerminalsPage{Layout: h.layout(c, "Terminals", topic), SeesAll: p.Can(auth.PermAuditView)}
	page.Layout.Live.LastEventID = last
	if h.Terminals != nil {
		for _, t := range h.Terminals.List() {
			if see, _ := TerminalAccess(p, t); see {
				page.Rows = append(page.Rows, h.terminalRow(t))
			}
		}
		// The other replicas' terminals (docs/architecture.md, Terminals on several replicas).
		if s := h.Terminals.Store(); s != nil {
			// This replica's terminals are in memory: a failed read of the others' records
			// (the database is away) still shows them, and says what is missing.
			others, err := s.Others(c.Request().Context(), h.Terminals.KeepEnded())
			if err != nil {
				h.Logger.Warn("list the other replicas' terminals", "err", err)
				page.OthersMissing = true
			}
			for _, r := range others {
				if see, _ := RecordAccess(p, r); see {
					page.Rows = append(page.Rows, recordRow(r))
				}
			}
			slices.SortStableFunc(page.Rows, func(a, b views.TerminalRow) int { return a.Started.Compare(b.Started) })
			page.Replicas = true
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
	if typeIn {
		typeIn, _ = TerminalTyping(c.Request().Context(), h.Router, PrincipalOf(c))
	}
	row := h.terminalRow(t)
	return render(c, http.StatusOK, views.Terminal(views.TerminalPage{Layout: h.layout(c, "Terminal "+t.ID), Row: row,
		ReadOnly: !typeIn, Sizes: TerminalSizer(PrincipalOf(c), t), Socket: "/terminals/" + t.ID + "/ws",
		CanEnd: TerminalEnder(PrincipalOf(c)) && !t.Exited()}))
}

// TerminalEnder reports whether p may end anyone's terminal from its page (End): an
// administrator, who may cut a person off (users.manage, the route's permission), and
// whose End ends what that person left running without disabling their account.
func TerminalEnder(p *auth.Principal) bool {
	return p != nil && p.Can(auth.PermUsers)
}

// End ends a running terminal at an administrator's request (POST /terminals/:id/end),
// as close_session does: its output, its record and the audit log (terminal.end, the
// administrator's, written with the record) say so. A terminal another replica runs is
// ended there (the route forwards the request, as it does the terminal's page).
func (h TerminalsHandler) End(c echo.Context) error {
	p := PrincipalOf(c)
	t := h.find(c)
	if see, _ := TerminalAccess(p, t); !see {
		return fault.NotFound("terminal")
	}
	if !TerminalEnder(p) {
		return fault.Forbidden("only an administrator may end a terminal from its page")
	}
	if err := t.EndBy(ActorOf(c)); errors.Is(err, builtin.ErrTerminalEnded) {
		// Nothing was done (ended by itself, or by another administrator): said, not an error.
		setFlash(c, "info", "Terminal "+t.ID+" had ended already.", h.SecureCookies)
		return c.Redirect(http.StatusSeeOther, "/terminals")
	}
	owner := t.OwnerName
	if owner == "" {
		owner = "system"
	}
	return h.redirectWithOutcome(c, nil, func() string { return "Terminal " + t.ID + " of " + owner + " ended." }, "/terminals")
}

func (h TerminalsHandler) find(c echo.Context) *builtin.Terminal {
	if h.Terminals == nil {
		return nil
	}
	return h.Terminals.Get(c.Param("id"))
}
