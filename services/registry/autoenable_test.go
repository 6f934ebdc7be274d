package registry_test

import (
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/toolstate"
)

// TestAutoEnableSetting: the per-server auto-enable policy is stored on create, changed
// by a patch, kept by a patch that does not mention it, and recorded in the audit log.
func TestAutoEnableSetting(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sp := stdioSpec("auto-on")
	sp.AutoEnable = true
	sv := f.create(sp)
	if !sv.AutoEnable {
		t.Fatalf("create with AutoEnable: got auto_enable false, want true")
	}
	if got, err := f.reg.GetServer(f.ctx, sv.ID); err != nil || !got.AutoEnable {
		t.Fatalf("get after create: got auto_enable %v (err %v), want true", got.AutoEnable, err)
	}
	if off := f.create(stdioSpec("auto-default")); off.AutoEnable {
		t.Fatalf("create without AutoEnable: got auto_enable true, want false (the default)")
	}
	created := f.auditPayloads("server.create")
	if len(created) != 2 || created[0]["auto_enable"] != true || created[1]["auto_enable"] != false {
		t.Fatalf("server.create audit payloads: got %v, want auto_enable true then false", created)
	}

	if got := f.update(sv.ID, registry.Patch{Description: ptr("other words")}); !got.AutoEnable {
		t.Fatalf("patch without AutoEnable: got auto_enable false, want it kept true")
	}
	got := f.update(sv.ID, registry.Patch{AutoEnable: ptr(false)})
	if got.AutoEnable {
		t.Fatalf("patch AutoEnable false: got true")
	}
	if n := f.count(`SELECT count(*) FROM mcp_servers WHERE id = $1 AND NOT auto_enable`, sv.ID); n != 1 {
		t.Fatalf("stored auto_enable after patch: got %d rows with false, want 1", n)
	}
	updates := f.auditPayloads("server.update")
	if len(updates) != 2 {
		t.Fatalf("server.update audit entries: got %d, want 2", len(updates))
	}
	if ch, _ := updates[0]["changes"].(map[string]any); ch["auto_enable"] != nil {
		t.Errorf("description patch: audit changes %v name auto_enable, want not", ch)
	}
	ch, _ := updates[1]["changes"].(map[string]any)
	want := map[string]any{"from": true, "to": false}
	if c, _ := ch["auto_enable"].(map[string]any); c == nil || c["from"] != want["from"] || c["to"] != want["to"] {
		t.Fatalf("auto_enable patch: audit changes %v, want auto_enable %v", ch, want)
	}
	// The policy does not change how the server is connected.
	before := f.connection(sv.ID).Fingerprint
	f.update(sv.ID, registry.Patch{AutoEnable: ptr(true)})
	if after := f.connection(sv.ID).Fingerprint; after != before {
		t.Fatalf("auto_enable patch changed the connection fingerprint")
	}
}

// TestAutoEnablePolicy: tools of a server with auto-enable on that pass validation end
// enabled; with it off they wait, validated. Turning it on is not retroactive.
func TestAutoEnablePolicy(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sp := stdioSpec("auto-tools")
	sp.AutoEnable = true
	on := f.create(sp)
	off := f.create(stdioSpec("manual-tools"))
	def := tool("read_file", "Reads a file.", map[string]string{"path": `{"type":"string","description":"The path."}`}, "path")
	f.discover(on.ID, discovery("connect", def))
	f.discover(off.ID, discovery("connect", def))
	if got := f.toolsByName(on.ID)["read_file"].Status; got != toolstate.Enabled {
		t.Fatalf("auto-enable on: got status %q, want %q", got, toolstate.Enabled)
	}
	if got := f.toolsByName(off.ID)["read_file"].Status; got != toolstate.Validated {
		t.Fatalf("auto-enable off: got status %q, want %q", got, toolstate.Validated)
	}
	reasons := f.strings(`SELECT h.reason FROM tool_state_history h JOIN mcp_tools t ON t.id = h.tool_id
		WHERE t.server_id = $1 AND h.to_status = 'enabled'`, on.ID)
	if len(reasons) != 1 || !strings.Contains(reasons[0], "server auto-tools") {
		t.Fatalf("history of the auto-enabled tool: got reasons %q, want one naming server auto-tools", reasons)
	}

	// Turning the policy on later leaves the waiting tool as it is.
	f.update(off.ID, registry.Patch{AutoEnable: ptr(true)})
	if got := f.toolsByName(off.ID)["read_file"].Status; got != toolstate.Validated {
		t.Fatalf("after turning auto-enable on: got status %q, want it still %q", got, toolstate.Validated)
	}
}

