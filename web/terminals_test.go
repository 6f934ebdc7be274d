package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/builtin"
	"github.com/toolwarden/toolwarden/services/events"
)

// termDial opens a terminal's websocket with c's session, from index from.
func termDial(t *testing.T, srv *webtest.Server, c *http.Client, id string, from int64) (*websocket.Conn, map[string]any) {
	t.Helper()
	h := wsHeader(srv, c)
	conn, res, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/terminals/"+id+"/ws?from="+strconv.FormatInt(from, 10), h)
	if err != nil {
		status := 0
		if res != nil {
			status = res.StatusCode
		}
		t.Fatalf("dial: %v (HTTP %d)", err, status)
	}
	t.Cleanup(func() { conn.Close() })
	var hello map[string]any
	if err := conn.ReadJSON(&hello); err != nil || hello["type"] != "hello" {
		t.Fatalf("hello: %v %v", err, hello)
	}
	return conn, hello
}

// readUntil reads the socket's output frames until they contain want; it returns
// the output and the text messages seen.
func readUntil(t *testing.T, conn *websocket.Conn, want string) (string, []string) {
	t.Helper()
	var out strings.Builder
	var texts []string
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for !strings.Contains(out.String(), want) {
		kind, b, err := conn.ReadMessage()
		if err != nil {
			t.Fatalf("no %q: %v\n%s %v", want, err, out.String(), texts)
		}
		if kind == websocket.BinaryMessage {
			out.Write(b)
		} else {
			texts = append(texts, string(b))
		}
	}
	return out.String(), texts
}

// readNotice reads a terminal socket until a text message (not output) says want.
func readNotice(t *testing.T, conn *websocket.Conn, want string) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		kind, b, err := conn.ReadMessage()
		if err != nil {
			t.Fatalf("no message saying %q: %v", want, err)
		}
		if kind == websocket.TextMessage && strings.Contains(string(b), want) {
			return
		}
	}
}

