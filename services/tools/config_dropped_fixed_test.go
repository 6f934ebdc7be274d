package tools_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/schema"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/toolstate"
)

// TestDroppedFixedSettingIsAFinding: a fixed setting is a restriction a person chose.
// A new definition without its parameter no longer gets the value; its validation says
// so (a warning, which does not block a person's enable), and the server's auto-enable
// policy leaves the tool validated for a person to look at. Saving the configuration
// again drops the setting, and the next validation no longer reports it.
func TestDroppedFixedSettingIsAFinding(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	srv := f.server("files", true)
	f.exec(`UPDATE mcp_servers SET auto_enable = true WHERE id = $1`, srv)
	old := `{"type":"object","properties":{"path":{"type":"string","description":"Where to list"},"units":{"type":"string","description":"Size units"}}}`
	fixedGone := f.tool(toolSpec{server: srv, name: "list", status: "enabled", schema: old})
	defaultGone := f.tool(toolSpec{server: srv, name: "stat", status: "enabled", schema: old})
	fixedKept := f.tool(toolSpec{server: srv, name: "size", status: "enabled", schema: old})
	f.update(fixedGone, tools.Patch{Params: map[string]tools.ParamInput{"path": fixedValue(`"/tmp/sandbox"`), "units": fixedValue(`"kb"`)}})
	f.update(defaultGone, tools.Patch{Params: map[string]tools.ParamInput{"path": value(`"/tmp"`)}})
	f.update(fixedKept, tools.Patch{Params: map[string]tools.ParamInput{"units": fixedValue(`"kb"`)}})

	// The upstream drops path from every tool.
	in := json.RawMessage(`{"type":"object","properties":{"units":{"type":"string","description":"Size units"}}}`)
	relist := func(id, name string) tools.Relisted {
		desc := "Works on the files of the server and says what it found there."
		raw, _ := json.Marshal(map[string]any{"name": name, "description": desc, "inputSchema": in})
		return tools.Relisted{ID: id, Name: name, VersionMajor: 2, Status: toolstate.Updating, Was: toolstate.Enabled,
			Definition: &tools.Definition{Description: desc, InputSchema: in, Raw: raw, Hash: "hash-" + name + "-2"}}
	}
	var out []toolstate.Outcome
	err := db.WithTx(f.ctx, f.pool, func(tx pgx.Tx) error {
		var err error
		out, err = tools.StoreDiscovery(f.ctx, tx, srv, tools.DiscoveryWrite{Actor: "system", Relisted: []tools.Relisted{
			relist(fixedGone, "list"), relist(defaultGone, "stat"), relist(fixedKept, "size")}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	if got := f.status(fixedGone); got != toolstate.Validated {
		t.Errorf("tool whose fixed path was dropped: %s, want validated (not enabled by the server's policy)", got)
	}
	for _, id := range []string{defaultGone, fixedKept} {
		if got := f.status(id); got != toolstate.Enabled {
			t.Errorf("tool %s: %s, want enabled again by the server's policy", f.get(id).Name, got)
		}
	}
	finding := func(fs []schema.Finding) *schema.Finding {
		i := slices.IndexFunc(fs, func(x schema.Finding) bool { return x.Code == "fixed_param_dropped" })
		if i < 0 {
			return nil
		}
		return &fs[i]
	}
	for _, o := range out {
		if got := finding(o.Findings); (got != nil) != (o.ID == fixedGone) {
			t.Errorf("outcome of %s: fixed_param_dropped %v", f.get(o.ID).Name, got)
		}
	}
	latest := func(id string) []schema.Finding {
		t.Helper()
		v, ok, err := f.svc.LatestValidation(f.ctx, f.get(id))
		if err != nil || !ok {
			t.Fatalf("latest validation of %s: %v %v", id, ok, err)
		}
		var fs []schema.Finding
		if err := json.Unmarshal(v.Findings, &fs); err != nil {
			t.Fatal(err)
		}
		return fs
	}
	got := finding(latest(fixedGone))
	if got == nil {
		t.Fatalf("the validation of the new definition says nothing of the dropped fixed path: %v", latest(fixedGone))
	}
	if got.Severity != schema.SeverityWarning || !strings.Contains(got.Message, `path`) ||
		!strings.Contains(got.Message, `"/tmp/sandbox"`) || strings.Contains(got.Message, "units") {
		t.Errorf("finding %+v: want a warning naming path and its value, not units", got)
	}
	if w := deref(f.get(fixedGone).ValidationWorst); w != "warning" {
		t.Errorf("validation_worst %q, want warning", w)
	}
	for _, id := range []string{defaultGone, fixedKept} {
		if got := finding(latest(id)); got != nil {
			t.Errorf("tool %s: %+v, want no fixed_param_dropped", f.get(id).Name, got)
		}
	}

	// Validating again (tools.Validate) finds it too; a person may still enable the tool.
	if _, err := f.svc.Revalidate(f.ctx, alice, fixedGone); err != nil {
		t.Fatal(err)
	}
	if finding(latest(fixedGone)) == nil {
		t.Fatal("validating again lost the finding")
	}
	f.setEnabled([]string{fixedGone}, true, "", false)
	if got := f.status(fixedGone); got != toolstate.Enabled {
		t.Fatalf("enabled by hand: %s", got)
	}

	// Saving the configuration again (here the form's settings: units only) drops the
	// setting; the next validation is clean of it.
	f.update(fixedGone, tools.Patch{Params: map[string]tools.ParamInput{"units": fixedValue(`"kb"`)}})
	if _, ok := f.config(fixedGone).Params["path"]; ok {
		t.Fatal("saving the configuration kept the dropped path")
	}
	if _, err := f.svc.Revalidate(f.ctx, alice, fixedGone); err != nil {
		t.Fatal(err)
	}
	if got := finding(latest(fixedGone)); got != nil {
		t.Errorf("after the configuration was saved again: %+v", got)
	}
}

// A tool never enabled, whose new definition dropped a parameter its configuration
// fixes, is not enabled by being put in a category with auto-enable on either.
func TestDroppedFixedSettingKeepsCategoryAutoEnable(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	srv := f.server("files", true)
	old := `{"type":"object","properties":{"path":{"type":"string","description":"Where to list"},"units":{"type":"string","description":"Size units"}}}`
	id := f.tool(toolSpec{server: srv, name: "list", status: "validated", schema: old})
	f.update(id, tools.Patch{Params: map[string]tools.ParamInput{"path": fixedValue(`"/tmp/sandbox"`)}})
	if got := f.status(id); got != toolstate.Configured {
		t.Fatalf("after its configuration: %s, want configured", got)
	}
	in := json.RawMessage(`{"type":"object","properties":{"units":{"type":"string","description":"Size units"}}}`)
	desc := "Works on the files of the server and says what it found there."
	raw, _ := json.Marshal(map[string]any{"name": "list", "description": desc, "inputSchema": in})
	if err := db.WithTx(f.ctx, f.pool, func(tx pgx.Tx) error {
		_, err := tools.StoreDiscovery(f.ctx, tx, srv, tools.DiscoveryWrite{Actor: "system", Relisted: []tools.Relisted{{
			ID: id, Name: "list", VersionMajor: 2, Status: toolstate.Updating, Was: toolstate.Configured,
			Definition: &tools.Definition{Description: desc, InputSchema: in, Raw: raw, Hash: "hash-list-2"}}}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got := f.status(id); got != toolstate.Validated {
		t.Fatalf("after the new definition: %s, want validated", got)
	}
	if _, err := f.svc.SaveCategory(f.ctx, alice, "", tools.CategoryInput{Name: "reading", AutoEnable: true}); err != nil {
		t.Fatal(err)
	}
	if it := f.update(id, tools.Patch{Category: ptr("reading")}); it.Status != toolstate.Validated {
		t.Errorf("put in an auto-enable category: %s, want validated (its fixed path was dropped)", it.Status)
	}
}
