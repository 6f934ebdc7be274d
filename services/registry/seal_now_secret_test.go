package registry_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/tools"
)

// A setting saved in clear before the server's new definition marked its parameter
// secret (writeOnly) is encrypted by the discovery that stores the definition, in the
// current configuration and every past version, audited by the system; calls still get
// the value, and settings of parameters that stay plain stay in clear.
func TestDiscoverySealsSettingsOfNowSecretParams(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sv := f.create(stdioSpec("seal-now-secret"))
	f.discover(sv.ID, discovery("connect", tool("work", "Works", map[string]string{"memo": strProp, "note": strProp})))
	id := f.strings(`SELECT id::text FROM mcp_tools WHERE server_id = $1 AND name = 'work'`, sv.ID)[0]
	ts := tools.New(f.pool, f.keys, nil)
	fixed := func(v string) tools.ParamInput {
		return tools.ParamInput{Mode: tools.ModeFixed, Value: json.RawMessage(v)}
	}
	if _, err := ts.Update(f.ctx, audit.System, id, tools.Patch{Reason: "plain settings",
		Params: map[string]tools.ParamInput{"memo": fixed(`"red-9"`), "note": fixed(`"visible"`)}}); err != nil {
		t.Fatal(err)
	}
	timeout := 5000
	if _, err := ts.Update(f.ctx, audit.System, id, tools.Patch{Reason: "a timeout", TimeoutMS: &timeout}); err != nil {
		t.Fatal(err)
	}
	clearRows := func() int {
		return f.count(`SELECT (SELECT count(*) FROM mcp_tools WHERE id = $1 AND configuration::text LIKE '%red-9%')
			+ (SELECT count(*) FROM tool_configurations WHERE tool_id = $1 AND configuration::text LIKE '%red-9%')`, id)
	}
	if n := clearRows(); n != 3 {
		t.Fatalf("the set-up wants memo in clear in the tool and its two versions: %d rows", n)
	}

	res := f.discover(sv.ID, discovery("list_changed", tool("work", "Works", map[string]string{
		"memo": `{"type":"string","writeOnly":true}`, "note": strProp})))
	wantResult(t, "the new definition", res, 0, 1, 0, 0)
	if n := clearRows(); n != 0 {
		t.Errorf("memo, now secret, is still in clear in %d rows (the tool's and its versions')", n)
	}
	if n := f.count(`SELECT count(*) FROM mcp_tools WHERE id = $1 AND configuration::text LIKE '%visible%'`, id); n != 1 {
		t.Error("note, still plain, is no longer stored in clear")
	}
	c, err := ts.Configuration(f.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ts.Resolve(id, c)
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Fixed["memo"]) != `"red-9"` || !r.Secret["memo"] || r.Secret["note"] {
		t.Errorf("a call gets memo %s (secret %v), note secret %v; want red-9, secret, and note plain", r.Fixed["memo"], r.Secret["memo"], r.Secret["note"])
	}
	sealed := f.strings(`SELECT payload->>'sealed' FROM audit_log WHERE action = 'tool.configure' AND actor_kind = 'system'
		AND target_id = $1 AND payload->>'sealed' IS NOT NULL`, id)
	if len(sealed) != 1 || !strings.Contains(sealed[0], `"memo"`) || strings.Contains(sealed[0], "note") {
		t.Errorf("the sealing's audit entries: %q, want one naming memo alone", sealed)
	}
	// A later discovery of the same definition seals nothing more.
	f.discover(sv.ID, discovery("list_changed", tool("work", "Works again", map[string]string{
		"memo": `{"type":"string","writeOnly":true}`, "note": strProp})))
	if n := f.count(`SELECT count(*) FROM audit_log WHERE action = 'tool.configure' AND payload->>'sealed' IS NOT NULL`); n != 1 {
		t.Errorf("%d sealing entries after a second change, want still 1", n)
	}
}

// A value left in clear only in past versions (the setting was cleared since) is sealed
// there too by the discovery that marks its parameter secret: the tool is chosen by
// what any of its configurations holds, not only the current one.
func TestDiscoverySealsNowSecretValuesOfPastVersions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sv := f.create(stdioSpec("seal-past"))
	f.discover(sv.ID, discovery("connect", tool("work", "Works", map[string]string{"memo": strProp})))
	id := f.strings(`SELECT id::text FROM mcp_tools WHERE server_id = $1 AND name = 'work'`, sv.ID)[0]
	ts := tools.New(f.pool, f.keys, nil)
	if _, err := ts.Update(f.ctx, audit.System, id, tools.Patch{Reason: "plain",
		Params: map[string]tools.ParamInput{"memo": {Mode: tools.ModeFixed, Value: json.RawMessage(`"red-9"`)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.Update(f.ctx, audit.System, id, tools.Patch{Reason: "cleared", Params: map[string]tools.ParamInput{}}); err != nil {
		t.Fatal(err)
	}
	if n := f.count(`SELECT count(*) FROM tool_configurations WHERE tool_id = $1 AND configuration::text LIKE '%red-9%'`, id); n != 1 {
		t.Fatalf("the set-up wants memo in clear in one past version: %d", n)
	}
	f.discover(sv.ID, discovery("list_changed", tool("work", "Works", map[string]string{"memo": `{"type":"string","format":"password"}`})))
	if n := f.count(`SELECT count(*) FROM tool_configurations WHERE tool_id = $1 AND configuration::text LIKE '%red-9%'`, id); n != 0 {
		t.Errorf("memo, now secret, is still in clear in %d past versions", n)
	}
	if n := f.count(`SELECT count(*) FROM audit_log WHERE action = 'tool.configure' AND target_id = $1 AND payload->>'sealed' IS NOT NULL`, id); n != 1 {
		t.Errorf("%d sealing entries, want 1", n)
	}
}
