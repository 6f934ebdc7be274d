package assistant_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/toolname"
	"github.com/toolwarden/toolwarden/services/assistant"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/registry"
)

// blackHole is the URL of a server that accepts connections and never answers: it stays
// connecting (its first attempt) until its connect timeout.
func blackHole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + ln.Addr().String() + "/mcp"
}

// A refresh with unreachable servers answers at once for each (it waited 10 s for each
// in turn, holding the conversation's lock and a connection: 30 s for three), says which
// were not reached and why, and refreshes the live one.
func TestRefreshDoesNotWaitForUnreachable(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, nil)
	dead := []string{"deadone", "deadtwo", "deadthree"}
	for _, n := range dead {
		a.RegisterServer(t, registry.Spec{Name: n, Type: registry.TypeStreamableHTTP, URL: "http://127.0.0.1:1/mcp", Enabled: true})
	}
	a.LiveServer(t, "live", false)
	a.ToolID(t, toolname.Join("live", "echo")) // connected once
	time.Sleep(500 * time.Millisecond)         // each dead server has failed its first attempt
	start := time.Now()
	r := newChat(t, a).say("refresh the tools list from all servers")
	if took, bound := time.Since(start), 2*10*time.Second; took > bound {
		t.Errorf("the refresh took %s, want well within the shared deadline (bound %s)", took, bound)
	}
	_, unreached, ok := strings.Cut(r.Reply, "Not reached")
	if !ok || !strings.Contains(r.Reply, "live: ") || strings.Contains(unreached, "live") {
		t.Fatalf("reply %q, want live refreshed and the dead servers said not reached", r.Reply)
	}
	for _, n := range dead {
		if !strings.Contains(unreached, n+" (server is not connected") {
			t.Errorf("the reply does not name %s as not reached, with its state: %q", n, r.Reply)
		}
	}
}

// Servers still connecting are waited for within one deadline for the whole refresh,
// not one each: four that never finish connecting cost one deadline, and the reply
// names them as not reached.
func TestRefreshSharesOneDeadline(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, nil)
	const wait = 3 * time.Second
	assistant.SetConnectWait(a.Assistant, wait)
	var names []string
	for i := range 4 {
		n := fmt.Sprintf("slow%d", i)
		names = append(names, n)
		a.RegisterServer(t, registry.Spec{Name: n, Type: registry.TypeStreamableHTTP, URL: blackHole(t), Enabled: true})
	}
	a.LiveServer(t, "live", false)
	start := time.Now()
	r := newChat(t, a).say("refresh the tools list from all servers")
	took := time.Since(start)
	if took > 2*wait {
		t.Errorf("the refresh took %s, want about the shared deadline (%s), not one per server", took, wait)
	}
	if took < wait/2 {
		t.Errorf("the refresh took %s: servers still connecting were not waited for", took)
	}
	_, unreached, ok := strings.Cut(r.Reply, "Not reached")
	if !ok || !strings.Contains(r.Reply, "live: ") {
		t.Fatalf("reply %q, want live refreshed and the connecting servers said not reached", r.Reply)
	}
	for _, n := range names {
		if !strings.Contains(unreached, n+" (") {
			t.Errorf("the reply does not name %s as not reached: %q", n, r.Reply)
		}
	}
}

// A server disabled while discovery waits for it to connect is not waited out: the reply
// says at once that it is disabled.
func TestDiscoverConnectingServerDisabledMeanwhile(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, nil)
	sv := a.RegisterServer(t, registry.Spec{Name: "slow", Type: registry.TypeStreamableHTTP, URL: blackHole(t), Enabled: true})
	var waits atomic.Int32
	assistant.OnConnectWait(a.Assistant, func(serverID string) {
		if waits.Add(1) == 2 {
			if _, err := a.Registry.SetEnabled(context.Background(), audit.System, serverID, false); err != nil {
				t.Errorf("disable: %v", err)
			}
		}
	})
	start := time.Now()
	r := newChat(t, a).say("discover tools on slow")
	if !strings.Contains(r.Reply, "is disabled") || time.Since(start) > 5*time.Second {
		t.Errorf("reply %q after %s, want at once that slow (%s) was disabled meanwhile", r.Reply, time.Since(start), sv.ID)
	}
}

