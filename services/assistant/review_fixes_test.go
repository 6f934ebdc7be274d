package assistant_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/toolname"
	"github.com/toolwarden/toolwarden/services/assistant"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/risk"
)

// A credential given as a quoted value with a space ("Bearer …"), for a parameter whose
// name and schema say nothing secret, is refused as any secret value is, and kept
// nowhere: not in a reply, the conversation, its state (a question waiting for a yes) or
// the audit log; nothing is saved.
func TestQuotedCredentialValueRefused(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "hx"})
	hs.Server().SetTool(mcptest.ToolSpec{Name: "http_call", Description: "Call",
		InputSchema: []byte(`{"type":"object","properties":{"prefix":{"type":"string"},"path":{"type":"string"}}}`)})
	a.RegisterServer(t, registry.Spec{Name: "hx", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true})
	id := a.ToolID(t, toolname.Join("hx", "http_call"))
	const secret = "abcdefghijklmnop1234"
	for _, msg := range []string{
		`set prefix to "Bearer ` + secret + `" for http_call`,
		`set prefix to 'Token ` + secret + `' for http_call`,
		`set prefix to Bearer ` + secret + ` for http_call`,
		`should I set prefix to "Bearer ` + secret + `" for http_call?`,
		`configure http_call with prefix="Bearer ` + secret + `"`,
	} {
		c := newChat(t, a)
		r := c.say(msg)
		if strings.Contains(r.Reply, secret) || len(r.Choices) > 0 || !strings.Contains(r.Reply, "I don't take secret values") {
			t.Errorf("%q: reply %q %v, want a refusal without the value", msg, r.Reply, r.Choices)
		}
		if r = c.say("yes"); strings.Contains(r.Reply, secret) {
			t.Errorf("%q, then yes: reply %q", msg, r.Reply)
		}
		tg, err := a.Tools.Target(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(tg.Configuration().Params); n != 0 {
			t.Errorf("%q: %d settings saved, want none", msg, n)
		}
		for what, q := range map[string]string{
			"audit rows":     `SELECT count(*) FROM audit_log WHERE payload::text LIKE '%' || $1 || '%'`,
			"messages":       `SELECT count(*) FROM assistant_messages WHERE body LIKE '%' || $1 || '%' OR actions::text LIKE '%' || $1 || '%' OR choices::text LIKE '%' || $1 || '%'`,
			"conversations":  `SELECT count(*) FROM assistant_conversations WHERE state::text LIKE '%' || $1 || '%'`,
			"stored configs": `SELECT count(*) FROM mcp_tools WHERE configuration::text LIKE '%' || $1 || '%'`,
		} {
			if n := a.Count(t, q, secret); n > 0 {
				t.Errorf("%q: %d %s hold the credential", msg, n, what)
			}
		}
	}
}

// answerModel is a language model that answers every message with answer.
type answerModel struct{ answer string }

func (m answerModel) Chat(context.Context, string, string) (string, error) { return m.answer, nil }

// A credential in a setting's value is refused by the value, whatever the message's words
// look like: a language model's proposal to set one is neither put to the person (the
// reply and the question waiting would hold it) nor kept.
func TestModelCredentialValueRefused(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "hx"})
	hs.Server().SetTool(mcptest.ToolSpec{Name: "http_call", Description: "Call",
		InputSchema: []byte(`{"type":"object","properties":{"prefix":{"type":"string"},"path":{"type":"string"}}}`)})
	a.RegisterServer(t, registry.Spec{Name: "hx", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true})
	a.ToolID(t, toolname.Join("hx", "http_call"))
	const secret = "abcdefghijklmnop1234"
	a.Assistant.SetModel(answerModel{`{"intent":"configure_tool","tool":"http_call","settings":{"prefix":"Bearer ` + secret + `"}}`})
	c := newChat(t, a)
	r := c.say("the thing that calls out, give it the usual header from before")
	if strings.Contains(r.Reply, secret) || len(r.Choices) > 0 || !strings.Contains(r.Reply, "I don't take secret values") {
		t.Errorf("a model's proposal holding a credential: %q %v, want it refused", r.Reply, r.Choices)
	}
	if n := a.Count(t, `SELECT count(*) FROM assistant_conversations WHERE state::text LIKE '%' || $1 || '%'`, secret) +
		a.Count(t, `SELECT count(*) FROM assistant_messages WHERE body LIKE '%' || $1 || '%'`, secret); n > 0 {
		t.Errorf("%d conversation rows hold the credential", n)
	}
}

