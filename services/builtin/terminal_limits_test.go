package builtin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/confine"
	"github.com/toolwarden/toolwarden/services/builtin"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/replicas"
)

// termOps runs terminal_operations' operations of ts as user in conversation conv
// (its workspace made under root).
type termOps struct {
	t    *testing.T
	root string
	ops  map[string]func(context.Context, builtin.Call, json.RawMessage) (*mcp.CallToolResult, error)
}

func newTermOps(t *testing.T, ts *builtin.Terminals, root string) termOps {
	o := termOps{t: t, root: root, ops: map[string]func(context.Context, builtin.Call, json.RawMessage) (*mcp.CallToolResult, error){}}
	for _, op := range builtin.TerminalTool(ts).Operations {
		o.ops[op.Name] = op.Run
	}
	return o
}

func (o termOps) call(user, conv, op, args string) *mcp.CallToolResult {
	o.t.Helper()
	ws := filepath.Join(o.root, conv)
	if err := os.MkdirAll(ws, 0o700); err != nil {
		o.t.Fatal(err)
	}
	c := builtin.Call{Workspace: ws}
	c.ConversationID, c.UserID, c.UserName = conv, user, user
	res, err := o.ops[op](context.Background(), c, json.RawMessage(args))
	if err != nil {
		o.t.Fatalf("%s %s: %v", op, args, err)
	}
	return res
}

