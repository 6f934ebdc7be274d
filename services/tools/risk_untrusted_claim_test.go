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

// TestUntrustedClaimLostDropsALowerRisk: on an untrusted server a read-only tool rates
// medium (the trust floor) and an administrator lowered it to low. When the server
// redefines it as a writing one (readOnlyHint false, destructiveHint false) it still
// rates medium, but the low rested on the read-only claim that is gone: the level is
// dropped (audited, in its history) before the server's auto-enable policy turns the
// tool on again, so it runs at medium, not low. Annotations claiming no more than
// before keep the level: the same ones reworded, a hint the rating ignores added, or
// a claim of less risk than before.
func TestUntrustedClaimLostDropsALowerRisk(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	srv := f.server("untrusted", false)
	f.exec(`UPDATE mcp_servers SET auto_enable = true WHERE id = $1`, srv)
	flipped := f.tool(toolSpec{server: srv, name: "notes", status: "enabled", annotations: `{"readOnlyHint":true}`, risk: "low"})
	same := f.tool(toolSpec{server: srv, name: "lookup", status: "enabled", annotations: `{"readOnlyHint":true}`, risk: "low"})
	hinted := f.tool(toolSpec{server: srv, name: "search", status: "enabled", annotations: `{"readOnlyHint":true}`, risk: "low"})
	safer := f.tool(toolSpec{server: srv, name: "save", status: "enabled", annotations: `{"destructiveHint":true}`, risk: "low"})

	in := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"The file to act on"}},"required":["path"]}`)
	relist := func(id, name, desc, ann string) tools.Relisted {
		raw, _ := json.Marshal(map[string]any{"name": name, "description": desc, "inputSchema": in, "annotations": json.RawMessage(ann)})
		return tools.Relisted{ID: id, Name: name, VersionMajor: 1, VersionMinor: 1, Status: toolstate.Updating, Was: toolstate.Enabled,
			Definition: &tools.Definition{Description: desc, InputSchema: in, Annotations: json.RawMessage(ann), Raw: raw, Hash: "hash-" + name + "-2"}}
	}
	err := db.WithTx(f.ctx, f.pool, func(tx pgx.Tx) error {
		_, err := tools.StoreDiscovery(f.ctx, tx, srv, tools.DiscoveryWrite{Actor: "system", Server: "untrusted", Relisted: []tools.Relisted{
			relist(flipped, "notes", "Writes the text given over the file at the path given, replacing what it held.", `{"readOnlyHint":false,"destructiveHint":false}`),
			relist(same, "lookup", "Looks up the file at the path given and says what it holds, in more words.", `{"readOnlyHint":true}`),
			relist(hinted, "search", "Searches the files under the path given.", `{"readOnlyHint":true,"openWorldHint":true}`),
			relist(safer, "save", "Saves the file at the path given; it never deletes anything.", `{"destructiveHint":false}`),
		}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	it := f.get(flipped)
	if it.RiskOverride != nil || it.Risk().Level != risk.Medium {
		t.Fatalf("the read-only tool made a writing one: override %v, level %s; want none, medium", deref(it.RiskOverride), it.Risk().Level)
	}
	// As every dropped level: the policy enables it again, at the annotations' level.
	if it.Status != toolstate.Enabled {
		t.Errorf("status %s, want enabled again by the server's policy (at medium)", it.Status)
	}
	var meta map[string]any
	_ = json.Unmarshal([]byte(f.str(`SELECT metadata::text FROM tool_state_history WHERE tool_id = $1 AND to_status = 'validating'`, flipped)), &meta)
	if meta["risk_override_cleared"] != "low" || meta["risk"] != "medium" {
		t.Errorf("history of the change: %v; want risk_override_cleared low and risk medium", meta)
	}
	got := f.auditPayloads("tool.configure", flipped)
	if len(got) != 1 {
		t.Fatalf("%d audit entries for the cleared level, want 1: %v", len(got), got)
	}
	if before, _ := got[0]["before"].(map[string]any); before["risk"] != "low" {
		t.Errorf("audit entry %v: want before risk low", got[0])
	}
	for name, id := range map[string]string{"same annotations": same, "a hint the rating ignores": hinted, "a claim of less risk": safer} {
		if it := f.get(id); deref(it.RiskOverride) != "low" || it.Risk().Level != risk.Low {
			t.Errorf("%s: override %v, level %s; want low kept", name, deref(it.RiskOverride), it.Risk().Level)
		}
	}
	if n := f.count(`SELECT count(*) FROM tool_state_history WHERE tool_id = ANY($1) AND metadata ? 'risk_override_cleared'`,
		[]string{same, hinted, safer}); n != 0 {
		t.Errorf("%d history rows record a level cleared for the tools that kept theirs", n)
	}
}
