package assistant_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/toolname"
	"github.com/toolwarden/toolwarden/services/assistant"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/tools"
)

// chat is one conversation of the administrator's with the assistant.
type chat struct {
	t    *testing.T
	a    *apptest.App
	p    *auth.Principal
	conv string
}

func newChat(t *testing.T, a *apptest.App) *chat {
	t.Helper()
	admin, err := a.Auth.GetUserByName(t.Context(), "admin")
	if err != nil {
		t.Fatal(err)
	}
	return &chat{t: t, a: a, p: &auth.Principal{User: admin, Kind: audit.ActorUser}}
}

func (c *chat) say(msg string) assistant.Reply {
	c.t.Helper()
	r, err := c.a.Assistant.Handle(context.Background(), c.p, c.p.Actor("", ""), c.conv, msg, 0, 0)
	if err != nil {
		c.t.Fatalf("%q: %v", msg, err)
	}
	c.conv = r.ConversationID
	return r
}

// toolsOf are the ids of a server's tools.
func toolsOf(t *testing.T, a *apptest.App, serverID string) []string {
	t.Helper()
	ts, err := a.Registry.ServerTools(t.Context(), serverID)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, tl := range ts {
		ids = append(ids, tl.ID)
	}
	return ids
}

// A server added in the guided set-up is discovered when the person says yes to "discover
// its tools?", however the yes is put ("yes, enable all of them", "all"), and "which ones
// to enable" then picks among its own tools only: never the tools of a list the
// conversation showed before the set-up began.
func TestSetupYesDiscoversTheNewServer(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, nil)
	a.LiveServer(t, "old", false)
	a.Settled(t, toolname.Join("old", "echo"))
	oldTools := toolsOf(t, a, a.RegisterServer(t, registry.Spec{Name: "older", Type: registry.TypeStreamableHTTP,
		URL: mcptest.StartHTTP(t, &mcptest.Options{Name: "older"}).URL(), Enabled: true}).ID)
	a.Settled(t, toolname.Join("older", "echo"))
	oldTools = append(oldTools, toolsOf(t, a, mustServer(t, a, "old"))...)

	for i, yes := range []string{"yes, enable all of them", "sure, all of them", "all", "1 and 2"} {
		c := newChat(t, a)
		if r := c.say("show me all tools"); !strings.Contains(r.Reply, "tools") || len(r.Choices) == 0 {
			t.Fatalf("show me all tools: %q", r.Reply)
		}
		c.say("I want to set up a new tool")
		c.say("I need to add one")
		c.say(mcptest.StartHTTP(t, &mcptest.Options{Name: "new"}).URL())
		name := "new-" + string(rune('a'+i))
		r := c.say(name)
		if !strings.Contains(r.Reply, "discover available tools") {
			t.Fatalf("adding %s: %q", name, r.Reply)
		}
		newID := mustServer(t, a, name)
		r = c.say(yes)
		if yes == "1 and 2" {
			// Numbers before anything was listed pick nothing: the question is asked again.
			if len(r.Actions) != 0 || !strings.Contains(r.Reply, "nothing to choose from") {
				t.Fatalf("%q before discovery: %q %+v", yes, r.Reply, r.Actions)
			}
			r = c.say("yes")
		}
		for _, act := range r.Actions {
			if act.Kind == string(assistant.IntentEnableTool) {
				t.Fatalf("%q enabled %s (%s): want the discovery asked about; reply %q", yes, act.Name, act.TargetID, r.Reply)
			}
		}
		if len(r.Actions) != 1 || r.Actions[0].Kind != string(assistant.IntentDiscover) || r.Actions[0].TargetID != newID {
			t.Fatalf("%q: actions %+v, want the discovery of %s; reply %q", yes, r.Actions, name, r.Reply)
		}
		if !strings.Contains(r.Reply, "Which ones would you like to enable?") {
			t.Fatalf("%q: %q, want which tools to enable", yes, r.Reply)
		}
		r = c.say("all of them")
		newTools := toolsOf(t, a, newID)
		if len(r.Actions) != len(newTools) {
			t.Errorf("all of them: %d actions, want one per tool of %s (%d): %q", len(r.Actions), name, len(newTools), r.Reply)
		}
		for _, act := range r.Actions {
			if !slices.Contains(newTools, act.TargetID) || slices.Contains(oldTools, act.TargetID) {
				t.Errorf("all of them acted on %s (%s), not a tool of %s", act.Name, act.TargetID, name)
			}
		}
	}

	// Outside the set-up: "enable all of them" right after adding a server is not about
	// the list shown before it.
	c := newChat(t, a)
	c.say("show me all tools")
	url := mcptest.StartHTTP(t, &mcptest.Options{Name: "newest"}).URL()
	if r := c.say("add a new MCP server at " + url + " called newest"); !strings.Contains(r.Reply, "discover available tools") {
		t.Fatalf("add: %q", r.Reply)
	}
	r := c.say("enable all of them")
	for _, act := range r.Actions {
		if act.Kind == string(assistant.IntentEnableTool) {
			t.Errorf("enable all of them after adding a server enabled %s (%s): %q", act.Name, act.TargetID, r.Reply)
		}
	}
}

