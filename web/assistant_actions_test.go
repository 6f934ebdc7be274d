package web_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/registry"
)

// forecastSchema is a weather tool's input: a city, and units whose values are metric
// and imperial (what "Celsius" and "Fahrenheit" stand for).
const forecastSchema = `{"type":"object","properties":{"city":{"type":"string","description":"The city"},
	"units":{"type":"string","enum":["metric","imperial"],"description":"Temperature units"}},"required":["city"]}`

// weatherServer starts a real MCP server offering get_forecast (with units) besides the
// test server's own tools, registers it as wx (trusted) and enables get_forecast.
func weatherServer(t *testing.T, srv *webtest.Server) *mcptest.HTTPServer {
	t.Helper()
	up := mcptest.StartHTTP(t, &mcptest.Options{Name: "wx"})
	up.Server().SetTool(mcptest.ToolSpec{Name: "get_forecast", Description: "The weather forecast for a city",
		InputSchema: []byte(forecastSchema)})
	srv.RegisterServer(t, registry.Spec{Name: "wx", Type: registry.TypeStreamableHTTP, URL: up.URL(), Enabled: true, Trusted: true}, "get_forecast")
	return up
}

// Seed 004's "Configure the weather tool to use Celsius": the word is not a value of
// units, but a synonym of one of its enum's values, so units becomes metric (stored as
// its default), and "Fahrenheit" makes it imperial.
func TestAssistantConfigureBySynonym(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	weatherServer(t, srv)
	admin := webtest.API{T: t, Srv: srv, C: srv.Login(t, "admin", webtest.AdminPassword)}
	conv := ""
	units := func() (mode, value string) {
		t.Helper()
		if err := srv.Pool.QueryRow(t.Context(), `SELECT coalesce(configuration->'params'->'units'->>'mode', ''),
			coalesce(configuration->'params'->'units'->>'value', '') FROM mcp_tools WHERE name = 'get_forecast'`).Scan(&mode, &value); err != nil {
			t.Fatal(err)
		}
		return mode, value
	}
	r := asstSay(t, admin, &conv, "Configure the weather tool to use Celsius", "units = metric")
	if len(r.Actions) != 1 || !r.Actions[0].OK || r.Actions[0].TargetID != srv.ToolID(t, "wx__get_forecast") {
		t.Fatalf("actions: %+v", r.Actions)
	}
	if mode, v := units(); mode != "default" || v != "metric" {
		t.Fatalf("units is %q %q, want the default metric", mode, v)
	}
	asstSay(t, admin, &conv, "switch get_forecast to fahrenheit", "units = imperial")
	if mode, v := units(); mode != "default" || v != "imperial" {
		t.Fatalf("units is %q %q, want the default imperial", mode, v)
	}
}

