package registry_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/registry"
)

// An upstream server picks the length of its error text: what is stored and published
// of it is clipped, whichever of the three ways it arrives.
func TestUpstreamErrorTextClipped(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sv := f.create(httpSpec("loud"))
	huge := strings.Repeat("é", 512<<10) // 1 MiB, two bytes a character

	short := func(what, s string) {
		t.Helper()
		if len(s) > registry.MaxErrorText+len(registry.CutMark) || !strings.HasSuffix(s, registry.CutMark) {
			t.Fatalf("%s: got %d bytes ending %q, want at most %d ending %q", what, len(s), s[max(0, len(s)-12):],
				registry.MaxErrorText+len(registry.CutMark), registry.CutMark)
		}
	}

	if _, err := f.reg.SetStatus(f.ctx, sv.ID, registry.StatusUpdate{Status: registry.StatusError, Error: huge}); err != nil {
		t.Fatalf("set status: %v", err)
	}
	short("last_error", f.strings(`SELECT last_error FROM mcp_servers WHERE id = $1`, sv.ID)[0])
	evs := f.eventPayloads("server.status")
	if len(evs) == 0 {
		t.Fatal("no server.status event")
	}
	short("server.status event", evs[len(evs)-1]["last_error"].(string))

	if err := f.reg.RecordHealth(f.ctx, sv.ID, false, 0, huge); err != nil {
		t.Fatalf("record health: %v", err)
	}
	short("server_health.error", f.strings(`SELECT error FROM server_health WHERE server_id = $1`, sv.ID)[0])

	d := registry.Discovery{Trigger: "manual", StartedAt: time.Now()}
	if _, err := f.reg.RecordDiscoveryFailure(f.ctx, sv.ID, d, errors.New(huge)); err != nil {
		t.Fatalf("record discovery failure: %v", err)
	}
	short("discovery_runs.error", f.strings(`SELECT error FROM discovery_runs WHERE server_id = $1`, sv.ID)[0])
	evs = f.eventPayloads("discovery.failed")
	if len(evs) != 1 {
		t.Fatalf("got %d discovery.failed events, want 1", len(evs))
	}
	short("discovery.failed event", evs[0]["error"].(string))
}

// A discovery listed with settings the server no longer has (its URL changed while the
// list was fetched) must not store that list as the server's tools.
func TestApplyDiscoverySupersededBySettingsChange(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sv := f.create(httpSpec("moving"))
	before := f.connection(sv.ID)

	// A change that is not of the connection does not make a running discovery stale.
	f.update(sv.ID, registry.Patch{Description: ptr("still the same endpoint")})
	d := discovery("manual", tool("echo", "Echoes a message", map[string]string{"message": strProp}, "message"))
	d.Fingerprint = before.Fingerprint
	if res := f.discover(sv.ID, d); res.Added != 1 {
		t.Fatalf("discovery with current settings: got added %d, want 1", res.Added)
	}

	f.update(sv.ID, registry.Patch{URL: ptr("http://127.0.0.1:3002/mcp"), Headers: map[string]*string{"X-Trace": ptr("1")}})
	d = discovery("manual", tool("echo", "Echoes a message", map[string]string{"message": strProp}, "message"),
		tool("wipe", "Deletes everything on server A", nil))
	d.Fingerprint = before.Fingerprint
	_, err := f.reg.ApplyDiscovery(f.ctx, sv.ID, d)
	if !errors.Is(err, registry.ErrDiscoverySuperseded) {
		t.Fatalf("stale discovery: got error %v, want ErrDiscoverySuperseded", err)
	}
	if n := f.count(`SELECT count(*) FROM mcp_tools WHERE server_id = $1`, sv.ID); n != 1 {
		t.Fatalf("got %d tools after the stale discovery, want the 1 from before", n)
	}
	runs, err := f.reg.DiscoveryRuns(f.ctx, sv.ID, 1)
	if err != nil || len(runs) != 1 || runs[0].Status != "failed" || runs[0].Error == nil ||
		!strings.Contains(*runs[0].Error, "settings changed during the discovery") {
		t.Fatalf("got runs %+v (%v), want the newest failed as superseded", runs, err)
	}

	// The list fetched with the new settings is stored.
	d.Fingerprint = f.connection(sv.ID).Fingerprint
	if res := f.discover(sv.ID, d); res.Added != 1 {
		t.Fatalf("discovery with the new settings: got added %d, want 1", res.Added)
	}
}