func mustServer(t *testing.T, a *apptest.App, name string) string {
	t.Helper()
	sv, err := a.Registry.GetServerByName(t.Context(), name)
	if err != nil {
		t.Fatalf("server %s: %v", name, err)
	}
	return sv.ID
}

// A URL the assistant refuses is quoted back with its password masked, in the reply and
// in the conversation kept.
func TestRejectedURLPasswordMasked(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, nil)
	c := newChat(t, a)
	const secret = "Sup3rS3cretPass99"
	for _, msg := range []string{"add a new MCP server at ftp://admin:" + secret + "@example.com/mcp", "I want to set up a new tool"} {
		r := c.say(msg)
		if strings.Contains(r.Reply, secret) {
			t.Errorf("%q: the reply quotes the password: %q", msg, r.Reply)
		}
	}
	c.say("I need to add one")
	if r := c.say("ftp://admin:" + secret + "@example.com/mcp"); strings.Contains(r.Reply, secret) || !strings.Contains(r.Reply, "doesn't appear to be valid") {
		t.Errorf("the set-up's URL step: %q", r.Reply)
	}
	h, err := a.Assistant.History(t.Context(), c.p.User.ID, c.conv, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range h {
		if strings.Contains(m.Body, secret) {
			t.Errorf("a message by the %s kept the password: %q", m.Author, m.Body)
		}
	}
}

// "configure …" changes the settings it read: a save on the tool's page between its read
// and its save is not undone, and the reply says so.
func TestConfigureDoesNotUndoAConcurrentSave(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, nil)
	a.LiveServer(t, "alpha", false)
	id := a.Settled(t, toolname.Join("alpha", "echo")).ID
	page := "from the page"
	assistant.OnConfigRead(a.Assistant, func(toolID string) {
		if _, err := a.Tools.Update(context.Background(), audit.System, toolID, tools.Patch{
			Params: map[string]tools.ParamInput{"message": {Mode: tools.ModeDefault, Text: &page}}}); err != nil {
			t.Errorf("the page's save: %v", err)
		}
	})
	c := newChat(t, a)
	r := c.say("configure echo with message=hello")
	if !strings.Contains(r.Reply, "changed the settings") {
		t.Errorf("reply %q, want that someone changed the settings meanwhile", r.Reply)
	}
	tg, err := a.Tools.Target(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if got := tg.Configuration().Params["message"]; string(got.Value) != `"`+page+`"` {
		t.Errorf("message is %s, want the page's %q kept", got.Value, page)
	}
}

// Discovering the tools of a disabled server says at once to enable it: it will not
// connect while it is disabled.
func TestDiscoverDisabledServer(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "beta"})
	a.RegisterServer(t, registry.Spec{Name: "beta", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: false})
	c := newChat(t, a)
	r := c.say("discover tools on beta")
	if !strings.Contains(r.Reply, "is disabled") || !strings.Contains(r.Reply, "enable the server beta") {
		t.Errorf("reply %q, want that beta is disabled and how to enable it", r.Reply)
	}
}

// "No" to "discover its tools?" after adding a server outside the set-up says the tools
// were not discovered and how to ask later, not that nothing was changed: the server was
// added.
func TestNoToDiscoverSaysServerStays(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, nil)
	c := newChat(t, a)
	url := mcptest.StartHTTP(t, &mcptest.Options{Name: "later"}).URL()
	if r := c.say("add a new MCP server at " + url + " called later"); !strings.Contains(r.Reply, "discover available tools") {
		t.Fatalf("add: %q", r.Reply)
	}
	r := c.say("no")
	if strings.Contains(strings.ToLower(r.Reply), "nothing was changed") || !strings.Contains(r.Reply, `"discover tools on later"`) {
		t.Errorf("no to discovering: %q, want that the tools were not discovered and how to ask for them", r.Reply)
	}
	if len(r.Actions) != 0 {
		t.Errorf("no to discovering acted: %+v", r.Actions)
	}
	mustServer(t, a, "later")
}
