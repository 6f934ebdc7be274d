package builtin_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/builtin"
)

// One input of many lines writes one terminal.input row, however many newlines it holds
// (the audit log is append-only), holding the first lines and the count of the lines and
// bytes left out.
func TestTerminalInputAuditIsBounded(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	alice := srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	ws, err := srv.App.Builtin.Workspace("conv-flood")
	if err != nil {
		t.Fatal(err)
	}
	who := builtin.TerminalCaller{UserID: alice.ID, UserName: "alice", Source: "browser"}
	// The owner may call the tool: a terminal of someone who may not is ended (app's endRevoked).
	srv.App.Enable(t, builtin.TerminalToolName)
	term, _, err := srv.App.Terminals.OpenPTY(who, "conv-flood", ws)
	if err != nil {
		t.Fatal(err)
	}
	// cat takes the lines as data: the shell runs none of them.
	input := func(s string) {
		t.Helper()
		if err := term.Input(who, s); err != nil && !strings.Contains(err.Error(), "not reading it yet") {
			t.Fatal(err) // typed but not read yet is fine: it was recorded
		}
	}
	rows := func() int {
		return testkit.Count(t, srv.Pool, `SELECT count(*) FROM audit_log WHERE action = 'terminal.input' AND target_id = $1`, term.ID)
	}
	input("cat >/dev/null\r")
	if n := rows(); n != 1 {
		t.Fatalf("%d rows for one line, want 1", n)
	}

	// Enter alone answers a program's [Y/n]: it is recorded; 10,000 of them in one input
	// are one row.
	input(strings.Repeat("\n", 10000))
	if n := rows() - 1; n != 1 {
		t.Fatalf("10,000 newlines wrote %d terminal.input rows, want 1", n)
	}

	before := rows()
	input(strings.Repeat("ab\n", 10000))
	if n := rows() - before; n != 1 {
		t.Fatalf("10,000 short lines wrote %d terminal.input rows, want 1", n)
	}
	var text string
	var lines, omitted, omittedBytes int
	if err := srv.Pool.QueryRow(ctx, `SELECT payload->>'input', coalesce((payload->>'lines')::int, 0),
		coalesce((payload->>'omitted_lines')::int, 0), coalesce((payload->>'omitted_bytes')::int, 0)
		FROM audit_log WHERE action = 'terminal.input' AND target_id = $1 ORDER BY id DESC LIMIT 1`, term.ID).
		Scan(&text, &lines, &omitted, &omittedBytes); err != nil {
		t.Fatal(err)
	}
	kept := strings.Split(text, "\n")
	if lines != 10000 || omitted == 0 || len(kept)+omitted != 10000 || omittedBytes != 2*omitted || kept[0] != "ab" {
		t.Fatalf("the row: %d lines, %d recorded (first %q), %d left out (%d bytes); want 10000 in all, the rest counted",
			lines, len(kept), kept[0], omitted, omittedBytes)
	}

	// A line the terminal rules rate is kept past the bounds: a long paste hides none.
	input(strings.Repeat("ab\n", 1000) + "rm -rf /tmp/tw-flood-x\n")
	var rated string
	if err := srv.Pool.QueryRow(ctx, `SELECT coalesce(payload->>'rated_input', '') FROM audit_log
		WHERE action = 'terminal.input' AND target_id = $1 ORDER BY id DESC LIMIT 1`, term.ID).Scan(&rated); err != nil {
		t.Fatal(err)
	}
	if rated != "rm -rf /tmp/tw-flood-x" {
		t.Fatalf("the rated line past the bounds: %q", rated)
	}

	// Each line is redacted alone: a key pasted after a command does not mask the
	// command, and a token on a line of its own among others is masked.
	last := func() string {
		t.Helper()
		var in string
		if err := srv.Pool.QueryRow(ctx, `SELECT payload->>'input' FROM audit_log WHERE action = 'terminal.input'
			AND target_id = $1 ORDER BY id DESC LIMIT 1`, term.ID).Scan(&in); err != nil {
			t.Fatal(err)
		}
		return in
	}
	input("echo tw-before-key\n-----BEGIN OPENSSH PRIVATE KEY-----\n")
	if got := last(); !strings.HasPrefix(got, "echo tw-before-key\n") {
		t.Errorf("a command before a pasted key: recorded %q, want the command kept", got)
	}
	input("ls\nToken abcdefghijklmnop1234\n")
	if got := last(); strings.Contains(got, "abcdefghijklmnop1234") || !strings.HasPrefix(got, "ls\n") {
		t.Errorf("a token on its own line after ls: recorded %q, want it masked", got)
	}
}

// A password sent in the same input as the command that asks for it ("su -c id\n" and
// the password, or read -s) is not recorded: when the input is recorded the program that
// turns echo off has not run yet, so the lines after the first are recorded as hidden.
// The first line, and an empty one, are recorded as typed.
func TestTerminalInputPasswordAfterCommandHidden(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	alice := srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	ws, err := srv.App.Builtin.Workspace("conv-pw-paste")
	if err != nil {
		t.Fatal(err)
	}
	who := builtin.TerminalCaller{UserID: alice.ID, UserName: "alice", Source: "send_input"}
	// The owner may call the tool: a terminal of someone who may not is ended (app's endRevoked).
	srv.App.Enable(t, builtin.TerminalToolName)
	term, _, err := srv.App.Terminals.OpenPTY(who, "conv-pw-paste", ws)
	if err != nil {
		t.Fatal(err)
	}
	const password = "S3cretPw-tulip"
	if err := term.Input(who, "read -s pw; echo got-${#pw}\n"+password+"\n\n"); err != nil {
		t.Fatal(err)
	}
	webtest.WaitFor(t, 10*time.Second, func() bool {
		data, _, _ := term.Output(0)
		return strings.Contains(string(data), fmt.Sprintf("got-%d", len(password)))
	}, "read -s reads the password")
	var input, unknown, hidden string
	if err := srv.Pool.QueryRow(ctx, `SELECT payload->>'input', coalesce(payload->>'echo_unknown_lines', ''), payload->>'hidden'
		FROM audit_log WHERE action = 'terminal.input' AND target_id = $1 ORDER BY id DESC LIMIT 1`, term.ID).
		Scan(&input, &unknown, &hidden); err != nil {
		t.Fatal(err)
	}
	if want := "read -s pw; echo got-${#pw}\n[hidden input]\n"; input != want || unknown != "1" || hidden != "false" {
		t.Fatalf("recorded %q (echo unknown for %s lines, hidden %s), want %q for 1 line, hidden false", input, unknown, hidden, want)
	}
	if n := testkit.Count(t, srv.Pool, `SELECT count(*) FROM audit_log WHERE payload::text LIKE $1`, "%"+password+"%"); n != 0 {
		t.Fatalf("the password is in %d audit rows", n)
	}
}
