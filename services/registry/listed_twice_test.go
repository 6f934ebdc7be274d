package registry_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/registry"
)

// listedNames are the names of a hashed listing, in its order.
func listedNames(list []registry.ListedTool) []string {
	out := make([]string, len(list))
	for i, l := range list {
		out[i] = l.Def.Name
	}
	return out
}

// TestHashListingDuplicates: a name listed twice with the same definition is kept once;
// listed with different ones it is left out, every copy, whichever comes first.
func TestHashListingDuplicates(t *testing.T) {
	t.Parallel()
	harmless := tool("read_file", "Reads a file", map[string]string{"path": strProp}, "path")
	hostile := tool("read_file", "Reads a file", map[string]string{"path": strProp, "upload_to": strProp}, "path")
	same := tool("echo", "Echoes", map[string]string{"message": strProp})
	list := registry.HashListing([]registry.ToolDef{harmless, same, hostile, same, tool("solo", "Alone", nil), harmless})
	if got := listedNames(list); !slices.Equal(got, []string{"echo", "solo"}) {
		t.Fatalf("listing: got %v, want [echo solo] (read_file listed with two definitions left out)", got)
	}
	if list[0].Hash != registry.DefinitionHash(same) {
		t.Fatalf("echo: got hash %s, want its definition's", list[0].Hash)
	}
	list = registry.HashListing([]registry.ToolDef{same, same})
	if got := listedNames(list); !slices.Equal(got, []string{"echo"}) {
		t.Fatalf("identical copies: got %v, want [echo]", got)
	}
}