// The assistant's other acts, each checked where it lands: a server's status (its
// tool counts as the database has them), disabling and enabling a server, refreshing
// every enabled server (a disabled one is left alone), untagging a tool, forgetting a
// preference, and finding and suggesting tools (exactly the tools that fit).
func TestAssistantActions(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	wx := weatherServer(t, srv)
	ev := srv.LiveServer(t, "ev", true, "echo")
	admin := webtest.API{T: t, Srv: srv, C: srv.Login(t, "admin", webtest.AdminPassword)}
	ctx := t.Context()
	conv := ""
	one := func(sql string, args ...any) (v string) {
		t.Helper()
		if err := srv.Pool.QueryRow(ctx, sql, args...).Scan(&v); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return v
	}
	serverID := func(name string) string { return one(`SELECT id::text FROM mcp_servers WHERE name = $1`, name) }
	audited := func(action, targetID, sentence string) {
		t.Helper()
		if n := one(`SELECT count(*)::text FROM audit_log WHERE action = $1 AND target_id = $2 AND payload->>'said' = $3`,
			action, targetID, sentence); n != "1" {
			t.Errorf("%s of %s with %q audited %s times, want once", action, targetID, sentence, n)
		}
	}
	wxID, evID := serverID("wx"), serverID("ev")

	// Status: what the database holds about the server, in one sentence.
	total := one(`SELECT count(*)::text FROM mcp_tools WHERE server_id = $1`, wxID)
	enabled := one(`SELECT count(*)::text FROM mcp_tools WHERE server_id = $1 AND status = 'enabled'`, wxID)
	if enabled != "1" {
		t.Fatalf("wx has %s enabled tools, want get_forecast only", enabled)
	}
	r := asstSay(t, admin, &conv, "What's the status of the wx server?",
		"wx ("+wx.URL()+") is enabled and connected, with "+total+" tools (1 enabled).")
	if len(r.Actions) != 1 || r.Actions[0].TargetID != wxID || r.Actions[0].TargetType != "server" {
		t.Fatalf("status actions: %+v", r.Actions)
	}

	// Enabling a tool that already is says so, and changes and records nothing.
	before := one(`SELECT coalesce(max(id), 0)::text FROM audit_log`)
	asstSay(t, admin, &conv, "enable get_forecast", "The wx__get_forecast tool is already enabled; nothing changed.")
	if n := one(`SELECT count(*)::text FROM audit_log WHERE action LIKE 'tool.%' AND id > $1::bigint`, before); n != "0" {
		t.Errorf("enabling an enabled tool wrote %s tool entries", n)
	}

	// Disable a server: stored, audited with the sentence, and its status says so.
	asstSay(t, admin, &conv, "disable the ev server", "I've disabled the server")
	if on := one(`SELECT enabled::text FROM mcp_servers WHERE id = $1`, evID); on != "false" {
		t.Fatalf("ev enabled = %s after disabling it", on)
	}
	audited("server.update", evID, "disable the ev server")
	asstSay(t, admin, &conv, "is the ev server connected?", "ev ("+ev.URL()+") is disabled")

	// Refresh from all servers: wx's new tool is there after it (the server's
	// list_changed may have brought it a moment earlier, so the discovery audited with
	// the sentence is the proof that the refresh asked wx); ev, disabled, is not asked.
	wx.Server().SetTool(mcptest.ToolSpec{Name: "get_alerts", Description: "Weather alerts for a region"})
	r = asstSay(t, admin, &conv, "Refresh the tools list from all servers", "I refreshed the tools of every enabled server.")
	total = one(`SELECT count(*)::text FROM mcp_tools WHERE server_id = $1`, wxID)
	if !strings.Contains(r.Reply, "wx: "+total+" tools (") || strings.Contains(r.Reply, "ev: ") {
		t.Fatalf("refresh: %q, want wx's %s tools and nothing of ev", r.Reply, total)
	}
	for _, a := range r.Actions {
		if a.TargetID == evID || a.TargetID == wxID && !a.OK {
			t.Errorf("refresh action %+v", a)
		}
	}
	if n := one(`SELECT count(*)::text FROM mcp_tools WHERE server_id = $1 AND name = 'get_alerts'`, wxID); n != "1" {
		t.Fatalf("get_alerts not discovered by the refresh: %s", n)
	}
	audited("server.discover", wxID, "Refresh the tools list from all servers")
	if n := one(`SELECT count(*)::text FROM audit_log WHERE action = 'server.discover' AND target_id = $1`, evID); n != "1" {
		t.Errorf("ev was discovered %s times, want once (when it was registered)", n)
	}

	// Enable it again.
	asstSay(t, admin, &conv, "turn the ev server back on", "I've enabled the server")
	if on := one(`SELECT enabled::text FROM mcp_servers WHERE id = $1`, evID); on != "true" {
		t.Fatalf("ev enabled = %s after enabling it", on)
	}
	audited("server.update", evID, "turn the ev server back on")

	// Untag: one tag goes, the other stays.
	fc := srv.ToolID(t, "wx__get_forecast")
	asstSay(t, admin, &conv, "tag get_forecast with beta, stable", "tagged")
	asstSay(t, admin, &conv, "remove the beta tag from get_forecast", "removed the tags beta from")
	var tool struct {
		Tags []string `json:"tags"`
	}
	admin.JSON(http.MethodGet, "/api/v1/tools/"+fc, nil, http.StatusOK, &tool)
	if !slices.Equal(tool.Tags, []string{"stable"}) {
		t.Fatalf("get_forecast's tags after untagging beta: %v", tool.Tags)
	}
	audited("tool.configure", fc, "remove the beta tag from get_forecast")

	// Forget a preference: the stored row goes; forgetting it again says there is none.
	asstSay(t, admin, &conv, "always enable new alert tools", "automatically enable new alert tools")
	if n := one(`SELECT count(*)::text FROM tool_auto_enable_preferences WHERE words = 'alert'`); n != "1" {
		t.Fatalf("the preference was not stored: %s", n)
	}
	asstSay(t, admin, &conv, "stop enabling new alert tools", "will no longer be enabled automatically")
	if n := one(`SELECT count(*)::text FROM tool_auto_enable_preferences`); n != "0" {
		t.Fatalf("the preference is still stored: %s", n)
	}
	asstSay(t, admin, &conv, "forget my preference about alert tools", "You have no preference about \"alert\"")

	// Find and suggest: exactly the tools whose words fit, numbered.
	names := func(r asstReply) []string {
		var out []string
		for _, c := range r.Choices {
			out = append(out, strings.SplitN(c.Label, " — ", 2)[0])
		}
		return out
	}
	r = asstSay(t, admin, &conv, "Do we have a tool for weather forecasts?", "Yes: 1 tool(s) match")
	if got := names(r); !slices.Equal(got, []string{"1. get_forecast on wx"}) {
		t.Fatalf("found %v, want get_forecast only", got)
	}
	asstSay(t, admin, &conv, "tell me about the first one", "get_forecast on wx: The weather forecast for a city")
	r = asstSay(t, admin, &conv, "What tools would help with weather?", "These could help: 2 tool(s) match")
	if got := names(r); len(got) != 2 || !slices.Contains(got, "1. get_alerts on wx") && !slices.Contains(got, "2. get_alerts on wx") ||
		!slices.Contains(got, "1. get_forecast on wx") && !slices.Contains(got, "2. get_forecast on wx") {
		t.Fatalf("suggested %v, want get_alerts and get_forecast", got)
	}
	r = asstSay(t, admin, &conv, "Do we have a tool for stock prices?", "I found no tool for")
	if len(r.Choices) != 0 {
		t.Fatalf("choices for nothing found: %+v", r.Choices)
	}
}

