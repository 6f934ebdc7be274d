package web

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/handlers"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/builtin"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/fault"
)

// terminalReadLimit bounds one message from a terminal page (keys typed or pasted), as
// decompressed (readJSON).
const terminalReadLimit = 64 << 10

// terminalMsg is what the terminal page sends: keys, or its size.
type terminalMsg struct {
	Type       string `json:"type"` // input, resize
	Data       string `json:"data"`
	Cols, Rows int
}

// terminalSocket serves /terminals/:id/ws: the terminal's output from the index
// ?from= (binary frames), then live (a "skipped" message before output that follows
// bytes a slow socket lost); keys from a viewer who may type
// (handlers.TerminalAccess and TerminalTyping), refused from a read-only one; a resize from the owner only
// (handlers.TerminalSizer). Same origin as /ws; the session is checked again as often as
// /ws checks it (every 30 s), and at once on an event about its person.
func (h *hub) terminalSocket(ts *builtin.Terminals) echo.HandlerFunc {
	return func(c echo.Context) error {
		p := handlers.PrincipalOf(c)
		if !h.sameOrigin(c.Request()) {
			return errOriginRefused
		}
		var t *builtin.Terminal
		if ts != nil {
			t = ts.Get(c.Param("id"))
		}
		see, typeIn := handlers.TerminalAccess(p, t)
		if !see {
			return fault.NotFound("terminal")
		}
		// Keys go to the shell past the router: who may type may call the terminal tool
		// now (enabled, not refused to them), as send_input's caller must.
		if typeIn {
			typeIn, _ = h.mayType(c.Request().Context(), p)
		}
		done, err := h.admit(p)
		if err != nil {
			return err
		}
		defer done()
		from, _ := strconv.ParseInt(c.QueryParam("from"), 10, 64)
		conn, err := h.upgrader.Upgrade(c.Response(), c.Request(), nil)
		if err != nil {
			return nil
		}
		h.track(conn, true)
		defer h.track(conn, false)
		h.runTerminal(c.Request().Context(), conn, p, t, from, typeIn, handlers.TerminalSizer(p, t))
		return nil
	}
}

func (h *hub) runTerminal(parent context.Context, conn *websocket.Conn, p *auth.Principal, t *builtin.Terminal, from int64, typeIn, sizes bool) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	defer cancel()
	defer conn.Close()
	conn.SetReadLimit(terminalReadLimit)
	var wmu sync.Mutex
	write := func(kind int, b []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		_ = conn.SetWriteDeadline(time.Now().Add(wsWriteWait))
		return conn.WriteMessage(kind, b)
	}
	writeJSON := func(v any) error {
		b, _ := json.Marshal(v)
		return write(websocket.TextMessage, b)
	}
	who := builtin.TerminalCaller{UserID: p.User.ID, UserName: p.User.Username, Source: builtin.BrowserSource, ActorKind: p.Kind, TokenID: p.TokenID}

	notify, stop := t.Notify() // before the first read, so nothing falls between
	defer stop()
	data, at, next := t.Output(from)
	cols, rows := t.Size()
	// backlog: the next binary message is output written before the page came (the
	// page writes it without answering what it asks of a terminal, terminal.js).
	if writeJSON(map[string]any{"type": "hello", "at": at, "readOnly": !typeIn, "cols": cols, "rows": rows, "backlog": len(data)}) != nil {
		return
	}
	if len(data) > 0 && write(websocket.BinaryMessage, data) != nil {
		return
	}
	from = next

	// Keys wait for the first check below, and for each check an event about this
	// person or the terminal tool makes due, from the moment it arrives.
	gate := newTypingGate()
	// Keys and resizes are the person at work: they keep the session from its idle end,
	// which only page loads did (a person typing here for hours was signed out).
	activity := h.deps.Auth.Activity(p)
	// Reader: keys and resizes, pongs, the client leaving.
	go func() {
		defer cancel()
		_ = conn.SetReadDeadline(time.Now().Add(wsPongWait))
		conn.SetPongHandler(func(string) error { return conn.SetReadDeadline(time.Now().Add(wsPongWait)) })
		for {
			var m terminalMsg
			if err := h.readJSON(conn, terminalReadLimit, &m); err != nil {
				return
			}
			_ = conn.SetReadDeadline(time.Now().Add(wsPongWait))
			if !typeIn {
				_ = writeJSON(map[string]any{"type": "error", "message": "read-only: you may watch this terminal, not type into it"})
				continue
			}
			if !gate.wait(ctx) {
				return
			}
			var err error
			switch m.Type {
			case "input":
				err = t.Input(who, m.Data)
			case "resize":
				if sizes { // anyone else's window leaves the size as it is (TerminalSizer)
					err = t.Resize(m.Cols, m.Rows)
				}
			}
			if err != nil {
				_ = writeJSON(map[string]any{"type": "error", "message": err.Error()})
			}
			if m.Type == "input" || m.Type == "resize" {
				activity.Seen(ctx) // after the key went: a write at most once a minute
			}
		}
	}()

	// An event about this person (disabled, signed out, role changed, a token revoked)
	// checks the session at once, not at the next tick: a terminal takes keys. The
	// watch runs under the bus's lock for every terminal open: whom the event is about
	// is decoded once for all of them and /ws (hub.aboutUser).
	about := make(chan struct{}, 1)
	if h.bus != nil {
		w := h.bus.Watch(func(ev events.Event) {
			if !events.SessionStarted.Is(ev) && h.aboutUser(ev, p.User.ID) {
				gate.due()
				select {
				case about <- struct{}{}:
				default:
				}
			}
		}, auth.SessionsTopic)
		defer w.Close()
	}
	// A change of the terminal tool (disabled, refused to this person) ends typing at
	// once too: the keys reach the shell past the router.
	toolChanged := make(chan struct{}, 1)
	if typeIn && h.deps.Router != nil {
		defer h.deps.Router.OnChange(func() {
			gate.due()
			select {
			case toolChanged <- struct{}{}:
			default:
			}
		})()
	}
	// stillTypes reports whether a socket that types still may, closing conn if it is
	// known no longer to (a database blip is not a refusal): it reconnects read-only.
	stillTypes := func() bool {
		if typeIn {
			if may, err := h.mayType(ctx, p); err == nil && !may {
				h.closeWith(conn, closeServiceRestart, "permissions changed; reconnect")
				return false
			}
		}
		return true
	}
	// still reports whether the session still stands as it did, closing conn if not.
	still := func() bool {
		role, err := h.deps.Auth.CurrentRole(ctx, p)
		if errors.Is(err, auth.ErrNoLongerValid) {
			h.closeWith(conn, closeSessionEnded, "session ended")
			return false
		}
		if err != nil {
			// The database did not answer: a terminal takes input, so it does not
			// stay open unchecked; the page reconnects and authenticates again.
			h.log.Warn("terminal ws: re-check the session", "err", err)
			h.closeWith(conn, closeTryAgainLater, "try again")
			return false
		}
		if role != p.User.Role {
			h.closeWith(conn, closeServiceRestart, "permissions changed; reconnect")
			return false
		}
		return stillTypes()
	}
	// What changed between the handshake's check and the watch is not missed.
	if !gate.check(still) {
		return
	}
	ping := time.NewTicker(wsPingEvery)
	defer ping.Stop()
	// Checked every recheckEvery, and when the session or token ends by itself.
	recheck := time.NewTimer(time.Until(recheckAt(time.Now(), h.recheckEvery(), p)))
	defer recheck.Stop()
	lastCols, lastRows := cols, rows
	flush := func() bool {
		data, at, next := t.Output(from)
		// The buffer wrapped past from while a write was slow: say what was lost before
		// the output that follows, so the client's index stays the terminal's.
		if at > from && writeJSON(map[string]any{"type": "skipped", "from": from, "at": at}) != nil {
			return false
		}
		from = next
		if len(data) > 0 && write(websocket.BinaryMessage, data) != nil {
			return false
		}
		if c, r := t.Size(); c != lastCols || r != lastRows {
			lastCols, lastRows = c, r
			return writeJSON(map[string]any{"type": "size", "cols": c, "rows": r}) == nil
		}
		return true
	}
	done := t.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-notify:
			if !flush() {
				return
			}
		case <-done:
			done = nil
			time.Sleep(50 * time.Millisecond) // the last output, read after the exit
			if !flush() || writeJSON(map[string]any{"type": "exit", "code": t.ExitCode(), "closed": t.Closed()}) != nil {
				return
			}
		case <-ping.C:
			wmu.Lock()
			_ = conn.SetWriteDeadline(time.Now().Add(wsWriteWait))
			err := conn.WriteMessage(websocket.PingMessage, nil)
			wmu.Unlock()
			if err != nil {
				return
			}
		case <-recheck.C:
			gate.due() // keys wait for it, as for a check an event made due
			if !gate.check(still) {
				return
			}
			recheck.Reset(time.Until(recheckAt(time.Now(), h.recheckEvery(), p)))
		case <-about:
			if !gate.check(still) {
				return
			}
		case <-toolChanged:
			// The whole check: it answers a check an event about the person made due too.
			if !gate.check(still) {
				return
			}
		}
	}
}

