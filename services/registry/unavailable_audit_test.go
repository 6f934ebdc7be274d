package registry_test

import (
	"testing"
)

// TestEnabledToolNoLongerListedIsAudited: an enabled tool its server stops listing can
// no longer be called, though its state stays enabled: it gets an audit entry of its own
// (tool.unavailable by the system, saying why), and tool.available when it is listed
// again; a tool that was not enabled gets neither (nothing callable changed).
func TestEnabledToolNoLongerListedIsAudited(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sv := f.create(stdioSpec("shrinks"))
	keep := tool("keep", "Keeps things as they are", nil)
	on := tool("on", "Does a thing that was enabled", nil)
	off := tool("off", "Does a thing never enabled", nil)
	f.discover(sv.ID, discovery("connect", keep, on, off))
	ids := f.toolsByName(sv.ID)
	f.exec(`UPDATE mcp_tools SET status = 'enabled' WHERE id = $1`, ids["on"].ID)
	entries := func(id, action, reason string) int {
		return f.count(`SELECT count(*) FROM audit_log WHERE target_type = 'tool' AND target_id = $1 AND action = $2
			AND actor_kind = 'system' AND payload->>'reason' = $3 AND payload->>'state' = 'enabled'`, id, action, reason)
	}

	f.discover(sv.ID, discovery("connect", keep))
	if n := entries(ids["on"].ID, "tool.unavailable", "no longer listed"); n != 1 {
		t.Errorf("the enabled tool gone: %d tool.unavailable entries, want 1", n)
	}
	if n := f.count(`SELECT count(*) FROM audit_log WHERE target_id = $1`, ids["off"].ID); n != 0 {
		t.Errorf("the tool never enabled: %d audit entries, want none", n)
	}

	f.discover(sv.ID, discovery("connect", keep, on, off))
	if n := entries(ids["on"].ID, "tool.available", "listed again"); n != 1 {
		t.Errorf("the enabled tool back: %d tool.available entries, want 1", n)
	}
	if n := f.count(`SELECT count(*) FROM audit_log WHERE target_id = $1`, ids["off"].ID); n != 0 {
		t.Errorf("the tool never enabled, back: %d audit entries, want none", n)
	}
}

// TestUnavailableToolBackChangedAndReenabled: an enabled tool its server stopped listing,
// listed again with a changed definition that its server's auto-enable policy enables at
// once, is callable again: tool.available says so (it would otherwise stay unavailable
// for an auditor following it).
func TestUnavailableToolBackChangedAndReenabled(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sp := stdioSpec("flaky")
	sp.AutoEnable = true
	sv := f.create(sp)
	keep := tool("keep", "Keeps things as they are", nil)
	on := tool("on", "Does a thing that was enabled", nil)
	f.discover(sv.ID, discovery("connect", keep, on))
	id := f.toolsByName(sv.ID)["on"].ID
	if st := f.toolsByName(sv.ID)["on"].Status; st != "enabled" {
		t.Fatalf("on: %s, want enabled by the server's policy", st)
	}
	f.discover(sv.ID, discovery("connect", keep))
	changed := tool("on", "Does a thing that was enabled, now in pages", nil)
	f.discover(sv.ID, discovery("connect", keep, changed))
	if got := f.toolsByName(sv.ID)["on"]; !got.Available || got.Status != "enabled" {
		t.Fatalf("on, back changed: available %v %s, want available and enabled again by policy", got.Available, got.Status)
	}
	if n := f.count(`SELECT count(*) FROM audit_log WHERE target_type = 'tool' AND target_id = $1 AND action = 'tool.available'
		AND actor_kind = 'system' AND payload->>'reason' LIKE 'listed again with a changed definition%'`, id); n != 1 {
		t.Errorf("on, back changed and enabled: %d tool.available entries, want 1", n)
	}
}
