package web_test

import (
	"testing"

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