// A preference is audited with the sentence that set it and the one that dropped it,
// and the tool it enables says so in its state history: whose preference, in which
// words, and that testing was skipped.
func TestAssistantPreferencesAudited(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	wx := weatherServer(t, srv)
	admin := webtest.API{T: t, Srv: srv, C: srv.Login(t, "admin", webtest.AdminPassword)}
	ctx := t.Context()
	conv := ""
	const set, drop = "always enable new alert tools", "stop enabling new alert tools"

	r := asstSay(t, admin, &conv, set, "automatically enable new alert tools")
	if len(r.Actions) != 1 || r.Actions[0].TargetType != "preference" || r.Actions[0].TargetID == "" {
		t.Fatalf("actions: %+v", r.Actions)
	}
	prefID := r.Actions[0].TargetID
	var actor, target, targetName, words, sentence, said string
	if err := srv.Pool.QueryRow(ctx, `SELECT actor_name, target_id, target_name, payload->>'auto_enable', payload->>'sentence', payload->>'said'
		FROM audit_log WHERE action = 'preference.save'`).Scan(&actor, &target, &targetName, &words, &sentence, &said); err != nil {
		t.Fatalf("no preference.save audit row: %v", err)
	}
	if actor != "admin" || target != prefID || targetName != "alert" || words != "alert" || sentence != set || said != set {
		t.Fatalf("preference.save: actor %q target %q words %q sentence %q said %q", actor, target, words, sentence, said)
	}

	// A new alert tool is enabled at discovery, and its history says by whose preference.
	wx.Server().SetTool(mcptest.ToolSpec{Name: "get_alerts", Description: "Weather alerts for a region"})
	asstSay(t, admin, &conv, "discover new tools on the wx server", "I found")
	var from, reason, hactor, policy string
	webtest.WaitFor(t, 10*time.Second, func() bool {
		err := srv.Pool.QueryRow(ctx, `SELECT coalesce(h.from_status, ''), h.reason, h.actor, coalesce(h.metadata->>'policy', '')
			FROM tool_state_history h JOIN mcp_tools t ON t.id = h.tool_id
			WHERE t.name = 'get_alerts' AND h.to_status = 'enabled'`).Scan(&from, &reason, &hactor, &policy)
		return err == nil
	}, "the preference never enabled get_alerts")
	wantPolicy := `the preference of admin ("` + set + `")`
	if from != "validated" || hactor != "system" || policy != wantPolicy ||
		reason != "enabled by the auto-enable policy of "+wantPolicy+" (testing skipped)" {
		t.Fatalf("get_alerts enabled from %q by %q: reason %q, policy %q", from, hactor, reason, policy)
	}

	asstSay(t, admin, &conv, drop, "will no longer be enabled automatically")
	if err := srv.Pool.QueryRow(ctx, `SELECT actor_name, target_id, target_name, payload->>'said'
		FROM audit_log WHERE action = 'preference.delete'`).Scan(&actor, &target, &words, &said); err != nil {
		t.Fatalf("no preference.delete audit row: %v", err)
	}
	if actor != "admin" || target != prefID || words != "alert" || said != drop {
		t.Fatalf("preference.delete: actor %q target %q words %q said %q", actor, target, words, said)
	}
}