// TestAutoEnableConfig: export writes auto_enable only when it is on, import reads it,
// and an import plan shows the change.
func TestAutoEnableConfig(t *testing.T) {
	t.Parallel()
	src := newFixture(t)
	sp := httpSpec("auto-http")
	sp.Headers, sp.AutoEnable = nil, true
	src.create(sp)
	manual := httpSpec("manual-http")
	manual.Headers = nil
	src.create(manual)
	out := src.export()
	if n := strings.Count(out, "auto_enable"); n != 1 || !strings.Contains(out, "    trusted: false\n    auto_enable: true\n") {
		t.Fatalf("export: got\n%s\nwant auto_enable: true once, after trusted, and nothing for manual-http", out)
	}

	// Round trip into the same database: nothing changes.
	plan := src.plan("servers.yaml", out, true)
	if plan.HasErrors() || plan.Count(registry.PlanUnchanged) != 2 {
		t.Fatalf("round trip: got\n%s\nwant 2 unchanged", plan)
	}

	// Into a fresh database: the policy comes along.
	dst := newFixture(t)
	plan = dst.plan("servers.yaml", out, false)
	if plan.HasErrors() || plan.Count(registry.PlanCreate) != 2 {
		t.Fatalf("import into a fresh database: got\n%s\nwant 2 creates", plan)
	}
	if text := plan.String(); !strings.Contains(text, "auto_enable: true") {
		t.Errorf("create plan: got\n%s\nwant it to show auto_enable: true", text)
	}
	if _, err := dst.reg.ApplyImport(dst.ctx, audit.System, plan); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"auto-http": true, "manual-http": false} {
		sv, err := dst.reg.GetServerByName(dst.ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if sv.AutoEnable != want {
			t.Errorf("imported %s: got auto_enable %v, want %v", name, sv.AutoEnable, want)
		}
	}
	if got := dst.export(); got != out {
		t.Fatalf("export after import differs:\n%s\n---\n%s", got, out)
	}

	// A file that turns the policy off (by leaving it out) and on is a planned change.
	edited := strings.Replace(out, "    auto_enable: true\n", "", 1)
	edited = strings.Replace(edited, "name: manual-http\n", "name: manual-http\n    auto_enable: true\n", 1)
	plan = dst.plan("servers.yaml", edited, false)
	if plan.HasErrors() {
		t.Fatalf("edited plan: unexpected errors %v", plan.Errors)
	}
	changes := map[string][]string{}
	for _, it := range plan.Items {
		if it.Action != registry.PlanUpdate {
			t.Errorf("edited plan: %s: got %s, want update", it.Name, it.Action)
		}
		for _, c := range it.Changes {
			changes[it.Name] = append(changes[it.Name], c.String())
		}
	}
	if got := strings.Join(changes["auto-http"], "; "); got != "auto_enable: true → false" {
		t.Errorf("auto-http changes: got %q, want %q", got, "auto_enable: true → false")
	}
	if got := strings.Join(changes["manual-http"], "; "); got != "auto_enable: false → true" {
		t.Errorf("manual-http changes: got %q, want %q", got, "auto_enable: false → true")
	}
	if _, err := dst.reg.ApplyImport(dst.ctx, audit.System, plan); err != nil {
		t.Fatal(err)
	}
	if sv, _ := dst.reg.GetServerByName(dst.ctx, "manual-http"); !sv.AutoEnable {
		t.Errorf("after import: manual-http auto_enable false, want true")
	}
	if sv, _ := dst.reg.GetServerByName(dst.ctx, "auto-http"); sv.AutoEnable {
		t.Errorf("after import: auto-http auto_enable true, want false")
	}
}
