package registry_test

import (
	"testing"

	"github.com/toolwarden/toolwarden/services/audit"
)

// Deleting a server, directly or by an import that prunes it, removes (ON DELETE
// CASCADE) the compensations of other servers' tools that its tools undo: each is
// audited as a removed tool.compensation, naming the undo tool that went. A
// compensation of the server's own tools goes with its tool, unaudited as such.
func TestDeleteServerAuditsRemovedCompensations(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a, b, c := f.create(stdioSpec("a")), f.create(stdioSpec("b")), f.create(stdioSpec("c"))
	for _, sv := range []string{a.ID, b.ID, c.ID} {
		f.discover(sv, discovery("connect", threeTools()...))
	}
	at, bt, ct := f.toolsByName(a.ID), f.toolsByName(b.ID), f.toolsByName(c.ID)
	f.exec(`INSERT INTO tool_compensations (tool_id, undo_tool_id, argument_map) VALUES
		($1, $2, '{"message":{"from":"/message"}}'), ($3, $4, '{}'), ($5, $6, '{}')`,
		at["echo"].ID, bt["add"].ID, bt["echo"].ID, bt["add"].ID, at["add"].ID, ct["ping"].ID)
	check := func(because, toolID, tool, undo string) {
		t.Helper()
		n := f.count(`SELECT count(*) FROM audit_log WHERE action = 'tool.compensation' AND target_type = 'tool'
			AND target_id = $1 AND target_name = $2 AND payload->>'removed_undo_tool' = $3 AND payload->>'because' = $4
			AND payload->>'undo_tool_id' = ''`, toolID, tool, undo, because)
		if n != 1 {
			t.Errorf("%s: %d tool.compensation rows for %s removing its undo %s, want 1; rows: %v", because, n, tool, undo,
				f.auditPayloads("tool.compensation"))
		}
	}

	if err := f.reg.DeleteServer(f.ctx, audit.System, b.ID); err != nil {
		t.Fatal(err)
	}
	check("server.delete", at["echo"].ID, "a__echo", "b__add")
	if n := len(f.auditPayloads("tool.compensation")); n != 1 {
		t.Errorf("after deleting b: %d tool.compensation rows, want 1 (b__echo's own went with it)", n)
	}
	if del := f.auditPayloads("server.delete"); len(del) != 1 || del[0]["compensations_removed"] != float64(1) {
		t.Errorf("server.delete rows %v, want one with compensations_removed 1", del)
	}

	plan := f.plan("servers.yaml", `version: 1
servers:
  - name: a
    type: stdio
    description: local files
    command: npx
    args: [-y, '@example/server']
    env:
      API_KEY: null
    enabled: true
`, true)
	if len(plan.Errors) > 0 {
		t.Fatalf("plan:\n%s", plan)
	}
	res, err := f.reg.ApplyImport(f.ctx, audit.System, plan)
	if err != nil || len(res.Deleted) != 1 {
		t.Fatalf("import: %+v, %v; want c deleted", res, err)
	}
	check("server.import.delete", at["add"].ID, "a__add", "c__ping")
	if del := f.auditPayloads("server.import.delete"); len(del) != 1 || del[0]["compensations_removed"] != float64(1) {
		t.Errorf("server.import.delete rows %v, want one with compensations_removed 1", del)
	}
	if n := f.count(`SELECT count(*) FROM tool_compensations`); n != 0 {
		t.Errorf("%d compensations left, want 0", n)
	}
}
