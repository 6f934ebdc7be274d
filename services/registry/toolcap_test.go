package registry_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/registry"
)

// A server stores at most MaxToolsPerServer tools, listed now or not: a discovery that
// would pass it is a failed run saying why, and stores nothing. Before, a server listing
// fresh names on every reconnect added rows forever (missing tools are never deleted).
// Not parallel: it lowers the cap of every Service.
func TestApplyDiscoveryToolCap(t *testing.T) {
	defer registry.SetMaxToolsPerServer(5)()
	f := newFixture(t)
	sv := f.create(stdioSpec("churn"))
	names := func(ns ...string) []registry.ToolDef {
		var out []registry.ToolDef
		for _, n := range ns {
			out = append(out, tool(n, "tool "+n, nil))
		}
		return out
	}
	wantResult(t, "first", f.discover(sv.ID, discovery("connect", names("a", "b", "c")...)), 3, 0, 0, 0)
	// a, b and c stay stored (c unavailable): 5 in all, the cap itself.
	wantResult(t, "to the cap", f.discover(sv.ID, discovery("connect", names("a", "b", "d", "e")...)), 2, 0, 2, 1)

	snapshot := f.strings(`SELECT t::text FROM mcp_tools t ORDER BY name`)
	rows := func() int {
		return f.count(`SELECT count(*) FROM tool_schemas`) + f.count(`SELECT count(*) FROM tool_state_history`)
	}
	before := rows()
	// Fresh names again, as a hostile server lists on every reconnect: refused.
	_, err := f.reg.ApplyDiscovery(f.ctx, sv.ID, discovery("connect", names("x", "y")...))
	if fe, ok := fault.As(err); !ok || fe.Code != "too_many_tools" || !strings.Contains(err.Error(), "at most 5") {
		t.Fatalf("past the cap: got error %v, want too_many_tools saying at most 5", err)
	}
	if errors.Is(err, registry.ErrDiscoverySuperseded) {
		t.Fatalf("past the cap: got %v, want its own error", err)
	}
	if got := f.strings(`SELECT t::text FROM mcp_tools t ORDER BY name`); strings.Join(got, "\n") != strings.Join(snapshot, "\n") {
		t.Fatalf("tools changed by a refused discovery:\ngot  %v\nwant %v", got, snapshot)
	}
	if n := rows(); n != before {
		t.Fatalf("got %d version and history rows, want %d (none new)", n, before)
	}
	runs, err := f.reg.DiscoveryRuns(f.ctx, sv.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].Status != "failed" || runs[0].Error == nil || !strings.Contains(*runs[0].Error, "at most 5") {
		t.Fatalf("refused run: got %+v, want a failed run saying at most 5", runs)
	}
	if ev := f.eventPayloads("discovery.failed"); len(ev) != 1 || !strings.Contains(ev[0]["error"].(string), "at most 5") {
		t.Fatalf("discovery.failed events: got %v", ev)
	}
	// Listing only stored names still works at the cap.
	wantResult(t, "stored names", f.discover(sv.ID, discovery("connect", names("a", "b", "c", "d", "e")...)), 0, 1, 4, 0)
	// And over it (the cap lowered below what is stored, as for a server that grew
	// past it before the cap existed): a list of stored names adds no rows.
	registry.SetMaxToolsPerServer(3)
	wantResult(t, "stored names over the cap", f.discover(sv.ID, discovery("connect", names("a", "b")...)), 0, 0, 2, 3)
}
