package registry_test

import (
	"errors"
	"testing"

	"github.com/toolwarden/toolwarden/services/registry"
)

// Two replicas list one server; the listing that began first commits last. Its list is
// not stored over the newer one, and no run is recorded for it; a listing begun later
// still is.
func TestApplyDiscoveryOvertakenByNewerListing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sv := f.create(httpSpec("two-replicas"))
	seq := func() int64 {
		t.Helper()
		n, err := f.reg.ListingSeq(f.ctx)
		if err != nil {
			t.Fatalf("listing seq: %v", err)
		}
		return n
	}
	older, newer := seq(), seq()
	if newer <= older {
		t.Fatalf("listing numbers %d then %d, want increasing", older, newer)
	}

	d := discovery("list_changed", tool("echo", "Echoes a message (newer)", map[string]string{"message": strProp}, "message"))
	d.Seq = newer
	if res := f.discover(sv.ID, d); res.Added != 1 {
		t.Fatalf("newer listing: got added %d, want 1", res.Added)
	}
	runs := f.count(`SELECT count(*) FROM discovery_runs WHERE server_id = $1`, sv.ID)

	d = discovery("connect", tool("echo", "Echoes a message (older)", map[string]string{"message": strProp}, "message"),
		tool("wipe", "Deletes everything", nil))
	d.Seq = older
	completed := len(f.eventPayloads("discovery.completed"))
	res, err := f.reg.ApplyDiscovery(f.ctx, sv.ID, d)
	if !errors.Is(err, registry.ErrDiscoveryOvertaken) {
		t.Fatalf("older listing stored after the newer: got error %v, want ErrDiscoveryOvertaken", err)
	}
	// What it says is what is stored: the newer listing's run and its one tool; and the
	// pages that showed its progress hear that it ended.
	if lastRun := f.count(`SELECT max(id) FROM discovery_runs WHERE server_id = $1`, sv.ID); res.RunID != int64(lastRun) || res.Total != 1 || res.Added+res.Updated+res.Removed != 0 {
		t.Fatalf("overtaken result %+v, want the newer run %d with its 1 tool and nothing changed", res, lastRun)
	}
	if evs := f.eventPayloads("discovery.completed"); len(evs) != completed+1 || evs[len(evs)-1]["run_id"] != float64(res.RunID) {
		t.Fatalf("discovery.completed events: %v, want one more naming run %d", evs, res.RunID)
	}
	if got := f.strings(`SELECT description FROM mcp_tools WHERE server_id = $1 ORDER BY name`, sv.ID); len(got) != 1 || got[0] != "Echoes a message (newer)" {
		t.Fatalf("tools after the older listing: %q, want only the newer listing's echo", got)
	}
	if n := f.count(`SELECT count(*) FROM discovery_runs WHERE server_id = $1`, sv.ID); n != runs {
		t.Fatalf("%d runs after the older listing, want %d (none recorded for it)", n, runs)
	}

	// A listing begun after the stored one is stored; so is one that took no number.
	d = discovery("manual", tool("echo", "Echoes a message (latest)", map[string]string{"message": strProp}, "message"))
	d.Seq = seq()
	if res := f.discover(sv.ID, d); res.Updated != 1 {
		t.Fatalf("latest listing: got updated %d, want 1", res.Updated)
	}
	d = discovery("manual", tool("echo", "Echoes a message (unnumbered)", map[string]string{"message": strProp}, "message"))
	if res := f.discover(sv.ID, d); res.Updated != 1 {
		t.Fatalf("unnumbered listing: got updated %d, want 1", res.Updated)
	}
}