// The terminal pages: the owner sees and types (every line audited, a password
// typed with echo off as [hidden input]), resizes; another user sees nothing of it; an
// auditor watches read-only and what they send is refused; a reconnect from an index
// gets what came after it.
func TestTerminalPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	term := aliceTerminal(t, srv)
	srv.CreateUser(t, "bob", auth.RoleToolUser, "bob-password-12")
	srv.CreateUser(t, "audrey", auth.RoleAuditor, "audrey-password-1")
	ac := srv.Login(t, "alice", "alice-password-1")
	bc := srv.Login(t, "bob", "bob-password-12")
	dc := srv.Login(t, "audrey", "audrey-password-1")

	if b := body(t, srv.Get(t, ac, "/terminals")); !strings.Contains(b, term.ID) || !strings.Contains(b, `href="/terminals"`) {
		t.Fatalf("alice's list:\n%s", b)
	}
	if b := body(t, srv.Get(t, bc, "/terminals")); strings.Contains(b, term.ID) {
		t.Fatal("bob sees alice's terminal")
	}
	if res := srv.Get(t, bc, "/terminals/"+term.ID); res.StatusCode != http.StatusNotFound {
		t.Fatalf("bob opens alice's terminal: %d", res.StatusCode)
	}
	if b := body(t, srv.Get(t, dc, "/terminals/"+term.ID)); !strings.Contains(b, "terminal-readonly") || !strings.Contains(b, `data-readonly="true"`) {
		t.Fatalf("the auditor's page is not read-only:\n%s", b)
	}
	if b := body(t, srv.Get(t, ac, "/terminals/"+term.ID)); !strings.Contains(b, `data-readonly="false"`) || !strings.Contains(b, "xterm.js") {
		t.Fatalf("alice's page:\n%s", b)
	}

	conn, hello := termDial(t, srv, ac, term.ID, 0)
	if hello["readOnly"] != false {
		t.Fatalf("alice's hello: %v", hello)
	}
	_ = conn.WriteJSON(map[string]any{"type": "input", "data": "echo ws-$((2+3))\r"})
	readUntil(t, conn, "ws-5")
	_ = conn.WriteJSON(map[string]any{"type": "resize", "cols": 77, "rows": 19})
	webtest.WaitFor(t, 5*time.Second, func() bool { c, r := term.Size(); return c == 77 && r == 19 }, "the resize")

	// An administrator may type in it, and sees it at its size: their window does not
	// resize alice's agent's terminal.
	adm := srv.Login(t, "admin", webtest.AdminPassword)
	if b := body(t, srv.Get(t, adm, "/terminals/"+term.ID)); !strings.Contains(b, `data-readonly="false"`) || !strings.Contains(b, `data-sizes="false"`) {
		t.Fatalf("the administrator's page:\n%s", b)
	}
	if b := body(t, srv.Get(t, ac, "/terminals/"+term.ID)); !strings.Contains(b, `data-sizes="true"`) {
		t.Fatalf("alice's page does not size her terminal:\n%s", b)
	}
	aconn, _ := termDial(t, srv, adm, term.ID, 0)
	_ = aconn.WriteJSON(map[string]any{"type": "resize", "cols": 200, "rows": 60})
	_ = aconn.WriteJSON(map[string]any{"type": "input", "data": "echo admin-$((1+1))\r"})
	readUntil(t, aconn, "admin-2")
	if c, r := term.Size(); c != 77 || r != 19 {
		t.Fatalf("the administrator's window resized the terminal to %dx%d", c, r)
	}
	aconn.Close()

	// A password prompt: echo off, the line is audited hidden.
	_ = conn.WriteJSON(map[string]any{"type": "input", "data": "read -s PW; echo got-${#PW}\r"})
	webtest.WaitFor(t, 5*time.Second, func() bool { return !term.Echo() }, "echo off")
	_ = conn.WriteJSON(map[string]any{"type": "input", "data": "hunter2\r"})
	readUntil(t, conn, "got-7")

	dconn, dhello := termDial(t, srv, dc, term.ID, 0)
	if dhello["readOnly"] != true {
		t.Fatalf("the auditor's hello: %v", dhello)
	}
	if out, _ := readUntil(t, dconn, "got-7"); !strings.Contains(out, "ws-5") {
		t.Fatalf("the auditor's history: %s", out)
	}
	_ = dconn.WriteJSON(map[string]any{"type": "input", "data": "echo AUDITOR-TYPED\r"})
	readNotice(t, dconn, "read-only")
	_ = conn.WriteJSON(map[string]any{"type": "input", "data": "echo after\r"})
	readUntil(t, conn, "after\r\n")
	if data, _, _ := term.Output(0); strings.Contains(string(data), "AUDITOR-TYPED") {
		t.Fatal("the auditor typed into the terminal")
	}

	// A reconnect from an index gets only what followed it.
	_, _, end := term.Output(0)
	rconn, rhello := termDial(t, srv, ac, term.ID, end)
	if at, _ := rhello["at"].(float64); int64(at) != end {
		t.Fatalf("reconnect at %v, want %d", rhello["at"], end)
	}
	_ = conn.WriteJSON(map[string]any{"type": "input", "data": "echo again\r"})
	if out, _ := readUntil(t, rconn, "again\r\n"); strings.Contains(out, "ws-5") {
		t.Fatalf("the reconnect repeated older output: %q", out)
	}

	audited := func() []string {
		rows, err := srv.Pool.Query(ctx, `SELECT actor_name, payload FROM audit_log WHERE action = 'terminal.input' AND target_id = $1 ORDER BY id`, term.ID)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var lines []string
		for rows.Next() {
			var who string
			var payload json.RawMessage
			if err := rows.Scan(&who, &payload); err != nil {
				t.Fatal(err)
			}
			var p struct{ Input string }
			_ = json.Unmarshal(payload, &p)
			lines = append(lines, who+": "+p.Input)
		}
		return lines
	}
	var lines []string
	webtest.WaitFor(t, 5*time.Second, func() bool { lines = audited(); return len(lines) >= 6 }, "six audited lines")
	// The administrator's line, audited as theirs, may be written before or after
	// alice's next: each typist's lines are in order.
	if i := slices.Index(lines, "admin: echo admin-$((1+1))"); i < 0 {
		t.Fatalf("the administrator's line is not audited as theirs:\n%s", strings.Join(lines, "\n"))
	} else {
		lines = slices.Delete(lines, i, i+1)
	}
	want := []string{"alice: echo ws-$((2+3))", "alice: read -s PW; echo got-${#PW}", "alice: [hidden input]", "alice: echo after", "alice: echo again"}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("audited input:\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}

// termClosed reads a terminal's socket (the shell's output) until it is closed, within
// wait, failing the test (what happened first: what) unless with code.
func termClosed(t *testing.T, conn *websocket.Conn, wait time.Duration, code int, what string) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(wait))
	for {
		_, msg, err := conn.ReadMessage()
		if err == nil {
			continue // the shell's output
		}
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != code {
			t.Fatalf("%s: %v %s; want close %d", what, err, msg, code)
		}
		return
	}
}

