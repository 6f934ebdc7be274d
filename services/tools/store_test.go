package tools_test

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/schema"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/toolstate"
)

// TestSortByNameInDB: where the database's collation is not C, discovery validates a
// server's tools in the order the database sorts their names, as ORDER BY name did.
// The test database's collation is C, so that order is the names' bytes.
func TestSortByNameInDB(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	names := []string{"b", "B", "_a", "a_b", "a", "é", "Z", "a-b", "ab", "a.b", "0", "zz", "Ä"}
	ts := make([]toolstate.Pending, len(names))
	for i, n := range names {
		ts[i] = toolstate.Pending{ID: n, Def: schema.Tool{Name: n}}
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(ts), func(i, j int) { ts[i], ts[j] = ts[j], ts[i] })
	tx, err := f.pool.Begin(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(f.ctx)
	if err := tools.SortByNameInDB(f.ctx, tx, ts); err != nil {
		t.Fatal(err)
	}
	got := make([]string, len(ts))
	for i, p := range ts {
		got[i] = p.Def.Name
		if p.ID != p.Def.Name {
			t.Fatalf("tool %q carries the id of %q: sorting separated them", p.Def.Name, p.ID)
		}
	}
	want := slices.Clone(names)
	slices.SortFunc(want, strings.Compare)
	if !slices.Equal(got, want) {
		t.Fatalf("got order %q, want %q", got, want)
	}
}

// TestStoreDiscoveryKeepsADisable: a discovery read a tool as enabled, then a person
// disabled it before the discovery wrote the tool's new definition. The discovery
// must not move it from disabled (and the auto-enable policy of its server must not
// turn it back on): it fails as a conflict and changes nothing.
func TestStoreDiscoveryKeepsADisable(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	srv := f.server("auto", false)
	f.exec(`UPDATE mcp_servers SET auto_enable = true WHERE id = $1`, srv)
	id := f.tool(toolSpec{server: srv, name: "echo", status: "disabled"})
	in := json.RawMessage(`{"type":"object","properties":{"message":{"type":"string","description":"The text to echo"}},"required":["message"]}`)
	desc := "Echoes the message it is given back to the caller, now in upper case."
	raw, _ := json.Marshal(map[string]any{"name": "echo", "description": desc, "inputSchema": in})
	def := tools.Definition{Description: desc, InputSchema: in, Raw: raw, Hash: "hash-echo-2"}
	err := db.WithTx(f.ctx, f.pool, func(tx pgx.Tx) error {
		_, err := tools.StoreDiscovery(f.ctx, tx, srv, tools.DiscoveryWrite{Actor: "system",
			Relisted: []tools.Relisted{{ID: id, Name: "echo", Definition: &def, VersionMajor: 1, VersionMinor: 1,
				Status: toolstate.Updating, Was: toolstate.Enabled}}})
		return err
	})
	if got := f.status(id); got != "disabled" {
		t.Fatalf("after a discovery that read the tool as enabled: %s (err %v), want disabled as the person left it", got, err)
	}
	if !fault.Is(err, fault.KindConflict) || !strings.Contains(err.Error(), "is disabled now, not enabled") {
		t.Fatalf("got %v, want a conflict saying the tool is disabled now, not enabled", err)
	}
}
