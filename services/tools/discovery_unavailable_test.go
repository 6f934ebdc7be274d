package tools_test

import (
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/schema"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/toolstate"
)

// TestAutoEnableSkipsUnavailable: a tool still discovered (awaiting validation) that
// the server no longer lists is validated by the discovery that marks it unavailable,
// but its server's auto-enable policy must not enable it: nobody can see or call it.
// A waiting tool the server still lists is enabled by the same policy.
func TestAutoEnableSkipsUnavailable(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	srv := f.server("auto", false)
	f.exec(`UPDATE mcp_servers SET auto_enable = true WHERE id = $1`, srv)
	gone := f.tool(toolSpec{server: srv, name: "old_lookup", status: "discovered"})
	listed := f.tool(toolSpec{server: srv, name: "lookup", status: "discovered"})
	pending := func(id, name string) toolstate.Pending {
		return toolstate.Pending{ID: id, Status: toolstate.Discovered, Hash: "hash-" + name, Def: schema.Tool{Name: name,
			Description: "Does " + name + " for the tests and returns what it did.", InputSchema: json.RawMessage(`{"type":"object","properties":{}}`)}}
	}
	err := db.WithTx(f.ctx, f.pool, func(tx pgx.Tx) error {
		_, err := tools.StoreDiscovery(f.ctx, tx, srv, tools.DiscoveryWrite{Actor: "system", Gone: []tools.Gone{{ID: gone, Name: "old_lookup", Status: toolstate.Discovered, Why: "no longer listed"}}, Seen: []string{"lookup"},
			Waiting: []toolstate.Pending{pending(gone, "old_lookup"), pending(listed, "lookup")}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, avail := f.status(gone), f.count(`SELECT count(*) FROM mcp_tools WHERE id = $1 AND available`, gone); got != toolstate.Validated || avail != 0 {
		t.Errorf("tool no longer listed: %s, available rows %d; want validated and unavailable", got, avail)
	}
	if n := f.count(`SELECT count(*) FROM audit_log WHERE action = 'tool.enable' AND target_id = $1`, gone); n != 0 {
		t.Errorf("%d tool.enable audit entries for the unavailable tool, want none", n)
	}
	if got := f.status(listed); got != toolstate.Enabled {
		t.Errorf("tool still listed: %s, want enabled by its server's policy", got)
	}
}