// A change the person's role forbids is refused when asked, not put to them first:
// "remove the server live" asked a tool user for a yes and refused it only then, and the
// guided set-up took them through its steps to "You may not do that".
func TestForbiddenChangeRefusedAtOnce(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, nil)
	a.LiveServer(t, "live", false)
	a.ToolID(t, toolname.Join("live", "echo"))
	u := a.CreateUser(t, "tuser", auth.RoleToolUser, "tuser-password-1")
	c := &chat{t: t, a: a, p: &auth.Principal{User: u, Kind: audit.ActorUser}}
	refused := func() int {
		return a.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'assistant.refused' AND actor_id = $1`, u.ID)
	}
	for i, tc := range []struct{ msg, perm string }{
		{"remove the server live", "server.delete"},
		{"I want to set up a new tool", "server.create"},
		{"add a new MCP server", "server.create"},
		{"disable echo", "tool.enable"},
	} {
		c.conv = ""
		r := c.say(tc.msg)
		if !strings.Contains(r.Reply, "You may not do that") || !strings.Contains(r.Reply, tc.perm) || len(r.Choices) != 0 {
			t.Errorf("%q: %q %v, want it refused at once (%s)", tc.msg, r.Reply, r.Choices, tc.perm)
		}
		if got := refused(); got != i+1 {
			t.Errorf("%q: %d refusals audited, want %d", tc.msg, got, i+1)
		}
		for _, next := range []string{"yes", "I need to add one"} {
			if r := c.say(next); strings.Contains(r.Reply, "You may not do that") || strings.Contains(r.Reply, "URL") {
				t.Errorf("%q then %q: %q, want nothing left waiting", tc.msg, next, r.Reply)
			}
		}
	}
	if n := a.Count(t, `SELECT count(*) FROM mcp_servers WHERE name = 'live'`); n != 1 {
		t.Errorf("live was removed")
	}
	// Asking how is answered, without an offer to guide that would be refused.
	c.conv = ""
	r := c.say("how do I add a server?")
	if len(r.Choices) != 0 || strings.Contains(r.Reply, "guide you") || !strings.Contains(r.Reply, "server.create") {
		t.Errorf("a tool user's how do I add a server: %q %v, want how, and that their role may not, with no offer", r.Reply, r.Choices)
	}
	if r := c.say("yes"); !strings.Contains(r.Reply, "haven't asked") {
		t.Errorf("yes after how do I add a server: %q, want nothing waiting", r.Reply)
	}
}

// An API token's question "how do I add a server?" is answered, not refused: the offer
// to guide it left a set-up waiting, which counted as a change, so the token was told it
// may only ask questions and a refusal was audited. Help offers it no set-up either.
func TestTokenHelpOffersNoSetUp(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, nil)
	admin, err := a.Auth.GetUserByName(t.Context(), "admin")
	if err != nil {
		t.Fatal(err)
	}
	c := &chat{t: t, a: a, p: &auth.Principal{User: admin, Kind: audit.ActorToken, TokenID: "tok-help"}}
	r := c.say("how do I add a server?")
	if strings.Contains(r.Reply, "An API token may only ask questions") || !strings.Contains(r.Reply, "Add a new MCP server") || len(r.Choices) != 0 {
		t.Errorf("a token's how do I add a server: %q %v, want how, with no offer to guide", r.Reply, r.Choices)
	}
	r = c.say("what can I do?")
	for _, ch := range r.Choices {
		if strings.Contains(strings.ToLower(ch.Label), "set up") {
			t.Errorf("a token's help offers %q", ch.Label)
		}
	}
	if n := a.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'assistant.refused'`); n != 0 {
		t.Errorf("%d refusals audited for a token's questions, want none", n)
	}
	// A person who may add servers is still offered the guide.
	if r := newChat(t, a).say("how do I add a server?"); !strings.Contains(r.Reply, "guide you") || len(r.Choices) != 2 {
		t.Errorf("an administrator's how do I add a server: %q %v, want the offer to guide", r.Reply, r.Choices)
	}
}

// "All of them" of a list that showed 25 of 30 tools changes nothing for a change other
// than an enable: the rest were never seen. The reply says so and how to name them all.
func TestChangeAllOfPartlyShownListRefused(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "many", Generated: 30})
	a.RegisterServer(t, registry.Spec{Name: "many", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true})
	a.ToolID(t, toolname.Join("many", "gen-00030"))
	c := newChat(t, a)
	total := a.Count(t, `SELECT count(*) FROM mcp_tools t JOIN mcp_servers s ON s.id = t.server_id WHERE s.name = 'many'`)
	if r := c.say("show me the tools on many"); len(r.Choices) != assistant.MaxChoices {
		t.Fatalf("the tools on many: %q", r.Reply)
	}
	r := c.say("make all of them high risk")
	if !strings.Contains(r.Reply, fmt.Sprintf("showed %d of its %d tools", assistant.MaxChoices, total)) || !strings.Contains(r.Reply, "all tools on many") ||
		len(r.Actions) != 0 {
		t.Errorf("make all of them high risk: %q, want it refused as reaching tools not shown", r.Reply)
	}
	if n := a.Count(t, `SELECT count(*) FROM mcp_tools WHERE risk_override IS NOT NULL`); n != 0 {
		t.Errorf("%d tools made high risk, want none", n)
	}
	c.say("show me the tools on many")
	r = c.say(fmt.Sprintf("disable number %d", assistant.MaxChoices+2))
	if !strings.Contains(r.Reply, "was not among the") || len(r.Actions) != 0 {
		t.Errorf("disable number %d: %q, want it refused as not shown", assistant.MaxChoices+2, r.Reply)
	}
}