// aliceTerminal creates the tool user alice (password alice-password-1) and a PTY
// terminal of hers in conversation conv-a.
func aliceTerminal(t *testing.T, srv *webtest.Server) *builtin.Terminal {
	t.Helper()
	alice := srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	ws, err := srv.App.Builtin.Workspace("conv-a")
	if err != nil {
		t.Fatal(err)
	}
	srv.App.Enable(t, builtin.TerminalToolName) // who types into it must be able to call it
	term, _, err := srv.App.Terminals.OpenPTY(builtin.TerminalCaller{UserID: alice.ID, UserName: "alice"}, "conv-a", ws)
	if err != nil {
		t.Fatal(err)
	}
	return term
}

// A terminal's socket takes input, so it does not stay open while its session cannot be
// checked: the first periodic check the database cannot answer closes it with 1013 (the
// page reconnects and authenticates again), not 4401 (signed out).
func TestTerminalSocketClosesAtFirstFailedCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, &webtest.Options{Builtin: true, SessionRecheck: 200 * time.Millisecond})
	term := aliceTerminal(t, srv)
	conn, _ := termDial(t, srv, srv.Login(t, "alice", "alice-password-1"), term.ID, 0)
	if _, err := srv.Owner.Exec(ctx, `ALTER TABLE sessions RENAME TO sessions_away`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = srv.Owner.Exec(ctx, `ALTER TABLE sessions_away RENAME TO sessions`) })
	termClosed(t, conn, 15*time.Second, 1013, "with the session unreadable")
	if n := strings.Count(srv.Logs.String(), "terminal ws: re-check the session"); n != 1 {
		t.Fatalf("closed after %d failed checks, want 1", n)
	}
}

// A person disabled while their terminal's socket is open loses it at once, not at the
// next periodic check (30 s here): the socket follows the events about its person.
func TestTerminalSocketClosesWhenItsPersonIsDisabled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	term := aliceTerminal(t, srv)
	conn, _ := termDial(t, srv, srv.Login(t, "alice", "alice-password-1"), term.ID, 0)
	alice, err := srv.Auth.GetUserByName(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Auth.SetDisabled(ctx, audit.System, alice.ID, true); err != nil {
		t.Fatal(err)
	}
	termClosed(t, conn, 10*time.Second, 4401, "after alice was disabled")
}

