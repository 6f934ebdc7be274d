package assistant_test

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/toolname"
	"github.com/toolwarden/toolwarden/services/assistant"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/registry"
)

// A configure message matching 10,000 tools reads the stored settings of at most the
// tools it offers to choose from, and of none for a person who may not configure tools:
// each read is a query inside the turn's transaction.
func TestSecretCheckReadsBounded(t *testing.T) {
	t.Parallel()
	const n = 10000
	a := apptest.Start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "big", Generated: n})
	a.RegisterServer(t, registry.Spec{Name: "big", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true})
	a.ToolID(t, toolname.Join("big", "gen-10000"))
	var reads atomic.Int64
	assistant.OnStoredRead(a.Assistant, func(string) { reads.Add(1) })

	admin := newChat(t, a)
	r := admin.say("configure gen with limit=5")
	if got := reads.Load(); got > assistant.MaxChoices {
		t.Errorf("configure gen with limit=5 (%d choices): read the settings of %d tools, want at most %d", len(r.Choices), got, assistant.MaxChoices)
	}

	a.CreateUser(t, "gina", auth.RoleGuest, "correct-horse-battery-9")
	guest, err := a.Auth.GetUserByName(t.Context(), "gina")
	if err != nil {
		t.Fatal(err)
	}
	c := &chat{t: t, a: a, p: &auth.Principal{User: guest, Kind: audit.ActorUser}}
	reads.Store(0)
	r = c.say("configure all gen tools with limit=5")
	if got := reads.Load(); got != 0 {
		t.Errorf("a guest's configure of all gen tools read the settings of %d tools, want none (reply %q)", got, r.Reply)
	}
}

// Seed 004 §7's server names ("Weather API", "Example API") are registered as names the
// registry takes (weather-api), and the reply says the name used.
func TestServerNameSlugged(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, nil)
	c := newChat(t, a)
	url := mcptest.StartHTTP(t, &mcptest.Options{Name: "weather"}).URL()
	r := c.say("Add a new MCP server at " + url + " called Weather API")
	if !strings.Contains(r.Reply, "discover available tools") || !strings.Contains(r.Reply, "weather-api") {
		t.Errorf("add … called Weather API: %q, want it added as weather-api", r.Reply)
	}
	if sv, err := a.Registry.GetServerByName(t.Context(), "weather-api"); err != nil {
		t.Errorf("weather-api: %v", err)
	} else if !strings.Contains(sv.Description, "Weather API") {
		t.Errorf("weather-api's description is %q, want the name as typed", sv.Description)
	}

	c = newChat(t, a)
	c.say("I want to set up a new tool")
	c.say("I need to add one")
	c.say(mcptest.StartHTTP(t, &mcptest.Options{Name: "example"}).URL())
	r = c.say("Example API")
	if !strings.Contains(r.Reply, "discover available tools") || !strings.Contains(r.Reply, "example-api") {
		t.Errorf("the set-up's name Example API: %q, want it added as example-api", r.Reply)
	}
	mustServer(t, a, "example-api")
}

// A URL carrying a credential is refused at the set-up's URL step, with the registry's
// reason, and none of it is kept in the conversation's state.
func TestSecretURLNotKept(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, nil)
	const key = "sk-live-9f8e7d6c5b4a39281706f5e4d3c2b1a0"
	c := newChat(t, a)
	c.say("I want to set up a new tool")
	c.say("I need to add one")
	r := c.say("https://mcp.example.com/mcp?api_key=" + key)
	if !strings.Contains(r.Reply, "carries a secret") || strings.Contains(r.Reply, key) {
		t.Errorf("a URL with an api_key: %q, want it refused with the reason", r.Reply)
	}
	c2 := newChat(t, a)
	r = c2.say("add a new MCP server called keyed at https://mcp.example.com/mcp?api_key=" + key)
	if !strings.Contains(r.Reply, "carries a secret") || strings.Contains(r.Reply, key) {
		t.Errorf("adding a server at a URL with an api_key: %q, want it refused with the reason", r.Reply)
	}
	var states string
	if err := a.Pool.QueryRow(t.Context(), `SELECT coalesce(string_agg(state::text, ' '), '') FROM assistant_conversations
		WHERE user_id = $1`, c.p.User.ID).Scan(&states); err != nil {
		t.Fatal(err)
	}
	for _, part := range []string{key, key[8:20], "api_key"} {
		if strings.Contains(states, part) {
			t.Errorf("the conversations' state keeps %q: %s", part, states)
		}
	}
}
