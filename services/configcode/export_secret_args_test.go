package configcode_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/tools"
)

// A test case's argument and a compensation's fixed value saved in clear before the
// tool's (or the undo tool's) definition marked them secret are exported masked, with a
// comment, as a clear setting is given as a reference: the export needs only
// tool.inspect. Importing the file applies neither and keeps the stored ones.
func TestExportMasksNowSecretCaseAndCompensationValues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "ew"})
	hs.Server().SetTool(mcptest.ToolSpec{Name: "work", Description: "Dials a line and leaves a memo.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{
			"dial":{"type":"object","properties":{"host":{"type":"string"},"digits":{"type":"string"}}},
			"memo":{"type":"string"},"note":{"type":"string"}}}`)})
	hs.Server().SetTool(mcptest.ToolSpec{Name: "unwork", Description: "Takes a memo back off the line.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"memo":{"type":"string"},"tag":{"type":"string"}}}`)})
	a := apptest.Start(t, nil)
	a.RegisterServer(t, registry.Spec{Name: "ew", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true})
	work := a.Settled(t, "ew__work")
	unwork := a.Settled(t, "ew__unwork")
	must[tools.TestCase](t)(a.Tools.SaveTestCase(ctx, admin, work.ID, tools.TestCase{Name: "call",
		Arguments: json.RawMessage(`{"dial":{"host":"db.local","digits":"7788"},"memo":"red-9","note":"visible"}`)}))
	if err := a.Executions.SetCompensation(ctx, admin, work.ID, "ew__unwork", map[string]executions.MappedArgument{
		"memo": {Value: json.RawMessage(`"blue-4"`)}, "tag": {Value: json.RawMessage(`"plain-tag"`)}}); err != nil {
		t.Fatal(err)
	}
	// The server's new definitions mark them secret; the stored values stay as they were.
	for id, schema := range map[string]string{
		work.ID: `{"type":"object","properties":{
			"dial":{"type":"object","properties":{"host":{"type":"string"},"digits":{"type":"string","format":"password"}}},
			"memo":{"type":"string","writeOnly":true},"note":{"type":"string"}}}`,
		unwork.ID: `{"type":"object","properties":{"memo":{"type":"string","writeOnly":true},"tag":{"type":"string"}}}`,
	} {
		if _, err := a.Pool.Exec(ctx, `UPDATE mcp_tools SET input_schema = $2 WHERE id = $1`, id, schema); err != nil {
			t.Fatal(err)
		}
	}
	out := export(t, a)
	for _, secret := range []string{"7788", "red-9", "blue-4"} {
		if strings.Contains(out, secret) {
			t.Errorf("the export holds the now-secret value %q:\n%s", secret, out)
		}
	}
	for _, want := range []string{"host: db.local", "note: visible", "value: plain-tag",
		"digits: '********' # secret (the tool's input schema marks it): not exported; an import keeps the stored case",
		"memo: '********' # secret (the tool's input schema marks it): not exported; an import keeps the stored case",
		"value: '********' # secret (the undo tool's input schema marks it): not exported; an import keeps the stored compensation",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the export lacks %q:\n%s", want, out)
		}
	}

	// Imported again, the masks are applied nowhere: the case and compensation stay.
	p := plan(t, a, "config.yaml", out)
	if p.HasErrors() {
		t.Fatalf("plan:\n%s", p)
	}
	for _, field := range []string{"test_cases.call.arguments", "compensation.arguments.memo"} {
		found := false
		for _, u := range p.Unapplied {
			found = found || strings.Contains(u.Field, field)
		}
		if !found {
			t.Errorf("the plan does not say %s is not applied:\n%s", field, p)
		}
	}
	if _, err := a.ConfigCode.Apply(ctx, admin, p); err != nil {
		t.Fatal(err)
	}
	if n := a.Count(t, `SELECT count(*) FROM tool_test_cases WHERE name = 'call' AND arguments::text LIKE '%red-9%' AND arguments::text LIKE '%7788%'`); n != 1 {
		t.Errorf("the stored case was changed by the import")
	}
	if n := a.Count(t, `SELECT count(*) FROM tool_compensations WHERE argument_map::text LIKE '%blue-4%'`); n != 1 {
		t.Errorf("the stored compensation was changed by the import")
	}
	if n := a.Count(t, `SELECT count(*) FROM tool_test_cases WHERE arguments::text LIKE '%********%'`) +
		a.Count(t, `SELECT count(*) FROM tool_compensations WHERE argument_map::text LIKE '%********%'`); n != 0 {
		t.Errorf("a mask was stored in %d rows", n)
	}
}