// Configuring a tool whose stored settings still hold a parameter its definition no
// longer has sets the value asked for (dropping the stale one), instead of being refused
// for good.
func TestConfigureDropsParameterTheToolNoLongerHas(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "wx"})
	hs.Server().SetTool(mcptest.ToolSpec{Name: "get_forecast", Description: "Get the forecast",
		InputSchema: []byte(`{"type":"object","properties":{"city":{"type":"string"},"units":{"type":"string","enum":["metric","imperial"]}}}`)})
	a.RegisterServer(t, registry.Spec{Name: "wx", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true})
	id := a.ToolID(t, toolname.Join("wx", "get_forecast"))
	if _, err := a.Pool.Exec(t.Context(), `UPDATE mcp_tools SET configuration =
		'{"params":{"gone":{"mode":"default","value":"x"},"city":{"mode":"fixed","value":"Oslo"}}}' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	r := newChat(t, a).say("configure get_forecast with units=metric")
	if !strings.HasPrefix(r.Reply, "✅") {
		t.Fatalf("configure with a stale setting stored: %q", r.Reply)
	}
	tg, err := a.Tools.Target(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	ps := tg.Configuration().Params
	if _, ok := ps["gone"]; ok || string(ps["units"].Value) != `"metric"` || ps["city"].Mode != "fixed" || string(ps["city"].Value) != `"Oslo"` {
		t.Errorf("settings %+v, want units metric, city still fixed to Oslo, gone dropped", ps)
	}
}

// A risk set on several tools where some are refused says which changed and which did
// not, with an action for each: those done were committed, whatever came after.
func TestSetRiskSaysWhatChangedAndWhatNot(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "rk", Generated: 3})
	a.RegisterServer(t, registry.Spec{Name: "rk", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true})
	var ids []string
	for i := 1; i <= 3; i++ {
		ids = append(ids, a.ToolID(t, toolname.Join("rk", fmt.Sprintf("gen-%05d", i))))
	}
	// Only an administrator may lower a risk: the middle tool, high, is refused.
	a.SetRisk(t, toolname.Join("rk", "gen-00002"), risk.High)
	a.CreateUser(t, "tim", auth.RoleToolManager, "correct-horse-battery-7")
	tim, err := a.Auth.GetUserByName(t.Context(), "tim")
	if err != nil {
		t.Fatal(err)
	}
	c := &chat{t: t, a: a, p: &auth.Principal{User: tim, Kind: audit.ActorUser}}
	if r := c.say("show me the tools on rk"); len(r.Choices) < 3 {
		t.Fatalf("the tools on rk: %q", r.Reply)
	}
	r := c.say("make all of them medium risk")
	levelOf := func(id string) string {
		var s *string
		if err := a.Pool.QueryRow(t.Context(), `SELECT risk_override FROM mcp_tools WHERE id = $1`, id).Scan(&s); err != nil {
			t.Fatal(err)
		}
		if s == nil {
			return ""
		}
		return *s
	}
	if levelOf(ids[0]) != "medium" || levelOf(ids[2]) != "medium" || levelOf(ids[1]) != "high" {
		t.Fatalf("levels %s %s %s, want medium high medium (reply %q)", levelOf(ids[0]), levelOf(ids[1]), levelOf(ids[2]), r.Reply)
	}
	done, notDone, _ := strings.Cut(r.Reply, "❌ Not changed:")
	if !strings.HasPrefix(done, "✅ I've made") || !strings.Contains(done, "'gen-00001'") || !strings.Contains(done, "'gen-00003'") ||
		strings.Contains(done, "'gen-00002'") || !strings.Contains(notDone, "'gen-00002' on rk: risk only an administrator") {
		t.Errorf("reply %q, want what changed (gen-00001, gen-00003) and what did not (gen-00002, and why)", r.Reply)
	}
	ok := map[string]bool{}
	for _, ac := range r.Actions {
		ok[ac.TargetID] = ac.OK
	}
	if n := a.Count(t, `SELECT count(*) FROM mcp_tools t JOIN mcp_servers s ON s.id = t.server_id WHERE s.name = 'rk'`); len(r.Actions) != n ||
		!ok[ids[0]] || ok[ids[1]] || !ok[ids[2]] {
		t.Errorf("actions %+v, want one for each of the %d tools, gen-00002's failed", r.Actions, n)
	}
}

// A change to more tools than one message changes (after a list of them, "make all of
// them high risk") is refused with how many and how to narrow it: nothing is changed or
// left waiting for a yes. Fewer are done as usual.
func TestChangeTargetsBounded(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, nil)
	n := assistant.MaxTargets + 5
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "big", Generated: n})
	a.RegisterServer(t, registry.Spec{Name: "big", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true})
	a.ToolID(t, toolname.Join("big", fmt.Sprintf("gen-%05d", n)))
	a.CreateUser(t, "bob", auth.RoleToolUser, "correct-horse-battery-7")
	c := newChat(t, a)
	total := a.Count(t, `SELECT count(*) FROM mcp_tools t JOIN mcp_servers s ON s.id = t.server_id WHERE s.name = 'big'`)
	if r := c.say("show me the tools on big"); !strings.Contains(r.Reply, fmt.Sprint(total)) {
		t.Fatalf("the tools on big: %q", r.Reply)
	}
	changed := func() int {
		return a.Count(t, `SELECT count(*) FROM audit_log WHERE actor_kind = 'user' AND action <> 'assistant.refused'`) +
			a.Count(t, `SELECT count(*) FROM mcp_tools WHERE risk_override IS NOT NULL`)
	}
	before := changed()
	reads := 0
	assistant.OnStoredRead(a.Assistant, func(string) { reads++ })
	for _, msg := range []string{"make all of them high risk", "put all of them in the weather category",
		"configure all of them with limit=3", "configure all of them with limit=hunter2x", "let bob use all of them", "stop bob from using all of them",
		"should I make all of them high risk?"} {
		r := c.say(msg)
		if !strings.Contains(r.Reply, fmt.Sprintf("That would change %d tools", total)) || !strings.Contains(r.Reply, fmt.Sprintf("at most %d", assistant.MaxTargets)) ||
			!strings.Contains(r.Reply, "all tools on big") || len(r.Choices) != 0 || len(r.Actions) != 0 {
			t.Errorf("%q: reply %q, %d choices, %d actions; want it refused saying how many and how to narrow", msg, r.Reply, len(r.Choices), len(r.Actions))
		}
		if r := c.say("yes"); !strings.Contains(r.Reply, "haven't asked") {
			t.Errorf("%q, then yes: %q, want nothing waiting", msg, r.Reply)
		}
		c.say("show me the tools on big")
	}
	if got := changed(); got != before {
		t.Errorf("%d changes made or audited, want none", got-before)
	}
	if reads != 0 {
		t.Errorf("the stored settings of %d tools were read for a change refused for its size", reads)
	}
	// A value it would set is kept nowhere: it may be one a tool stores encrypted.
	if n := a.Count(t, `SELECT count(*) FROM assistant_messages WHERE body LIKE '%hunter2x%'`); n > 0 {
		t.Errorf("%d messages hold the value of a configure refused for its size", n)
	}
	// A set within the bound is changed.
	if r := c.say("make gen-00001 high risk"); !strings.HasPrefix(r.Reply, "✅") {
		t.Errorf("one tool: %q", r.Reply)
	}
}

// The turn a page sends back as seen is never newer than the messages it shows: a turn
// another window commits while the page is read makes a yes typed there refused, not
// the answer to a question the page may not show.
func TestShownTurnNotNewerThanMessages(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, nil)
	a.LiveServer(t, "s1", false)
	a.LiveServer(t, "s2", false)
	s2 := mustServer(t, a, "s2")
	c := newChat(t, a)
	c.say("show me all servers")
	// Another window asks a question while this one reads the conversation.
	assistant.OnShownRead(a.Assistant, func() {
		assistant.OnShownRead(a.Assistant, nil)
		if r := c.say("remove the server s2"); len(r.Choices) == 0 {
			t.Errorf("remove the server s2: %q, want a question", r.Reply)
		}
	})
	ms, seen, err := a.Assistant.ShownOf(t.Context(), c.p, c.conv, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 {
		t.Fatal("no messages shown")
	}
	r, err := a.Assistant.Handle(context.Background(), c.p, c.p.Actor("", ""), c.conv, "yes", 0, seen)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Registry.GetServer(t.Context(), s2); err != nil {
		t.Errorf("a yes sent with the turn the page read removed s2 (reply %q): %v", r.Reply, err)
	}
	if !strings.Contains(r.Reply, "another window") {
		t.Errorf("yes: %q, want it refused as answering what the page may not show", r.Reply)
	}
}

// A grant on several tools is each tool's own change: one refused (here by a trigger on
// the middle tool's row) leaves the others granted, and the reply says which were and
// which were not, and why (it said only "That didn't work" over grants made).
func TestGrantSaysWhatChangedAndWhatNot(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "gr", Generated: 3})
	a.RegisterServer(t, registry.Spec{Name: "gr", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true})
	var ids []string
	for i := 1; i <= 3; i++ {
		ids = append(ids, a.ToolID(t, toolname.Join("gr", fmt.Sprintf("gen-%05d", i))))
	}
	a.CreateUser(t, "bob", auth.RoleToolUser, "correct-horse-battery-7")
	if _, err := a.Owner.Exec(t.Context(), fmt.Sprintf(`
		CREATE FUNCTION refuse_middle() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
			IF NEW.tool_id = '%s' THEN RAISE EXCEPTION 'test: this rule cannot be written'; END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER refuse_middle BEFORE INSERT ON user_tool_permissions FOR EACH ROW EXECUTE FUNCTION refuse_middle();`, ids[1])); err != nil {
		t.Fatal(err)
	}
	c := newChat(t, a)
	if r := c.say("show me the tools on gr"); len(r.Choices) < 3 {
		t.Fatalf("the tools on gr: %q", r.Reply)
	}
	r := c.say("let bob use all of them")
	if strings.Contains(r.Reply, "?") && !strings.Contains(r.Reply, "✅") {
		r = c.say("yes")
	}
	granted := func(id string) bool {
		return a.Count(t, `SELECT count(*) FROM user_tool_permissions p JOIN users u ON u.id = p.user_id
			WHERE u.username = 'bob' AND p.tool_id = $1 AND p.can_use`, id) == 1
	}
	if !granted(ids[0]) || granted(ids[1]) || !granted(ids[2]) {
		t.Fatalf("granted %v %v %v, want true false true (reply %q)", granted(ids[0]), granted(ids[1]), granted(ids[2]), r.Reply)
	}
	done, notDone, _ := strings.Cut(r.Reply, "❌ Not changed:")
	if !strings.HasPrefix(done, "✅ bob may now use") || !strings.Contains(done, "'gen-00001'") || !strings.Contains(done, "'gen-00003'") ||
		strings.Contains(done, "'gen-00002'") || !strings.Contains(notDone, "'gen-00002' on gr:") {
		t.Errorf("reply %q, want what changed (gen-00001, gen-00003) and what did not (gen-00002, and why)", r.Reply)
	}
	ok := map[string]bool{}
	for _, ac := range r.Actions {
		ok[ac.TargetID] = ac.OK
	}
	if n := a.Count(t, `SELECT count(*) FROM mcp_tools t JOIN mcp_servers s ON s.id = t.server_id WHERE s.name = 'gr'`); len(r.Actions) != n ||
		!ok[ids[0]] || ok[ids[1]] || !ok[ids[2]] {
		t.Errorf("actions %+v, want one for each of the %d tools, gen-00002's failed", r.Actions, n)
	}
}
