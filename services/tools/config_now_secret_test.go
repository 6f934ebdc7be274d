package tools_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/tools"
)

// Before and after the server redefines two parameters as secret: dial's digits nested
// (format password inside the object) and memo at the top (writeOnly).
const (
	plainParamsSchema = `{"type":"object","properties":{
	"dial":{"type":"object","properties":{"host":{"type":"string"},"digits":{"type":"string"}}},
	"memo":{"type":"string"},
	"note":{"type":"string"}}}`
	nowSecretParamsSchema = `{"type":"object","properties":{
	"dial":{"type":"object","properties":{"host":{"type":"string"},"digits":{"type":"string","format":"password"}}},
	"memo":{"type":"string","writeOnly":true},
	"note":{"type":"string"}}}`
)

// A value saved in clear before the tool's definition marked its parameter secret is
// masked wherever the configuration leaves the server, as the form hides it: the API
// view, the configuration versions and the audit payload of a later change.
func TestClearValueOfNowSecretParamMasked(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	srv := f.server("cfg-now-secret", false)
	id := f.tool(toolSpec{server: srv, name: "work", status: "validated", schema: plainParamsSchema})
	f.update(id, tools.Patch{Reason: "plain settings", Params: map[string]tools.ParamInput{
		"dial": fixedValue(`{"host":"db.local","digits":"7788"}`),
		"memo": fixedValue(`"red-9"`),
		"note": fixedValue(`"visible"`),
	}})
	if raw := f.str(`SELECT configuration::text FROM mcp_tools WHERE id = $1`, id); !strings.Contains(raw, "7788") || !strings.Contains(raw, "red-9") {
		t.Fatalf("the setup wants the values stored in clear: %s", raw)
	}
	// The server's new definition (validated since; the stored values stay as they were).
	f.exec(`UPDATE mcp_tools SET input_schema = $2 WHERE id = $1`, id, nowSecretParamsSchema)
	it := f.get(id)
	leaks := func(where, text string) {
		t.Helper()
		for _, p := range []string{"7788", "red-9"} {
			if strings.Contains(text, p) {
				t.Errorf("%s shows the now-secret value %q: %s", where, p, text)
			}
		}
		if !strings.Contains(text, "visible") {
			t.Errorf("%s lost the plain value: %s", where, text)
		}
	}

	c := f.config(id)
	// The fixed values the test panel shows.
	names, values := c.FixedParams(it.InputSchema)
	leaks("the fixed parameters", fmt.Sprint(names, values))
	view := c.APIView(it.InputSchema)
	raw, _ := json.Marshal(view)
	leaks("the API view", string(raw))
	if string(view["fixed"]["dial"]) != `"`+tools.Mask+`"` || string(view["fixed"]["memo"]) != `"`+tools.Mask+`"` {
		t.Errorf("the API view masks them otherwise than a secret: %s", raw)
	}
	// Sent back as the API shows it, the mask keeps the stored value (now encrypted).
	in, _, err := tools.ParamInputs(raw)
	if err != nil {
		t.Fatal(err)
	}
	timeout := 5000
	f.update(id, tools.Patch{Reason: "a timeout", TimeoutMS: &timeout}) // params unchanged: still in clear
	vs, err := f.svc.ConfigVersions(f.ctx, id, 10)
	if err != nil || len(vs) != 2 {
		t.Fatalf("versions: %d %v", len(vs), err)
	}
	for _, v := range vs {
		leaks(fmt.Sprintf("configuration version %d", v.Version), string(v.Configuration))
		var sn struct {
			Params map[string]map[string]any `json:"params"`
		}
		_ = json.Unmarshal(v.Configuration, &sn)
		for _, name := range []string{"dial", "memo"} {
			if sn.Params[name]["value"] != tools.Mask || sn.Params[name]["secret"] != true {
				t.Errorf("version %d shows %s as %v, want it masked as a secret", v.Version, name, sn.Params[name])
			}
		}
	}
	payloads := f.auditPayloads("tool.configure", id)
	if len(payloads) != 2 {
		t.Fatalf("audit rows: %d", len(payloads))
	}
	last, _ := json.Marshal(payloads[len(payloads)-1])
	if !strings.Contains(string(last), "timeout_ms") {
		t.Fatalf("the last audit row is not the timeout change: %s", last)
	}
	leaks("the audit payload", string(last))

	f.update(id, tools.Patch{Reason: "sent back", Params: in})
	if raw := f.str(`SELECT configuration::text FROM mcp_tools WHERE id = $1`, id); strings.Contains(raw, "7788") || strings.Contains(raw, "red-9") {
		t.Errorf("saving the API view kept the values in clear: %s", raw)
	}
	r, err := f.svc.Resolve(id, f.config(id))
	if err != nil {
		t.Fatal(err)
	}
	if compact(r.Fixed["dial"]) != `{"host":"db.local","digits":"7788"}` || string(r.Fixed["memo"]) != `"red-9"` {
		t.Errorf("resolved after saving the API view: %s", r.Fixed)
	}
}
