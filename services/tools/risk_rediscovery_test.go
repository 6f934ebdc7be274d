package tools_test

import (
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/toolstate"
)

// TestChangedDefinitionDropsALowerRisk: a level was chosen for the definition it was
// set on. When the definition changes and its annotations give more than that level,
// the level goes (recorded in the tool's history) before the server's auto-enable
// policy turns the tool on again; a level at or above the new one stays.
func TestChangedDefinitionDropsALowerRisk(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	srv := f.server("auto", true)
	f.exec(`UPDATE mcp_servers SET auto_enable = true WHERE id = $1`, srv)
	lowered := f.tool(toolSpec{server: srv, name: "remove", status: "enabled", annotations: `{"readOnlyHint":true}`, risk: "low"})
	raised := f.tool(toolSpec{server: srv, name: "lookup", status: "enabled", annotations: `{"readOnlyHint":true}`, risk: "high"})
	kept := f.tool(toolSpec{server: srv, name: "write", status: "enabled", annotations: `{"readOnlyHint":true}`, risk: "medium"})
	// No annotations (high) and an administrator's low: a reworded description keeps it.
	reworded := f.tool(toolSpec{server: srv, name: "weather", status: "enabled", annotations: `{}`, risk: "low"})

	in := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"The file to act on"}},"required":["path"]}`)
	def := func(name, desc, ann string) *tools.Definition {
		raw, _ := json.Marshal(map[string]any{"name": name, "description": desc, "inputSchema": in, "annotations": json.RawMessage(ann)})
		return &tools.Definition{Description: desc, InputSchema: in, Annotations: json.RawMessage(ann), Raw: raw, Hash: "hash-" + name + "-2"}
	}
	relist := func(id, name string, d *tools.Definition) tools.Relisted {
		return tools.Relisted{ID: id, Name: name, Definition: d, VersionMajor: 1, VersionMinor: 1,
			Status: toolstate.Updating, Was: toolstate.Enabled}
	}
	err := db.WithTx(f.ctx, f.pool, func(tx pgx.Tx) error {
		_, err := tools.StoreDiscovery(f.ctx, tx, srv, tools.DiscoveryWrite{Actor: "system", Relisted: []tools.Relisted{
			relist(lowered, "remove", def("remove", "Removes the file at the path given, for good, without asking.", `{"destructiveHint":true}`)),
			relist(raised, "lookup", def("lookup", "Looks up the file at the path given and says what it holds.", `{"readOnlyHint":true,"openWorldHint":false}`)),
			// Its annotations give now the level chosen before: it stays.
			relist(kept, "write", def("write", "Writes the file at the path given, replacing what it held.", `{"destructiveHint":false}`)),
			relist(reworded, "weather", def("weather", "Tells the weather at the place given, now in more words.", `{}`)),
		}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	it := f.get(lowered)
	if it.RiskOverride != nil || it.Risk().Level != risk.High || it.Status != "enabled" {
		t.Fatalf("the lowered tool after its definition became destructive: override %v, level %s, %s; want none, high, enabled",
			it.RiskOverride, it.Risk().Level, it.Status)
	}
	var meta map[string]any
	_ = json.Unmarshal([]byte(f.str(`SELECT metadata::text FROM tool_state_history WHERE tool_id = $1 AND to_status = 'validating'`, lowered)), &meta)
	if meta["risk_override_cleared"] != "low" || meta["risk"] != "high" {
		t.Errorf("history of the change: %v; want risk_override_cleared low and risk high", meta)
	}
	if it := f.get(raised); deref(it.RiskOverride) != "high" {
		t.Errorf("a level above the annotations was dropped: %v", it.RiskOverride)
	}
	if it := f.get(kept); deref(it.RiskOverride) != "medium" {
		t.Errorf("a level equal to the new annotations' was dropped: %v", it.RiskOverride)
	}
	if it := f.get(reworded); deref(it.RiskOverride) != "low" {
		t.Errorf("a level was dropped although the annotations give no more than before: %v", it.RiskOverride)
	}
	if n := f.count(`SELECT count(*) FROM tool_state_history WHERE tool_id = ANY($1) AND metadata ? 'risk_override_cleared'`,
		[]string{raised, kept, reworded}); n != 0 {
		t.Errorf("%d history rows record a level cleared for the tools that kept theirs", n)
	}
}
