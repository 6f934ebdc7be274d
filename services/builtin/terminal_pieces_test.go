package builtin_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/builtin"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/tools"
)

// A line typed in pieces is rated as a whole: with the tool set to LOW, "chmod -" and
// then "R 700 …\n" each rate nothing through the router, but the second would run
// chmod -R; the terminal refuses it, as it does when another replica forwards the call
// (RunOp), and types it once the line is cleared. A person typing on the page is not
// held to a call's rating.
func TestSendInputRatedWithItsLine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := lowTerminals(t)
	admin := audit.Actor{Kind: audit.ActorUser, Name: "admin"}
	call := func(args string) *router.Result {
		t.Helper()
		res, err := srv.Router.Call(ctx, router.Call{Tool: terminalTool, Arguments: json.RawMessage(args), Actor: admin, Role: auth.RoleAdmin,
			Source: router.SourceAPI, ConversationID: "conv-pieces"})
		if err != nil {
			t.Fatalf("%s: %v", args, err)
		}
		return res
	}
	var cs struct{ SessionID string }
	if res := call(`{"operation":"create_session"}`); res.IsError || json.Unmarshal(res.StructuredContent, &cs) != nil {
		t.Fatalf("create_session: %+v", res)
	}
	input := func(s string) string {
		b, _ := json.Marshal(map[string]string{"operation": "send_input", "sessionId": cs.SessionID, "input": s})
		return string(b)
	}

	if res := call(input("chmod -")); res.IsError {
		t.Fatalf("the first piece: %s", router.TextOf(res.Content))
	}
	rest := input("R 700 . && echo RAN-$((40+2))\n")
	res := call(rest)
	if text := router.TextOf(res.Content); !res.IsError || !strings.Contains(text, "not typed") || !strings.Contains(text, "chmod -R") {
		t.Fatalf("the piece finishing chmod -R: %v %s, want it refused", res.IsError, text)
	}
	c := builtin.Call{}
	c.ConversationID, c.UserName, c.Source = "conv-pieces", "admin", router.SourceAPI
	fwd, err := srv.App.Terminals.RunOp(ctx, c, "send_input", json.RawMessage(rest))
	if err != nil || !fwd.IsError || !strings.Contains(fwd.Content[0].(*mcp.TextContent).Text, "not typed") {
		t.Fatalf("the piece forwarded to the terminal's replica: %v %+v, want it refused", err, fwd)
	}
	if res := call(input("\x15echo fine-$((40+2))\n")); res.IsError {
		t.Fatalf("the line cleared: %s", router.TextOf(res.Content))
	}

	// A call let through at HIGH was approved at the level the joined line rates: typed.
	if _, err := srv.App.Terminals.RunOp(ctx, c, "send_input", json.RawMessage(input("\x15r"))); err != nil {
		t.Fatal(err)
	}
	piece := json.RawMessage(input("m -r ./gone-x; echo HIGH-$((40+2))\n"))
	if res, err := srv.App.Terminals.RunOp(ctx, c, "send_input", piece); err != nil || !res.IsError {
		t.Fatalf("the piece finishing rm -r, let through at low: %v %+v, want it refused", err, res)
	}
	high := c
	high.Level = "high"
	if res, err := srv.App.Terminals.RunOp(ctx, high, "send_input", piece); err != nil || res.IsError {
		t.Fatalf("the same piece let through at high: %v %+v, want it typed", err, res)
	}

	term := srv.App.Terminals.Get(cs.SessionID)
	page := builtin.TerminalCaller{UserName: "admin", Source: "browser"}
	if err := term.Input(page, "chmod -"); err != nil {
		t.Fatal(err)
	}
	if err := term.Input(page, "R 700 . && echo PAGE-$((40+2))\n"); err != nil {
		t.Fatalf("a person's keys on the page: %v", err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		out, _, _ := term.Output(0)
		if strings.Contains(string(out), "fine-42") && strings.Contains(string(out), "PAGE-42") && strings.Contains(string(out), "HIGH-42") {
			if strings.Contains(string(out), "RAN-42") {
				t.Fatalf("the refused piece ran:\n%s", out)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("session output:\n%s", out)
		}
	}
}

// The router tells the terminal the level it let a call through at: a piece finishing
// a risky line, the typed phrase given for terminal_operations at its default HIGH (the
// test panel's direct call), is typed; the same piece confirmed at MEDIUM is refused.
func TestSendInputLevelFromRouter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	tg := srv.App.Enable(t, terminalTool)
	admin := audit.Actor{Kind: audit.ActorUser, Name: "admin"}
	call := func(args string) *router.Result {
		t.Helper()
		res, err := srv.Router.Call(ctx, router.Call{Tool: terminalTool, Arguments: json.RawMessage(args), Actor: admin, Role: auth.RoleAdmin,
			Source: router.SourceTestPanel, ConversationID: "conv-level", Approval: router.Approval{Confirmed: true, Phrase: router.Phrase(terminalTool)}})
		if err != nil {
			t.Fatalf("%s: %v", args, err)
		}
		return res
	}
	var cs struct{ SessionID string }
	if res := call(`{"operation":"create_session"}`); res.IsError || json.Unmarshal(res.StructuredContent, &cs) != nil {
		t.Fatalf("create_session: %+v", res)
	}
	input := func(s string) string {
		b, _ := json.Marshal(map[string]string{"operation": "send_input", "sessionId": cs.SessionID, "input": s})
		return string(b)
	}
	if res := call(input("r")); res.IsError {
		t.Fatalf("the first piece: %s", router.TextOf(res.Content))
	}
	if res := call(input("m -r ./gone-x; echo HIGH-$((40+2))\n")); res.IsError {
		t.Fatalf("the piece finishing rm -r, approved at HIGH: %s, want it typed", router.TextOf(res.Content))
	}

	medium := "medium"
	if _, err := srv.App.Tools.Update(ctx, audit.System, tg.ID, tools.Patch{Risk: &medium, MayLowerRisk: true, Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	webtest.WaitFor(t, 10*time.Second, func() bool {
		d, err := srv.Router.RiskOf(ctx, terminalTool, json.RawMessage(`{"operation":"get_output","sessionId":"x"}`))
		return err == nil && d.Level == risk.Medium
	}, "the tool's MEDIUM risk in the router")
	if res := call(input("\x15r")); res.IsError {
		t.Fatalf("the first piece at MEDIUM: %s", router.TextOf(res.Content))
	}
	res := call(input("m -r ./gone-y; echo MEDIUM-$((40+2))\n"))
	if text := router.TextOf(res.Content); !res.IsError || !strings.Contains(text, "not typed: with what its line already holds, the command deletes recursively") {
		t.Fatalf("the piece finishing rm -r, confirmed at MEDIUM: %v %s, want it refused saying why", res.IsError, text)
	}

	term := srv.App.Terminals.Get(cs.SessionID)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		out, _, _ := term.Output(0)
		if strings.Contains(string(out), "HIGH-42") {
			if strings.Contains(string(out), "MEDIUM-42") {
				t.Fatalf("the refused piece ran:\n%s", out)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("session output:\n%s", out)
		}
	}
}