// A line is recorded before the key that ends it reaches the shell: while the audit log
// cannot be written, nothing that would run a command is typed, and the typist is told.
func TestTerminalInputNotTypedWithoutItsRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	term := aliceTerminal(t, srv)
	conn, _ := termDial(t, srv, srv.Login(t, "alice", "alice-password-1"), term.ID, 0)
	if _, err := srv.Owner.Exec(ctx, `ALTER TABLE audit_log RENAME TO audit_log_away`); err != nil {
		t.Fatal(err)
	}
	_ = conn.WriteJSON(map[string]any{"type": "input", "data": "echo NOT-RUN-$((6*7))\r"})
	readNotice(t, conn, "not typed")
	if _, err := srv.Owner.Exec(ctx, `ALTER TABLE audit_log_away RENAME TO audit_log`); err != nil {
		t.Fatal(err)
	}
	_ = conn.WriteJSON(map[string]any{"type": "input", "data": "echo RUN-$((6*7))\r"})
	readUntil(t, conn, "RUN-42")
	if data, _, _ := term.Output(0); strings.Contains(string(data), "NOT-RUN") {
		t.Fatalf("the unrecorded line reached the shell: %q", data)
	}
	var n int
	if err := srv.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action = 'terminal.input' AND target_id = $1
		AND payload->>'input' = 'echo RUN-$((6*7))'`, term.ID).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the recorded line's rows: %d (%v), want 1", n, err)
	}
}

// Echo turned off (stty -echo) does not hide from the audit log a line the terminal
// rules rate (rm -rf), however many hidden lines came before it; other lines typed with
// echo off stay "[hidden input]" however many in a row (a refused new password is
// asked for again without a visible line between), a password with $ or a wildcard too.
func TestEchoOffDoesNotHideCommands(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	term := aliceTerminal(t, srv)
	alice := builtin.TerminalCaller{UserID: term.OwnerID, UserName: "alice", Source: "browser"}
	if err := term.Input(alice, "stty -echo; exec sh\r"); err != nil {
		t.Fatal(err)
	}
	webtest.WaitFor(t, 10*time.Second, func() bool { return !term.Echo() }, "echo stays on")
	// Passwords whose characters alone a rule matches ($ a variable, a wildcard) stay
	// hidden: only what a command does keeps a hidden line's text.
	for _, line := range []string{"rm -rf /tmp/tw-echo-none", "pw-one", "S3cret$Pass", "pa[ss]w*rd", "pw-four", "rm -rf /tmp/tw-echo-none-2"} {
		if err := term.Input(alice, line+"\r"); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	webtest.WaitFor(t, 10*time.Second, func() bool {
		got = got[:0]
		rows, err := srv.Pool.Query(t.Context(), `SELECT payload->>'input' FROM audit_log
			WHERE action = 'terminal.input' AND target_id = $1 ORDER BY id`, term.ID)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			got = append(got, s)
		}
		return len(got) >= 7
	}, "seven audited lines")
	want := []string{"stty -echo; exec sh", "rm -rf /tmp/tw-echo-none", "[hidden input]", "[hidden input]", "[hidden input]",
		"[hidden input]", "rm -rf /tmp/tw-echo-none-2"}
	if !slices.Equal(got, want) {
		t.Errorf("audited:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Keys sent while the socket checks its person again, after an event about them, wait
// for the answer: a person disabled then has nothing typed, however long the check.
func TestTerminalKeysWaitForTheCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	term := aliceTerminal(t, srv)
	conn, _ := termDial(t, srv, srv.Login(t, "alice", "alice-password-1"), term.ID, 0)
	_ = conn.WriteJSON(map[string]any{"type": "input", "data": "echo BEFORE-$((6*7))\r"})
	readUntil(t, conn, "BEFORE-42")
	alice, err := srv.Auth.GetUserByName(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	// The check the event makes due waits on this lock.
	tx, err := srv.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `LOCK TABLE sessions IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	ev, err := srv.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := events.UserChanged.Publish(ctx, ev, auth.SessionsTopic, events.Session{UserID: alice.ID, Username: "alice"}); err != nil {
		t.Fatal(err)
	}
	if err := ev.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	testkit.WaitForLockWait(t, srv.Pool, "auth.CurrentRole.session")
	_ = conn.WriteJSON(map[string]any{"type": "input", "data": "echo GATED-$((6*7))\r"})
	time.Sleep(500 * time.Millisecond)
	if data, _, _ := term.Output(0); strings.Contains(string(data), "GATED") {
		t.Fatalf("keys reached the shell while the check waited: %q", data)
	}
	if _, err := tx.Exec(ctx, `UPDATE users SET disabled_at = now() WHERE id = $1`, alice.ID); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	termClosed(t, conn, 10*time.Second, 4401, "after alice was disabled")
	time.Sleep(200 * time.Millisecond)
	if data, _, _ := term.Output(0); strings.Contains(string(data), "GATED") {
		t.Fatalf("keys sent during the check reached the shell: %q", data)
	}
}
