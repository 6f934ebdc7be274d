package assistant_test

import (
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/toolname"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/tools"
)

// dbServer starts and registers a server offering db_query, whose dsn is a plain string
// by its name and schema.
func dbServer(t *testing.T, a *apptest.App, name string) string {
	t.Helper()
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: name})
	hs.Server().SetTool(mcptest.ToolSpec{Name: "db_query", Description: "Run a query",
		InputSchema: []byte(`{"type":"object","properties":{"dsn":{"type":"string"},"sql":{"type":"string"}}}`)})
	a.RegisterServer(t, registry.Spec{Name: name, Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true})
	return a.ToolID(t, toolname.Join(name, "db_query"))
}

// A person who may not configure tools and sets a value the tool stores encrypted (dsn
// saved as a secret, neither its name nor the value looking like one) is refused, and
// the value is kept nowhere: not in the audit log, the conversation, or a choice waiting
// for a pick. Their stored settings are not read for them, so every value is masked.
func TestRefusedConfigureKeepsNoValue(t *testing.T) {
	t.Parallel()
	const value = "hunter2x"
	a := apptest.Start(t, nil)
	id := dbServer(t, a, "db")
	stored := "postgres://db.internal/app"
	if _, err := a.Tools.Update(t.Context(), audit.System, id, tools.Patch{Params: map[string]tools.ParamInput{
		"dsn": {Mode: tools.ModeDefault, Text: &stored, Secret: true}}}); err != nil {
		t.Fatal(err)
	}
	a.CreateUser(t, "tess", auth.RoleToolUser, "correct-horse-battery-7")
	tess, err := a.Auth.GetUserByName(t.Context(), "tess")
	if err != nil {
		t.Fatal(err)
	}
	kept := func(when string) {
		t.Helper()
		if n := a.Count(t, `SELECT count(*) FROM audit_log WHERE payload::text LIKE '%' || $1 || '%'`, value); n > 0 {
			t.Errorf("%s: %d audit rows hold %q", when, n, value)
		}
		if n := a.Count(t, `SELECT count(*) FROM assistant_messages WHERE user_id = $1 AND body LIKE '%' || $2 || '%'`, tess.ID, value); n > 0 {
			t.Errorf("%s: %d messages of the conversation hold %q", when, n, value)
		}
		if n := a.Count(t, `SELECT count(*) FROM assistant_conversations WHERE user_id = $1 AND state::text LIKE '%' || $2 || '%'`, tess.ID, value); n > 0 {
			t.Errorf("%s: the conversation's state holds %q", when, value)
		}
	}
	refused := func() int {
		return a.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'assistant.refused' AND actor_id = $1`, tess.ID)
	}

	c := &chat{t: t, a: a, p: &auth.Principal{User: tess, Kind: audit.ActorUser}}
	r := c.say("configure db_query with dsn=" + value)
	if !strings.Contains(r.Reply, "tool.configure") || strings.Contains(r.Reply, value) {
		t.Errorf("a tool user's configure: %q, want it refused without the value", r.Reply)
	}
	if refused() != 1 {
		t.Errorf("a tool user's configure: %d refusals audited, want 1", refused())
	}
	kept("refused at once")

	// Two tools to choose from: refused at once too (no choice waits for a change the
	// role forbids), and nothing is kept.
	dbServer(t, a, "db2")
	c = &chat{t: t, a: a, p: c.p}
	r = c.say("configure db_query with dsn=" + value)
	if !strings.Contains(r.Reply, "tool.configure") || len(r.Choices) != 0 || strings.Contains(r.Reply, value) {
		t.Fatalf("configure db_query on two servers: %q %v, want it refused at once", r.Reply, r.Choices)
	}
	if refused() != 2 {
		t.Errorf("on two servers: %d refusals audited, want 2", refused())
	}
	kept("refused at once on two servers")
	if r = c.say("1"); strings.Contains(r.Reply, "tool.configure") {
		t.Errorf("a pick after the refusal: %q, want nothing waiting", r.Reply)
	}
}

// A key=value the target tool lacks is not dropped because another one is its: Update
// refuses the message naming it, and nothing is saved ("lang=xx" was ignored and units
// saved).
func TestConfigureUnknownKeyRefused(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "wx"})
	hs.Server().SetTool(mcptest.ToolSpec{Name: "get_forecast", Description: "Get the forecast",
		InputSchema: []byte(`{"type":"object","properties":{"city":{"type":"string"},"units":{"type":"string","enum":["metric","imperial"]}}}`)})
	a.RegisterServer(t, registry.Spec{Name: "wx", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true})
	id := a.ToolID(t, toolname.Join("wx", "get_forecast"))

	r := newChat(t, a).say("configure get_forecast with units=metric lang=xx")
	if !strings.Contains(r.Reply, "lang") {
		t.Errorf("configure get_forecast with units=metric lang=xx: %q, want the reply to name lang", r.Reply)
	}
	tg, err := a.Tools.Target(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if ps := tg.Configuration().Params; len(ps) > 0 {
		t.Errorf("configure get_forecast with units=metric lang=xx saved %v, want nothing", ps)
	}
}
