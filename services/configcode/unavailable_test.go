package configcode_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/configcode"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/tools"
)

var (
	deleteSpec  = mcptest.ToolSpec{Name: "delete", Description: "Deletes a file.", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"force":{"type":"boolean"}}}`)}
	restoreSpec = mcptest.ToolSpec{Name: "restore", Description: "Restores a file.", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)}
)

// settleDelete registers server ev with ev__delete configured: bob refused, a fixed
// parameter, a test case and a compensation (ev__restore).
func settleDelete(t *testing.T, a *apptest.App) {
	t.Helper()
	ctx := context.Background()
	a.CreateUser(t, "bob", auth.RoleToolUser, "bob-password-123")
	a.Settled(t, "ev__restore")
	id := a.Settled(t, "ev__delete").ID
	no := false
	if err := a.Tools.SetPermission(ctx, admin, id, "bob", &no); err != nil {
		t.Fatal(err)
	}
	must[tools.Item](t)(a.Tools.Update(ctx, admin, id, tools.Patch{Params: map[string]tools.ParamInput{
		"force": {Mode: tools.ModeFixed, Value: json.RawMessage(`false`)}}}))
	must[tools.TestCase](t)(a.Tools.SaveTestCase(ctx, admin, id, tools.TestCase{Name: "tmp", Arguments: json.RawMessage(`{"path":"/tmp/x"}`)}))
	if err := a.Executions.SetCompensation(ctx, admin, id, "ev__restore", map[string]executions.MappedArgument{
		"path": {From: "/path"}}); err != nil {
		t.Fatal(err)
	}
}

// checkShown fails for each of ev__delete's settings that applying removed though the
// plan did not show its removal.
func checkShown(t *testing.T, a *apptest.App, text string) {
	t.Helper()
	for _, c := range []struct{ shown, query string }{
		{"permissions.bob: false → role", `SELECT count(*) FROM user_tool_permissions p JOIN mcp_tools t ON t.id = p.tool_id WHERE t.name = 'delete' AND NOT p.can_use`},
		{"config.force", `SELECT count(*) FROM mcp_tools WHERE name = 'delete' AND configuration::text LIKE '%force%'`},
		{"test_cases.tmp", `SELECT count(*) FROM tool_test_cases c JOIN mcp_tools t ON t.id = c.tool_id WHERE t.name = 'delete'`},
		{"compensation: ev__restore", `SELECT count(*) FROM tool_compensations c JOIN mcp_tools t ON t.id = c.tool_id WHERE t.name = 'delete'`},
	} {
		if a.Count(t, c.query) == 0 && !strings.Contains(text, c.shown) {
			t.Errorf("applying removed %s, which the plan did not show:\n%s", c.shown, text)
		}
	}
}

// A server whose last discovery listed none of its tools keeps their rows and settings:
// an import naming one of them is no tool "after discovery" planned from the file alone,
// whose apply, against the row discovery brings back, lifts refusals and removes
// parameters, test cases and the compensation that the plan never showed.
func TestImportOfUnavailableToolShowsWhatItChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "ev"})
	hs.Server().SetTool(deleteSpec)
	hs.Server().SetTool(restoreSpec)
	a := apptest.Start(t, nil)
	sv := a.RegisterServer(t, registry.Spec{Name: "ev", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true})
	settleDelete(t, a)
	// A discovery of an empty list: every tool unavailable, its row and settings kept.
	hs.Server().RemoveTool(hs.Server().Tools()...)
	if _, err := a.MCP.DiscoverOnce(ctx, sv.ID, "manual", admin); err != nil {
		t.Fatal(err)
	}
	if n := a.Count(t, `SELECT count(*) FROM mcp_tools WHERE available`); n != 0 {
		t.Fatalf("%d tools still available", n)
	}
	p := plan(t, a, "config.yaml", "version: 1\nservers: []\ntools:\n  - tool: ev__delete\n    risk: high\n")
	if p.HasErrors() {
		t.Fatalf("plan:\n%s", p)
	}
	// Listed again by the time the import applies.
	hs.Server().SetTool(deleteSpec)
	hs.Server().SetTool(restoreSpec)
	res, err := a.ConfigCode.Apply(ctx, admin, p)
	if err != nil {
		t.Fatal(err)
	}
	checkShown(t, a, p.String())
	if got := fmt.Sprint(p.Unapplied); !strings.Contains(got, `tools.ev__delete: server ev does not list a tool "delete" now`) {
		t.Errorf("not applied: %s", got)
	}
	if t.Failed() {
		t.Logf("result: %s, not applied: %v", res, res.Unapplied)
	}
}

// The tools of a server never discovered when the plan was made that, by the time it
// applies, have settings of their own: applying changes none of those the plan did not
// show (the safety net behind the plan's after discovery).
func TestPendingToolAppliesOnlyWhatPlanShowed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "ev"})
	hs.Server().SetTool(deleteSpec)
	hs.Server().SetTool(restoreSpec)
	a := apptest.Start(t, nil)
	sv := a.RegisterServer(t, registry.Spec{Name: "ev", Type: registry.TypeStreamableHTTP, URL: hs.URL()})
	p := plan(t, a, "config.yaml", "version: 1\nservers: []\ntools:\n  - tool: ev__delete\n    risk: high\n")
	if p.HasErrors() || p.Count(configcode.KindTool, configcode.ActionPending) != 1 {
		t.Fatalf("plan:\n%s", p)
	}
	// Discovered and configured after the plan was made.
	if _, err := a.MCP.DiscoverOnce(ctx, sv.ID, "manual", admin); err != nil {
		t.Fatal(err)
	}
	settleDelete(t, a)
	if _, err := a.Registry.SetEnabled(ctx, admin, sv.ID, true); err != nil {
		t.Fatal(err)
	}
	res, err := a.ConfigCode.Apply(ctx, admin, p)
	if err != nil {
		t.Fatal(err)
	}
	checkShown(t, a, p.String())
	if got := fmt.Sprint(res.Unapplied); !strings.Contains(got, "tools.ev__delete") || !strings.Contains(got, "permissions.bob") {
		t.Errorf("not applied: %s", got)
	}
}
