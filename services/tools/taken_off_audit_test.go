package tools_test

import (
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/toolstate"
)

// relistChanged is a changed definition of tool name (stored by f.tool with hash
// "hash-<name>"), read in state was, as discovery hands it to StoreDiscovery.
func relistChanged(id, name, was, schema string) tools.Relisted {
	in := json.RawMessage(schema)
	desc := "Reads the file at the path given and returns what it holds, now in pages."
	raw, _ := json.Marshal(map[string]any{"name": name, "description": desc, "inputSchema": in})
	next := toolstate.Updating
	if was == toolstate.Discovered {
		next = toolstate.Discovered
	}
	return tools.Relisted{ID: id, Name: name, VersionMajor: 2, VersionMinor: 0, Status: next, Was: was, WasHash: "hash-" + name,
		Definition: &tools.Definition{Description: desc, InputSchema: in, Raw: raw, Hash: "hash-" + name + "-2"}}
}

// TestChangedEnabledToolIsAuditedOff: an enabled tool that a changed definition takes out
// of service gets an audit entry of its own (tool.disable by the system, saying why),
// found by filtering on the tool; a tool listed unchanged, one that was not enabled, and
// one a policy enables again at once get none.
func TestChangedEnabledToolIsAuditedOff(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	srv := f.server("files", false)
	obj := `{"type":"object","properties":{"path":{"type":"string","description":"The file to read"}},"required":["path"]}`
	changed := f.tool(toolSpec{server: srv, name: "read_file", status: "enabled"})
	broken := f.tool(toolSpec{server: srv, name: "stat_file", status: "enabled"})
	unchanged := f.tool(toolSpec{server: srv, name: "list_dir", status: "enabled"})
	notEnabled := f.tool(toolSpec{server: srv, name: "grep", status: "validated"})
	var out []toolstate.Outcome
	err := db.WithTx(f.ctx, f.pool, func(tx pgx.Tx) (err error) {
		out, err = tools.StoreDiscovery(f.ctx, tx, srv, tools.DiscoveryWrite{Actor: "system", Server: "files", Seen: []string{"list_dir"},
			Relisted: []tools.Relisted{
				relistChanged(changed, "read_file", toolstate.Enabled, obj),
				relistChanged(broken, "stat_file", toolstate.Enabled, `{"type":"string"}`),
				relistChanged(notEnabled, "grep", toolstate.Validated, obj),
			}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	final := map[string]string{}
	for _, o := range out {
		final[o.ID] = o.Status
	}
	if final[changed] != toolstate.Validated || final[broken] != toolstate.Invalid {
		t.Fatalf("outcomes: read_file %s stat_file %s, want validated and invalid", final[changed], final[broken])
	}

	l := audit.NewLog(f.pool)
	for _, c := range []struct {
		id, name, to string
	}{{changed, "read_file", toolstate.Validated}, {broken, "stat_file", toolstate.Invalid}} {
		page, err := l.List(f.ctx, audit.Filter{TargetType: "tool", TargetID: c.id})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Items) != 1 {
			t.Fatalf("%s: %d audit entries, want 1: %+v", c.name, len(page.Items), page.Items)
		}
		e := page.Items[0]
		if e.Action != "tool.disable" || e.ActorKind != audit.ActorSystem || e.ActorName != "system" || e.TargetName != "files__"+c.name {
			t.Fatalf("%s: entry %s by %s/%s on %s, want tool.disable by the system on files__%s", c.name, e.Action, e.ActorKind, e.ActorName, e.TargetName, c.name)
		}
		var p map[string]any
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			t.Fatal(err)
		}
		if p["from"] != "enabled" || p["to"] != c.to || p["reason"] != "definition changed" || p["from_hash"] != "hash-"+c.name ||
			p["to_hash"] != "hash-"+c.name+"-2" || p["version"] != "2.0" {
			t.Fatalf("%s: payload %v", c.name, p)
		}
	}
	for _, id := range []string{unchanged, notEnabled} {
		if n := f.count(`SELECT count(*) FROM audit_log WHERE target_type = 'tool' AND target_id = $1`, id); n != 0 {
			t.Fatalf("tool %s: %d audit entries, want none", id, n)
		}
	}
	if res, err := audit.Verify(f.ctx, f.pool); err != nil || !res.OK() {
		t.Fatalf("chain: %+v, %v", res, err)
	}

	// Enabled again at once by its server's policy: it never went out of service.
	auto := f.server("auto", false)
	f.exec(`UPDATE mcp_servers SET auto_enable = true WHERE id = $1`, auto)
	again := f.tool(toolSpec{server: auto, name: "read_file", status: "enabled"})
	err = db.WithTx(f.ctx, f.pool, func(tx pgx.Tx) error {
		_, err := tools.StoreDiscovery(f.ctx, tx, auto, tools.DiscoveryWrite{Actor: "system", Server: "auto",
			Relisted: []tools.Relisted{relistChanged(again, "read_file", toolstate.Enabled, obj)}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if f.status(again) != toolstate.Enabled {
		t.Fatalf("auto: read_file is %s, want enabled again by policy", f.status(again))
	}
	if n := len(f.auditPayloads("tool.disable", again)); n != 0 {
		t.Fatalf("auto: %d tool.disable entries, want none", n)
	}
}