// started calls op and returns the sessionId it answers; the call must succeed.
func (o termOps) started(user, conv, op, args string) string {
	o.t.Helper()
	res := o.call(user, conv, op, args)
	id, _ := res.StructuredContent.(map[string]any)["sessionId"].(string)
	if res.IsError || id == "" {
		o.t.Fatalf("%s by %s in %s: %s", op, user, conv, resultText(res))
	}
	return id
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

const background = `{"command":"sleep 600","background":true,"timeout":3600}`

// One person may have 16 running terminals, sessions and background commands together:
// the 17th is refused with a result that says how many run and how to end some, while
// another person still opens one. A terminal ended with close_session stays listed for
// its output but no longer counts.
func TestTerminalsCappedPerOwner(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	ts, err := builtin.NewTerminals(builtin.TerminalOptions{Root: root, Env: []string{"HOME=" + t.TempDir()}, BufferBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ts.Close)
	o := newTermOps(t, ts, root)
	first := o.started("carol", "c1", "create_session", `{}`)
	for _, conv := range []string{"c2", "c3", "c4"} {
		o.started("carol", conv, "create_session", `{}`)
	}
	for range 12 {
		o.started("carol", "c5", "run_command", background)
	}
	for _, try := range []struct{ conv, op, args string }{{"c6", "create_session", `{}`}, {"c5", "run_command", background}} {
		res := o.call("carol", try.conv, try.op, try.args)
		text := resultText(res)
		if !res.IsError || !strings.Contains(text, "16 terminals running") || !strings.Contains(text, "close_session") ||
			!strings.Contains(text, "/terminals") {
			t.Fatalf("the 17th terminal (%s) was not refused as it should: isError %v, %q", try.op, res.IsError, text)
		}
	}
	o.started("dave", "d1", "create_session", `{}`)
	o.started("dave", "d1", "run_command", background)

	if res := o.call("carol", "c1", "close_session", `{"sessionId":"`+first+`"}`); res.IsError {
		t.Fatalf("close_session: %s", resultText(res))
	}
	if term := ts.Get(first); term == nil || !term.Exited() {
		t.Fatalf("the closed session is not listed as ended: %v", term)
	}
	o.started("carol", "c6", "create_session", `{}`)
	if res := o.call("carol", "c7", "create_session", `{}`); !res.IsError {
		t.Fatal("carol's 17th terminal was let through after her place was taken again")
	}
}

// The process allows MaxRunning terminals in all, whoever owns them.
func TestTerminalsCappedInAll(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	ts, err := builtin.NewTerminals(builtin.TerminalOptions{Root: root, Env: []string{"HOME=" + t.TempDir()}, MaxRunning: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ts.Close)
	o := newTermOps(t, ts, root)
	o.started("carol", "c1", "run_command", background)
	o.started("dave", "d1", "run_command", background)
	last := o.started("erin", "e1", "run_command", background)
	res := o.call("frank", "f1", "create_session", `{}`)
	if text := resultText(res); !res.IsError || !strings.Contains(text, "3 terminals running") || !strings.Contains(text, "close_session") {
		t.Fatalf("the 4th terminal of the process: isError %v, %q", res.IsError, text)
	}
	o.call("erin", "e1", "close_session", `{"sessionId":"`+last+`"}`)
	o.started("frank", "f1", "create_session", `{}`)
}

// A PTY session with no input and no output for IdleTimeout ends, recorded and audited
// as ended by the system for being idle; a session that keeps printing, and one that
// keeps being typed into without printing, go on.
func TestIdleSessionEnds(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	root := t.TempDir()
	const idle = time.Second
	ts, err := builtin.NewTerminals(builtin.TerminalOptions{Root: root, Env: []string{"HOME=" + t.TempDir()}, IdleTimeout: idle,
		Store: builtin.NewTerminalStore(pool, replicas.New(pool, replicas.Options{}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ts.Close)
	who := builtin.TerminalCaller{UserID: "u1", UserName: "carol"}
	open := func(conv string) *builtin.Terminal {
		t.Helper()
		ws := filepath.Join(root, conv)
		if err := os.MkdirAll(ws, 0o700); err != nil {
			t.Fatal(err)
		}
		term, _, err := ts.OpenPTY(who, conv, ws)
		if err != nil {
			t.Fatal(err)
		}
		return term
	}
	quiet, busy, typed := open("quiet"), open("busy"), open("typed")
	if err := busy.Input(who, "while :; do echo tick; sleep 0.1; done\n"); err != nil {
		t.Fatal(err)
	}
	// A loop of the shell's own (no foreground job) reading without echo: what is typed
	// into it shows nothing.
	if err := typed.Input(who, "while read -rs _; do :; done\n"); err != nil {
		t.Fatal(err)
	}
	typeOn := func() {
		if err := typed.Input(who, "x\n"); err != nil {
			t.Fatal(err)
		}
	}
	webtest.WaitFor(t, 30*time.Second, func() bool {
		typeOn()
		return quiet.Exited()
	}, "the idle session ends")
	// Until two more idle timeouts passed: the others would have ended by then.
	for since := time.Now(); time.Since(since) < 2*idle; time.Sleep(100 * time.Millisecond) {
		typeOn()
	}
	if busy.Exited() || typed.Exited() {
		t.Fatalf("an active session ended as idle: printing %v, typed into %v", busy.Exited(), typed.Exited())
	}
	if !quiet.Closed() {
		t.Fatal("the idle session is not recorded as ended by Toolwarden")
	}
	if out, _, _ := quiet.Output(0); !strings.Contains(string(out), "[ended: no input or output for 1s]") {
		t.Fatalf("the idle session's output does not say why it ended:\n%s", out)
	}
	count := func(sql string, args ...any) int {
		var n int
		if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	webtest.WaitFor(t, 10*time.Second, func() bool {
		return count(`SELECT count(*) FROM terminals WHERE id = $1 AND ended_reason = 'idle'`, quiet.ID) == 1
	}, "the record says the session ended idle")
	if n := count(`SELECT count(*) FROM audit_log WHERE action = 'terminal.end' AND actor_kind = 'system' AND target_id = $1
		AND payload->>'ended_reason' = 'idle' AND payload->>'reason' = 'no input or output for 1s'`, quiet.ID); n != 1 {
		t.Fatalf("the idle end audited %d times, want once", n)
	}
	if n := count(`SELECT count(*) FROM terminals WHERE id = ANY($1) AND ended_at IS NOT NULL`, []string{busy.ID, typed.ID}); n != 0 {
		t.Fatalf("%d active sessions recorded as ended", n)
	}
}

// A PTY session at work is busy, not idle: it is not ended while a quiet job runs in
// its foreground however long it prints nothing, nor while the shell itself computes
// (a loop of its own), nor in the moment a job has just ended (the shell between it and
// the rest of the line); it ends once the shell is back at its prompt. Confined, the
// shell runs under the namespace's init, in a process group of its own: it still
// counts as the shell, not as a job.
func TestIdleSessionRunningJobGoesOn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		idle time.Duration
		line string // prints want when it is done, and nothing before
		want string
	}{
		{"job", time.Second, "sleep 5; echo slept-$((2+3))\n", "slept-5"},
		{"shell loop", time.Second, "end=$((SECONDS+4)); while [ $SECONDS -lt $end ]; do :; done; echo spun-$((1+1))\n", "spun-2"},
		// The check while sleep runs is at about 2 s, the next at about 4 s, while the
		// shell waits in read after the job: a job ended since the last look gives
		// the session one more IdleTimeout.
		{"just after a job", 2 * time.Second, "sleep 3; read -t 1.6 x; echo read-$((2+2))\n", "read-4"},
	} {
		for _, conf := range []struct {
			name string
			c    *confine.Confiner
		}{{"unconfined", nil}, {"confined", confine.New(confine.Spec{Hide: []string{t.TempDir()}})}} {
			t.Run(tc.name+"/"+conf.name, func(t *testing.T) {
				t.Parallel()
				root := t.TempDir()
				ts, err := builtin.NewTerminals(builtin.TerminalOptions{Root: root, Env: []string{"HOME=" + t.TempDir()},
					IdleTimeout: tc.idle, Confiner: conf.c})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(ts.Close)
				who := builtin.TerminalCaller{UserID: "u1", UserName: "carol"}
				ws := filepath.Join(root, "c1")
				if err := os.MkdirAll(ws, 0o700); err != nil {
					t.Fatal(err)
				}
				term, _, err := ts.OpenPTY(who, "c1", ws)
				if err != nil {
					t.Fatal(err)
				}
				output := func() string { out, _, _ := term.Output(0); return string(out) }
				// Typed once the shell is at its prompt: a shell still starting (slow
				// under load) is not at a job yet.
				webtest.WaitFor(t, 60*time.Second, func() bool { return strings.Contains(output(), "c1# ") || strings.Contains(output(), "c1$ ") },
					"the shell's prompt")
				// The echoed command line does not hold what it prints when done.
				if err := term.Input(who, tc.line); err != nil {
					t.Fatal(err)
				}
				ended := fmt.Sprintf("[ended: no input or output for %s]", tc.idle)
				webtest.WaitFor(t, 60*time.Second, func() bool {
					out := output()
					return strings.Contains(out, ended) || strings.Contains(out, tc.want)
				}, "the line's end, or the session's")
				if out := output(); strings.Contains(out, ended) {
					t.Fatalf("the session was ended while at work:\n%s", out)
				}
				webtest.WaitFor(t, 30*time.Second, term.Exited, "the session, idle at its prompt, ends")
				if out := output(); !strings.Contains(out, ended) {
					t.Fatalf("the session's output does not say it ended idle:\n%s", out)
				}
			})
		}
	}
}
