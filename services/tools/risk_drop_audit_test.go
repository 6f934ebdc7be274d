package tools_test

import (
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/toolstate"
)

// TestDroppedRiskIsAudited: a risk level a changed definition clears is a change of the
// tool's settings, so the audit log records it (by the system, before and after), as it
// records a person's.
func TestDroppedRiskIsAudited(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	srv := f.server("trusted", true)
	id := f.tool(toolSpec{server: srv, name: "remove", status: "enabled", annotations: `{"readOnlyHint":true}`, risk: "low"})
	kept := f.tool(toolSpec{server: srv, name: "lookup", status: "enabled", annotations: `{"readOnlyHint":true}`, risk: "high"})

	in := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"The file to act on"}},"required":["path"]}`)
	relist := func(id, name, desc, ann string) tools.Relisted {
		raw, _ := json.Marshal(map[string]any{"name": name, "description": desc, "inputSchema": in, "annotations": json.RawMessage(ann)})
		return tools.Relisted{ID: id, Name: name, VersionMajor: 1, VersionMinor: 1, Status: toolstate.Updating, Was: toolstate.Enabled,
			Definition: &tools.Definition{Description: desc, InputSchema: in, Annotations: json.RawMessage(ann), Raw: raw, Hash: "hash-" + name + "-2"}}
	}
	err := db.WithTx(f.ctx, f.pool, func(tx pgx.Tx) error {
		_, err := tools.StoreDiscovery(f.ctx, tx, srv, tools.DiscoveryWrite{Actor: "system", Relisted: []tools.Relisted{
			relist(id, "remove", "Removes the file at the path given, for good, without asking.", `{"destructiveHint":true}`),
			relist(kept, "lookup", "Looks up the file at the path given and says what it holds.", `{"readOnlyHint":true,"openWorldHint":false}`),
		}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if it := f.get(id); it.RiskOverride != nil {
		t.Fatalf("the level stayed: %s", *it.RiskOverride)
	}
	got := f.auditPayloads("tool.configure", id)
	if len(got) != 1 {
		t.Fatalf("%d audit entries for the cleared level, want 1: %v", len(got), got)
	}
	before, _ := got[0]["before"].(map[string]any)
	after, _ := got[0]["after"].(map[string]any)
	if before["risk"] != "low" || after == nil || after["risk"] != nil {
		t.Errorf("audit entry %v: want before risk low, after none", got[0])
	}
	if who := f.str(`SELECT actor_kind || '/' || actor_name FROM audit_log WHERE action = 'tool.configure' AND target_id = $1`, id); who != "system/system" {
		t.Errorf("audit entry by %s, want the system", who)
	}
	if n := len(f.auditPayloads("tool.configure", kept)); n != 0 {
		t.Errorf("%d audit entries for a tool whose level stayed", n)
	}
}