// mayType is handlers.TerminalTyping, logging what could not be told.
func (h *hub) mayType(ctx context.Context, p *auth.Principal) (bool, error) {
	may, err := handlers.TerminalTyping(ctx, h.deps.Router, p)
	if err != nil {
		h.log.Warn("terminal ws: may the person type", "err", err)
	}
	return may, err
}

// typingGate holds a terminal socket's keys while its right to type is checked again:
// a check is due from the moment an event that may change it arrives (due, called from
// the bus's watch), before the socket's loop gets to it, and keys wait for the answer of
// a check begun after it (begin): one already reading when the event came may have read
// what was before it.
type typingGate struct {
	mu      sync.Mutex
	pending chan struct{} // closed when the checks due are answered; nil: none due
	dues    uint64        // how many times a check was made due
	denied  bool
}

// newTypingGate returns a gate with the socket's first check due.
func newTypingGate() *typingGate { return &typingGate{pending: make(chan struct{}), dues: 1} }

// due makes a check due.
func (g *typingGate) due() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.dues++
	if g.pending == nil {
		g.pending = make(chan struct{})
	}
}

// begin is called as a check begins; its answer (answer) answers the checks made due
// until then only.
func (g *typingGate) begin() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.dues
}

// answer records the result of the check begun at seen, and returns it; the keys go on
// waiting when a check was made due since seen (the loop runs it next).
func (g *typingGate) answer(seen uint64, ok bool) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.denied = g.denied || !ok
	if g.pending != nil && (g.dues == seen || g.denied) {
		close(g.pending)
		g.pending = nil
	}
	return ok
}

// check runs still as a check of the gate and answers with its result.
func (g *typingGate) check(still func() bool) bool {
	seen := g.begin()
	return g.answer(seen, still())
}

// wait returns whether a key may go now: once no check is due, unless one said no
// (false too when ctx ends first).
func (g *typingGate) wait(ctx context.Context) bool {
	for {
		g.mu.Lock()
		pending, denied := g.pending, g.denied
		g.mu.Unlock()
		if denied {
			return false
		}
		if pending == nil {
			return ctx.Err() == nil
		}
		select {
		case <-pending:
		case <-ctx.Done():
			return false
		}
	}
}
