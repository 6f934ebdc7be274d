package tools_test

import (
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/toolstate"
)

// TestDroppedRiskBumpsConfigVersion: a rediscovery that clears a risk level is a new
// configuration version (recorded, by the discovery's actor), so a Configuration form
// opened before it, which sends its risk again, is refused rather than putting back a
// low level on a tool that is now destructive.
func TestDroppedRiskBumpsConfigVersion(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	srv := f.server("rediscover", true)
	id := f.tool(toolSpec{server: srv, name: "remove", status: "enabled", annotations: `{"readOnlyHint":true}`})
	f.update(id, tools.Patch{Risk: ptr("low"), MayLowerRisk: true, Reason: "reads only"})
	opened := f.get(id).ConfigVersion // the admin's form is opened at this version

	in := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"The file to act on"}},"required":["path"]}`)
	ann := json.RawMessage(`{"destructiveHint":true}`)
	desc := "Removes the file at the path given, for good, without asking."
	raw, _ := json.Marshal(map[string]any{"name": "remove", "description": desc, "inputSchema": in, "annotations": ann})
	err := db.WithTx(f.ctx, f.pool, func(tx pgx.Tx) error {
		_, err := tools.StoreDiscovery(f.ctx, tx, srv, tools.DiscoveryWrite{Actor: "system", Relisted: []tools.Relisted{{
			ID: id, Name: "remove", VersionMajor: 1, VersionMinor: 1, Status: toolstate.Updating, Was: toolstate.Enabled,
			Definition: &tools.Definition{Description: desc, InputSchema: in, Annotations: ann, Raw: raw, Hash: "hash-remove-2"}}}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	it := f.get(id)
	if it.RiskOverride != nil || it.ConfigVersion != opened+1 {
		t.Fatalf("after the definition became destructive: override %v, version %d; want none and version %d",
			it.RiskOverride, it.ConfigVersion, opened+1)
	}
	vs, err := f.svc.ConfigVersions(f.ctx, id, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) == 0 || vs[0].Version != it.ConfigVersion || vs[0].Actor != "system" {
		t.Errorf("configuration history: %+v; want version %d recorded by system", vs, it.ConfigVersion)
	} else {
		var snap map[string]any
		_ = json.Unmarshal(vs[0].Configuration, &snap)
		if snap["risk"] != nil || snap["tags"] == nil {
			t.Errorf("recorded configuration %s; want the settings without the risk level", vs[0].Configuration)
		}
	}

	// The form opened before re-sends its low level: refused, the level stays cleared.
	_, err = f.svc.Update(f.ctx, alice, id, tools.Patch{Risk: ptr("low"), MayLowerRisk: true, ExpectVersion: &opened})
	if se, _ := fault.As(err); se == nil || se.Code != tools.CodeStale {
		t.Fatalf("saving the form opened before the rediscovery: %v; want a stale configuration", err)
	}
	if it := f.get(id); it.RiskOverride != nil {
		t.Errorf("the stale form put back the level %q", *it.RiskOverride)
	}
}
