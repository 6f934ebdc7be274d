package tools_test

import (
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/tools"
)

// A bulk enable tied to the definitions the person saw refuses, for each tool whose
// definition changed since, the enable (stale_definition, nothing written for it) and
// moves the others; a tool it names no hash for, or "" for, is not checked.
func TestSetEnabledSeenEachDefinition(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	changed, same, unpinned := f.toolIn("wipe", "validated"), f.toolIn("read", "validated"), f.toolIn("list", "validated")
	seenChanged, seenSame := f.get(changed).DefinitionHash, f.get(same).DefinitionHash
	// Rediscovery changed one definition (a new parameter) after the list was opened.
	f.exec(`UPDATE mcp_tools SET definition_hash = 'hash-wipe-2', description = 'Wipes, with delete_all.' WHERE id = $1`, changed)

	// The ids as a client may spell them (upper case) still find their hashes.
	out, err := f.svc.SetEnabledSeenEach(f.ctx, alice, []string{strings.ToUpper(changed), same, unpinned}, true, "", false,
		map[string]string{strings.ToUpper(changed): seenChanged, same: seenSame, unpinned: ""})
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]tools.Outcome{}
	for _, o := range out {
		by[o.ID] = o
	}
	o := by[changed]
	if fe, _ := fault.As(o.Err()); fe == nil || fe.Code != tools.CodeStaleDefinition || o.Code != tools.CodeStaleDefinition ||
		!strings.Contains(o.Error, "changed since you opened it") {
		t.Errorf("the changed tool: outcome %+v, want refused as stale_definition", o)
	}
	if s := f.status(changed); s != "validated" ||
		f.count(`SELECT count(*) FROM audit_log WHERE action = 'tool.enable' AND target_id = $1`, changed) != 0 {
		t.Errorf("the refused enable changed the tool: %s", s)
	}
	for _, id := range []string{same, unpinned} {
		if by[id].Err() != nil || by[id].Code != "" || f.status(id) != "enabled" {
			t.Errorf("%s: outcome %+v, status %s; want enabled", id, by[id], f.status(id))
		}
	}

	// The list page sends the start of a hash: SeenPrefix characters stand for it, fewer
	// do not.
	full := strings.Repeat("0123456789abcdef", 4)
	f.exec(`UPDATE mcp_tools SET definition_hash = $2, status = 'validated' WHERE id = $1`, changed, full)
	out, err = f.svc.SetEnabledSeenEach(f.ctx, alice, []string{changed}, true, "", false, map[string]string{changed: full[:tools.SeenPrefix-1]})
	if err != nil || out[0].Code != tools.CodeStaleDefinition || f.status(changed) != "validated" {
		t.Fatalf("enable with %d characters of the hash: %+v, %v; want refused", tools.SeenPrefix-1, out, err)
	}
	out, err = f.svc.SetEnabledSeenEach(f.ctx, alice, []string{changed}, true, "", false, map[string]string{changed: full[:tools.SeenPrefix]})
	if err != nil || out[0].Err() != nil || f.status(changed) != "enabled" {
		t.Fatalf("enable with the hash's first %d characters: %+v, %v; want enabled", tools.SeenPrefix, out, err)
	}

	// A bulk disable is never refused for an old hash.
	out, err = f.svc.SetEnabledSeenEach(f.ctx, alice, []string{same}, false, "", false, map[string]string{same: "old"})
	if err != nil || out[0].Err() != nil || f.status(same) != "disabled" {
		t.Fatalf("disable with an old hash: %+v, %v; status %s", out, err, f.status(same))
	}
}
