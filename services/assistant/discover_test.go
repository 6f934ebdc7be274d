package assistant_test

import (
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/registry"
)

// Discovering several servers in one message answers with each server's count and no
// numbered tools: numbers over several servers' tools would each pick the last server's
// tool of that number ("tell me about the first one").
func TestDiscoverSeveralServers(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, nil)
	ctx := t.Context()
	names := []string{"alpha", "beta", "gamma"}
	for i, name := range names {
		hs := mcptest.StartHTTP(t, &mcptest.Options{Name: name, Generated: 10 * i})
		a.RegisterServer(t, registry.Spec{Name: name, Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true})
	}
	admin, err := a.Auth.GetUserByName(ctx, "admin")
	if err != nil {
		t.Fatal(err)
	}
	p := &auth.Principal{User: admin, Kind: audit.ActorUser}
	conv := ""
	say := func(msg string) string {
		t.Helper()
		r, err := a.Assistant.Handle(ctx, p, p.Actor("", ""), conv, msg, 0, 0)
		if err != nil {
			t.Fatalf("%q: %v", msg, err)
		}
		conv = r.ConversationID
		if msg == "discover them all" {
			if len(r.Choices) != 0 {
				t.Errorf("%q: %d choices (%q …), want none over several servers", msg, len(r.Choices), r.Choices[0].Label)
			}
			if len(r.Actions) != len(names) {
				t.Errorf("%q: %d actions, want one per server", msg, len(r.Actions))
			}
		}
		for _, act := range r.Actions {
			if act.TargetType == "tool" && !strings.Contains(r.Reply, " on alpha") {
				t.Errorf("%q acted on the tool %s (%q), want nothing of another server than the first", msg, act.Name, r.Reply)
			}
		}
		return r.Reply
	}
	say("show me all servers")
	reply := say("discover them all")
	for _, name := range names {
		if !strings.Contains(reply, name+": ") {
			t.Errorf("the reply does not say what was found on %s: %q", name, reply)
		}
	}
	if reply := say("tell me about the first one"); strings.Contains(reply, " on gamma") {
		t.Errorf("\"the first one\" is a tool of the last server discovered: %q", reply)
	}
	// The way to one server's tools that the reply gives works.
	if !strings.Contains(reply, `"show me the tools on alpha"`) {
		t.Fatalf("the reply does not say how to see one server's tools: %q", reply)
	}
	if reply := say("show me the tools on alpha"); !strings.Contains(reply, "tools on alpha:") {
		t.Errorf("\"show me the tools on alpha\": %q", reply)
	}
}