// Seed 004's connection-timeout reply: a server that accepts the connection and never
// answers is not added, and the reply says the connection timed out after the test's
// limit (2 s here), in the seed's words; the refused-port case says why it failed.
func TestAssistantConnectionTimeout(t *testing.T) {
	t.Parallel()
	hung := startHung(t)
	mo := apptest.DefaultMCP()
	mo.TestTimeout = 2 * time.Second
	srv := webtest.Start(t, &webtest.Options{MCP: &mo})
	admin := webtest.API{T: t, Srv: srv, C: srv.Login(t, "admin", webtest.AdminPassword)}
	conv := ""
	start := time.Now()
	r := asstSay(t, admin, &conv, "add a new MCP server at "+hung.url()+" called stuck",
		"I couldn't connect to the server at `"+hung.url()+"`. The connection timed out after 2 seconds. "+
			"Please check that the server is running and accessible, or try again later.")
	// The limit is 2 s, and the attempt ends with it (its connection is not held 5 s
	// more for the SDK's cancel notice), well before the server's own 30 s.
	if took := time.Since(start); took > 6*time.Second {
		t.Fatalf("the reply took %s, want about the 2 s limit", took)
	}
	if hung.seen.Load() == 0 {
		t.Fatal("the hung server was never reached: the test proves nothing")
	}
	if len(r.Actions) != 1 || r.Actions[0].OK || r.Actions[0].Name != "stuck" || r.Actions[0].Error == "" {
		t.Fatalf("actions: %+v", r.Actions)
	}
	var n int
	if err := srv.Pool.QueryRow(t.Context(), `SELECT count(*) FROM mcp_servers WHERE name = 'stuck'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("the hung server was added: %d (%v)", n, err)
	}
	// Refused at once: not a timeout, and the reply says what happened instead.
	r = asstSay(t, admin, &conv, "add a new MCP server at "+refusedAddress(t)+" called nowhere", "I couldn't connect to the server at `")
	if strings.Contains(r.Reply, "timed out") || !strings.Contains(r.Reply, "refused") {
		t.Fatalf("refused: %q", r.Reply)
	}
}
