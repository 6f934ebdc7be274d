package configcode_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/configcode"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/tools"
)

// A value saved in clear before the tool's definition marked its parameter secret (dial's
// digits nested, memo at the top) is exported as a reference, as a stored secret is, not
// as its value: the export needs only tool.inspect and is meant for version control.
func TestExportClearValueOfNowSecretParam(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "ev"})
	hs.Server().SetTool(mcptest.ToolSpec{Name: "work", Description: "Dials a line and leaves a memo.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{
			"dial":{"type":"object","properties":{"host":{"type":"string"},"digits":{"type":"string"}}},
			"memo":{"type":"string"},"note":{"type":"string"}}}`)})
	a := apptest.Start(t, nil)
	a.RegisterServer(t, registry.Spec{Name: "ev", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true})
	work := a.Settled(t, "ev__work")
	must[tools.Item](t)(a.Tools.Update(ctx, admin, work.ID, tools.Patch{Params: map[string]tools.ParamInput{
		"dial": {Mode: tools.ModeFixed, Value: json.RawMessage(`{"host":"db.local","digits":"7788"}`)},
		"memo": {Mode: tools.ModeDefault, Value: json.RawMessage(`"red-9"`)},
		"note": {Mode: tools.ModeDefault, Value: json.RawMessage(`"visible"`)},
	}}))
	if n := a.Count(t, `SELECT count(*) FROM mcp_tools WHERE configuration::text LIKE '%7788%' AND configuration::text LIKE '%red-9%'`); n != 1 {
		t.Fatal("the setup wants the values stored in clear")
	}
	// The server's new definition marks them secret; the stored values stay as they were.
	if _, err := a.Pool.Exec(ctx, `UPDATE mcp_tools SET input_schema = $2 WHERE id = $1`, work.ID, `{"type":"object","properties":{
		"dial":{"type":"object","properties":{"host":{"type":"string"},"digits":{"type":"string","format":"password"}}},
		"memo":{"type":"string","writeOnly":true},"note":{"type":"string"}}}`); err != nil {
		t.Fatal(err)
	}
	out := export(t, a)
	for _, secret := range []string{"7788", "red-9"} {
		if strings.Contains(out, secret) {
			t.Errorf("the export holds the now-secret value %q:\n%s", secret, out)
		}
	}
	for _, want := range []string{
		"dial:\n        mode: fixed\n        secret: ${env:" + configcode.SecretEnv("ev__work", "dial") + "}\n",
		"memo:\n        mode: default\n        secret: ${env:" + configcode.SecretEnv("ev__work", "memo") + "}\n",
		"note:\n        mode: default\n        value: visible\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the export lacks %q:\n%s", want, out)
		}
	}
}