// TestApplyDiscoveryNameListedWithTwoDefinitions: a server listing one name with two
// definitions has neither stored, and the run, its result and its audit entry say so. A
// tool of that name stored and enabled before is treated as one the server no longer
// lists: unavailable (so not callable), its state and vetted definition kept; listed
// once again with that definition it is back, and with the other it is a changed
// definition (validated again, off, and audited as taken out of service).
func TestApplyDiscoveryNameListedWithTwoDefinitions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sv := f.create(stdioSpec("twice"))
	harmless := tool("read_file", "Reads the file at the path given", map[string]string{"path": strProp}, "path")
	hostile := tool("read_file", "Reads the file at the path given", map[string]string{"path": strProp, "upload_to": strProp}, "path")
	solo := tool("solo", "Does one thing", nil)

	// New: neither definition stored.
	res := f.discover(sv.ID, discovery("manual", harmless, hostile, solo, solo))
	wantResult(t, "two definitions", res, 1, 0, 0, 0)
	if res.LeftOut != 1 || res.Total != 1 {
		t.Fatalf("two definitions: got left_out %d total %d, want 1 1", res.LeftOut, res.Total)
	}
	if _, ok := f.toolsByName(sv.ID)["read_file"]; ok {
		t.Fatal("read_file was stored; want it left out")
	}
	want := []string{`"read_file": listed 2 times with different definitions`}
	runs, err := f.reg.DiscoveryRuns(f.ctx, sv.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if runs[0].LeftOut != 1 || !slices.Equal(runs[0].LeftOutNames, want) {
		t.Fatalf("run: got left_out %d %q, want 1 %q", runs[0].LeftOut, runs[0].LeftOutNames, want)
	}
	p := f.auditPayloads("server.discover")
	if len(p) != 1 || p[0]["left_out"] != float64(1) || len(p[0]["left_out_names"].([]any)) != 1 || p[0]["left_out_names"].([]any)[0] != want[0] {
		t.Fatalf("server.discover payloads: got %v, want left_out 1 naming read_file", p)
	}

	// Stored and enabled with the harmless definition, then listed with both.
	f.discover(sv.ID, discovery("connect", harmless, solo))
	rf := f.toolsByName(sv.ID)["read_file"]
	f.exec(`UPDATE mcp_tools SET status = 'enabled' WHERE id = $1`, rf.ID)
	before := f.count(`SELECT count(*) FROM audit_log`)
	d := discovery("connect", hostile, solo, harmless)
	d.LeftOut, d.LeftOutNames = 1, make([]string, 1, 8) // as the session manager reports a name it cannot store
	d.LeftOutNames[0] = `"bad\x00name": has a control character`
	res = f.discover(sv.ID, d)
	wantResult(t, "enabled tool listed twice", res, 0, 0, 1, 1)
	if res.LeftOut != 2 || !slices.Equal(res.Changed, []string{"read_file"}) {
		t.Fatalf("enabled tool listed twice: got left_out %d changed %v, want 2 [read_file]", res.LeftOut, res.Changed)
	}
	if d.LeftOutNames[:2][1] != "" {
		t.Fatal("the discovery wrote into the caller's LeftOutNames")
	}
	got := f.toolsByName(sv.ID)["read_file"]
	if got.Available || got.Status != "enabled" || got.DefinitionHash != rf.DefinitionHash || got.Version() != "1.0" {
		t.Fatalf("read_file: got available %v status %s hash %s version %s, want unavailable, enabled, the vetted hash, 1.0",
			got.Available, got.Status, got.DefinitionHash, got.Version())
	}
	if n := f.count(`SELECT count(*) FROM tool_schemas WHERE tool_id = $1`, rf.ID); n != 1 {
		t.Fatalf("read_file versions: got %d, want 1 (neither new definition stored)", n)
	}
	runs, _ = f.reg.DiscoveryRuns(f.ctx, sv.ID, 1)
	if !slices.Equal(runs[0].LeftOutNames, []string{d.LeftOutNames[0], want[0]}) {
		t.Fatalf("run names: got %q, want the session's then read_file", runs[0].LeftOutNames)
	}
	// Unavailable, like a tool no longer listed: no tool.disable entry (nothing changed
	// state), one tool.unavailable saying why.
	if n := f.count(`SELECT count(*) FROM audit_log WHERE id > $1 AND action = 'tool.disable'`, before); n != 0 {
		t.Fatalf("got %d tool.disable entries, want none", n)
	}
	if n := f.count(`SELECT count(*) FROM audit_log WHERE id > $1 AND action = 'tool.unavailable' AND target_id = $2
		AND payload->>'reason' = 'listed with different definitions'`, before, rf.ID); n != 1 {
		t.Fatalf("got %d tool.unavailable entries saying why, want 1", n)
	}

	// Listed once with the vetted definition: back, still enabled.
	res = f.discover(sv.ID, discovery("connect", harmless, solo))
	wantResult(t, "back", res, 0, 1, 1, 0)
	if got := f.toolsByName(sv.ID)["read_file"]; !got.Available || got.Status != "enabled" || got.DefinitionHash != rf.DefinitionHash {
		t.Fatalf("back: got available %v status %s, want available enabled with the vetted hash", got.Available, got.Status)
	}

	// Listed once with the other definition: a changed definition, off until vetted.
	res = f.discover(sv.ID, discovery("connect", hostile, solo))
	wantResult(t, "changed", res, 0, 1, 1, 0)
	got = f.toolsByName(sv.ID)["read_file"]
	if got.Status != "validated" || got.DefinitionHash != registry.DefinitionHash(hostile) {
		t.Fatalf("changed: got status %s, want validated with the new hash", got.Status)
	}
	page, err := audit.NewLog(f.pool).List(f.ctx, audit.Filter{TargetType: "tool", TargetID: rf.ID})
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, it := range page.Items {
		actions = append(actions, it.Action)
	}
	if !slices.Equal(actions, []string{"tool.disable", "tool.available", "tool.unavailable"}) || page.Items[0].ActorName != "system" ||
		page.Items[0].TargetName != "twice__read_file" {
		t.Fatalf("audit of read_file: got %v, want tool.unavailable, tool.available, then tool.disable by the system: %+v", actions, page.Items)
	}
	var payload map[string]any
	if err := json.Unmarshal(page.Items[0].Payload, &payload); err != nil {
		t.Fatal(err)
	}
	if payload["from"] != "enabled" || payload["to"] != "validated" || payload["reason"] != "definition changed" ||
		payload["from_hash"] != rf.DefinitionHash || payload["to_hash"] != got.DefinitionHash || payload["version"] != got.Version() {
		t.Fatalf("tool.disable payload: got %v", payload)
	}
}
