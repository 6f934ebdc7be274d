package registry_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/tools"
)

var (
	strProp = `{"type":"string"}`
	intProp = `{"type":"integer"}`
)

// threeTools is the first listing of the discovery tests.
func threeTools() []registry.ToolDef {
	return []registry.ToolDef{
		tool("echo", "Echoes a message", map[string]string{"message": strProp}, "message"),
		tool("add", "Adds two numbers", map[string]string{"a": intProp, "b": intProp}, "a", "b"),
		tool("ping", "Pings", nil),
	}
}

// transitions returns a tool's state history oldest first, one "from→to" per row
// ("→discovered" for the first).
func (f *fixture) transitions(toolID string) []string {
	f.t.Helper()
	return f.strings(`SELECT coalesce(from_status, '') || '→' || to_status FROM tool_state_history WHERE tool_id = $1 ORDER BY id`, toolID)
}

// newTool is the history of a tool first listed with a definition that validates.
var newTool = []string{"→discovered", "discovered→validating", "validating→validated"}

// changedTool is what a change of definition appends to the history of a tool that was
// in state from and whose new definition validates.
func changedTool(from string) []string {
	return []string{from + "→updating", "updating→validating", "validating→validated"}
}

func wantResult(t *testing.T, what string, got registry.DiscoveryResult, added, updated, unchanged, removed int) {
	t.Helper()
	if got.Added != added || got.Updated != updated || got.Unchanged != unchanged || got.Removed != removed {
		t.Fatalf("%s: got added %d updated %d unchanged %d removed %d, want %d %d %d %d",
			what, got.Added, got.Updated, got.Unchanged, got.Removed, added, updated, unchanged, removed)
	}
}

func TestApplyDiscoveryFirstAndRepeat(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sv := f.create(stdioSpec("disc"))

	res := f.discover(sv.ID, discovery("connect", threeTools()...))
	wantResult(t, "first run", res, 3, 0, 0, 0)
	if res.Total != 3 || res.RunID == 0 || len(res.Changed) != 3 {
		t.Fatalf("first run: got total %d run %d changed %v, want 3, a run id, 3 names", res.Total, res.RunID, res.Changed)
	}
	// All three have a description (short ones: warnings only), so all validate.
	if res.Validated != 3 || res.Invalid != 0 {
		t.Fatalf("first run: got validated %d invalid %d, want 3 0", res.Validated, res.Invalid)
	}
	tools := f.toolsByName(sv.ID)
	if len(tools) != 3 {
		t.Fatalf("got %d tools, want 3", len(tools))
	}
	for _, def := range threeTools() {
		tl := tools[def.Name]
		if tl.Status != "validated" || tl.Version() != "1.0" || !tl.Available {
			t.Fatalf("%s: got status %q version %s available %v, want validated 1.0 true", def.Name, tl.Status, tl.Version(), tl.Available)
		}
		if tl.DefinitionHash != registry.DefinitionHash(def) || tl.Description != def.Description || tl.Server != "disc" {
			t.Fatalf("%s: got hash %s description %q server %q, want the definition's", def.Name, tl.DefinitionHash, tl.Description, tl.Server)
		}
		if tl.QualifiedName() != "disc__"+def.Name {
			t.Fatalf("qualified name: got %q, want %q", tl.QualifiedName(), "disc__"+def.Name)
		}
		vs, err := f.reg.ToolVersions(f.ctx, tl.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(vs) != 1 || vs[0].VersionMajor != 1 || vs[0].VersionMinor != 0 || vs[0].Breaking || len(vs[0].Changes) != 0 || vs[0].DefinitionHash != tl.DefinitionHash {
			t.Fatalf("%s versions: got %+v, want one 1.0 row with the tool's hash", def.Name, vs)
		}
		hist, err := f.reg.ToolHistory(f.ctx, tl.ID)
		if err != nil {
			t.Fatal(err)
		}
		// Newest first: validating → validated, discovered → validating, NULL → discovered.
		if len(hist) != 3 || hist[2].From != nil || hist[2].To != registry.ToolDiscovered || hist[2].Reason != "discovered by connect discovery" ||
			hist[1].From == nil || *hist[1].From != registry.ToolDiscovered || hist[1].To != "validating" ||
			hist[1].Reason != "validating definition "+tl.DefinitionHash[:12] ||
			hist[0].From == nil || *hist[0].From != "validating" || hist[0].To != "validated" ||
			!strings.Contains(hist[0].Reason, "warning") || strings.Contains(hist[0].Reason, "error") {
			t.Fatalf("%s history: got %+v, want NULL → discovered → validating → validated", def.Name, hist)
		}
		for _, h := range hist {
			if h.Actor != "system" {
				t.Fatalf("%s history: got actor %q on %+v, want system on every row", def.Name, h.Actor, h)
			}
		}
		if got := f.strings(`SELECT definition_hash || '|' || success || '|' || coalesce(worst, '') || '|' || validated_by FROM tool_validations WHERE tool_id = $1`, tl.ID); !slices.Equal(got, []string{tl.DefinitionHash + "|true|warning|system"}) {
			t.Fatalf("%s validations: got %v, want one successful validation of the hash with warnings, by system", def.Name, got)
		}
		if got := f.strings(`SELECT coalesce(validation_worst, '') FROM mcp_tools WHERE id = $1`, tl.ID); !slices.Equal(got, []string{"warning"}) {
			t.Fatalf("%s validation_worst: got %v, want warning", def.Name, got)
		}
	}
	var schema map[string]any
	if err := json.Unmarshal(tools["echo"].InputSchema, &schema); err != nil || schema["type"] != "object" {
		t.Fatalf("input schema: got %s, %v", tools["echo"].InputSchema, err)
	}
	if string(tools["ping"].Annotations) != "" && string(tools["ping"].Annotations) != "null" {
		t.Fatalf("annotations: got %s, want none", tools["ping"].Annotations)
	}

	res2 := f.discover(sv.ID, discovery("connect", threeTools()...))
	wantResult(t, "second run", res2, 0, 0, 3, 0)
	if len(res2.Changed) != 0 {
		t.Fatalf("second run: got changed %v, want none", res2.Changed)
	}
	// Nothing is new, so nothing is validated again.
	if res2.Validated != 0 || res2.Invalid != 0 {
		t.Fatalf("second run: got validated %d invalid %d, want 0 0", res2.Validated, res2.Invalid)
	}
	for table, want := range map[string]int{"mcp_tools": 3, "tool_schemas": 3, "tool_state_history": 9, "tool_validations": 3, "discovery_runs": 2} {
		if n := f.count(`SELECT count(*) FROM ` + table); n != want {
			t.Fatalf("after the second run: got %d %s rows, want %d", n, table, want)
		}
	}
	// Only the first run changed anything, so only it is audited.
	if got := f.auditPayloads("server.discover"); len(got) != 1 || got[0]["added"] != float64(3) || got[0]["trigger"] != "connect" {
		t.Fatalf("server.discover audit: got %v, want one entry with 3 added", got)
	}
	if n := len(f.eventPayloads("discovery.completed")); n != 2 {
		t.Fatalf("got %d discovery.completed events, want 2", n)
	}
	changed := f.eventPayloads("tools.changed")
	if len(changed) != 1 || changed[0]["added"] != float64(3) || changed[0]["server"] != "disc" {
		t.Fatalf("tools.changed events: got %v, want one with 3 added", changed)
	}

	// A manual run is audited even when nothing changed.
	res3 := f.discover(sv.ID, discovery("manual", threeTools()...))
	wantResult(t, "manual run", res3, 0, 0, 3, 0)
	if res3.Validated != 0 || res3.Invalid != 0 {
		t.Fatalf("manual run: got validated %d invalid %d, want 0 0", res3.Validated, res3.Invalid)
	}
	if n := len(f.auditPayloads("server.discover")); n != 2 {
		t.Fatalf("after a manual run: got %d server.discover audit rows, want 2", n)
	}
	if n := len(f.eventPayloads("tools.changed")); n != 1 {
		t.Fatalf("after a manual run: got %d tools.changed events, want 1", n)
	}

	runs, err := f.reg.DiscoveryRuns(f.ctx, sv.ID, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 3 {
		t.Fatalf("got %d runs, want 3", len(runs))
	}
	if r := runs[2]; r.Status != "succeeded" || r.Trigger != "connect" || r.Added != 3 || r.Pages != 1 || r.Actor != "system" || r.Error != nil {
		t.Fatalf("first run row: got %+v", r)
	}
	if r := runs[0]; r.Trigger != "manual" || r.Unchanged != 3 || r.Added != 0 || r.ID != res3.RunID {
		t.Fatalf("manual run row: got %+v, want manual with 3 unchanged and id %d", r, res3.RunID)
	}
}

func TestApplyDiscoveryDefinitionChanges(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	base := tool("t", "Does things", map[string]string{"path": strProp, "depth": intProp}, "path")
	cases := []struct {
		name         string
		next         registry.ToolDef
		wantVersion  string
		wantBreaking bool
		wantKinds    []string
	}{
		{"description", tool("t", "Does other things", map[string]string{"path": strProp, "depth": intProp}, "path"),
			"1.1", false, []string{"description"}},
		{"optional parameter added", tool("t", "Does things", map[string]string{"path": strProp, "depth": intProp, "x": strProp}, "path"),
			"1.1", false, []string{"parameter_added"}},
		{"required parameter made optional", tool("t", "Does things", map[string]string{"path": strProp, "depth": intProp}),
			"1.1", false, []string{"parameter_optional"}},
		{"title", func() registry.ToolDef { d := base; d.Title = "Thing doer"; return d }(),
			"1.1", false, []string{"title"}},
		{"annotations", func() registry.ToolDef { d := base; d.Annotations = json.RawMessage(`{"readOnlyHint":true}`); return d }(),
			"1.1", false, []string{"annotations"}},
		{"output schema", func() registry.ToolDef { d := base; d.OutputSchema = json.RawMessage(`{"type":"object"}`); return d }(),
			"1.1", false, []string{"output_schema"}},
		{"required parameter removed", tool("t", "Does things", map[string]string{"depth": intProp}),
			"2.0", true, []string{"parameter_removed"}},
		{"optional parameter removed", tool("t", "Does things", map[string]string{"path": strProp}, "path"),
			"2.0", true, []string{"parameter_removed"}},
		{"parameter retyped", tool("t", "Does things", map[string]string{"path": strProp, "depth": strProp}, "path"),
			"2.0", true, []string{"parameter_retyped"}},
		{"required parameter added", tool("t", "Does things", map[string]string{"path": strProp, "depth": intProp, "mode": strProp}, "path", "mode"),
			"2.0", true, []string{"parameter_added"}},
		{"existing parameter made required", tool("t", "Does things", map[string]string{"path": strProp, "depth": intProp}, "path", "depth"),
			"2.0", true, []string{"parameter_required"}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sv := f.create(stdioSpec("chg-" + string(rune('a'+i))))
			f.discover(sv.ID, discovery("connect", base, tool("other", "Other", nil)))
			res := f.discover(sv.ID, discovery("list_changed", tc.next, tool("other", "Other", nil)))
			wantResult(t, "change", res, 0, 1, 1, 0)
			if !slices.Equal(res.Changed, []string{"t"}) {
				t.Fatalf("changed: got %v, want [t]", res.Changed)
			}
			// Only the changed tool is validated again; "other" stays validated untouched.
			if res.Validated != 1 || res.Invalid != 0 {
				t.Fatalf("change: got validated %d invalid %d, want 1 0", res.Validated, res.Invalid)
			}
			tl := f.toolsByName(sv.ID)["t"]
			if tl.Version() != tc.wantVersion || tl.Status != "validated" || !tl.Available {
				t.Fatalf("got version %s status %q available %v, want %s validated true", tl.Version(), tl.Status, tl.Available, tc.wantVersion)
			}
			if tl.DefinitionHash != registry.DefinitionHash(tc.next) || tl.Description != tc.next.Description {
				t.Fatalf("got hash %s description %q, want the new definition's", tl.DefinitionHash, tl.Description)
			}
			vs, err := f.reg.ToolVersions(f.ctx, tl.ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(vs) != 2 {
				t.Fatalf("got %d versions, want 2", len(vs))
			}
			newest, oldest := vs[0], vs[1]
			if got := registryVersion(newest); got != tc.wantVersion || newest.Breaking != tc.wantBreaking || newest.DefinitionHash != tl.DefinitionHash {
				t.Fatalf("newest version: got %s breaking %v, want %s %v", got, newest.Breaking, tc.wantVersion, tc.wantBreaking)
			}
			if oldest.DefinitionHash != registry.DefinitionHash(base) || registryVersion(oldest) != "1.0" {
				t.Fatalf("old version: got %s %s, want 1.0 with the old hash kept", registryVersion(oldest), oldest.DefinitionHash)
			}
			var kinds []string
			for _, c := range newest.Changes {
				kinds = append(kinds, c.Kind)
			}
			if !slices.Equal(kinds, tc.wantKinds) {
				t.Fatalf("changes: got %v, want %v", kinds, tc.wantKinds)
			}
			if got, want := f.transitions(tl.ID), append(slices.Clone(newTool), changedTool("validated")...); !slices.Equal(got, want) {
				t.Fatalf("history: got %v, want %v", got, want)
			}
			hist, err := f.reg.ToolHistory(f.ctx, tl.ID)
			if err != nil {
				t.Fatal(err)
			}
			// Newest first: [0] validating → validated, [1] updating → validating, [2] validated → updating.
			upd := hist[2]
			wantReason := "v1.0 → v" + tc.wantVersion
			if !strings.Contains(upd.Reason, wantReason) || strings.Contains(upd.Reason, "breaking") != tc.wantBreaking {
				t.Fatalf("history reason: got %q, want it to mention %q and breaking=%v", upd.Reason, wantReason, tc.wantBreaking)
			}
			var meta struct {
				FromHash string `json:"from_hash"`
				ToHash   string `json:"to_hash"`
			}
			if err := json.Unmarshal(upd.Metadata, &meta); err != nil || meta.FromHash != registry.DefinitionHash(base) || meta.ToHash != tl.DefinitionHash {
				t.Fatalf("history metadata: got %s, %v", upd.Metadata, err)
			}
			if hist[1].Reason != "validating definition "+tl.DefinitionHash[:12] {
				t.Fatalf("validating reason: got %q, want it to name the new hash", hist[1].Reason)
			}
			// One validation per definition, the newest of the new hash.
			if got := f.strings(`SELECT definition_hash || '|' || success FROM tool_validations WHERE tool_id = $1 ORDER BY id`, tl.ID); !slices.Equal(got,
				[]string{registry.DefinitionHash(base) + "|true", tl.DefinitionHash + "|true"}) {
				t.Fatalf("validations: got %v, want one of the old and one of the new hash, both successful", got)
			}
			var breaking bool
			if err := f.pool.QueryRow(f.ctx, `SELECT breaking FROM tool_schemas WHERE tool_id = $1 AND definition_hash = $2`, tl.ID, tl.DefinitionHash).Scan(&breaking); err != nil || breaking != tc.wantBreaking {
				t.Fatalf("tool_schemas.breaking: got %v, %v; want %v", breaking, err, tc.wantBreaking)
			}

			// The same new definition again changes nothing.
			res = f.discover(sv.ID, discovery("connect", tc.next, tool("other", "Other", nil)))
			wantResult(t, "repeat", res, 0, 0, 2, 0)
			if res.Validated != 0 || len(f.transitions(tl.ID)) != 6 {
				t.Fatalf("repeat: got validated %d history %v, want nothing validated or moved", res.Validated, f.transitions(tl.ID))
			}
		})
	}
}

func registryVersion(v registry.ToolVersion) string {
	return tools.Row{VersionMajor: v.VersionMajor, VersionMinor: v.VersionMinor}.Version()
}

// TestApplyDiscoveryVersionSequence follows one tool through several changes.
func TestApplyDiscoveryVersionSequence(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sv := f.create(stdioSpec("seq"))
	steps := []struct {
		def         registry.ToolDef
		wantVersion string
		wantHistory int // rows of tool_state_history
	}{
		{tool("t", "v1", map[string]string{"a": strProp}), "1.0", 3},
		// Each change is validated at once, so the tool is validated again before the
		// next one, and every change is a transition validated → updating → validating → validated.
		{tool("t", "v2", map[string]string{"a": strProp}), "1.1", 6},
		{tool("t", "v3", map[string]string{"a": strProp}), "1.2", 9},
		{tool("t", "v3", map[string]string{"a": intProp}), "2.0", 12},
		{tool("t", "v1", map[string]string{"a": intProp}), "2.1", 15},
	}
	want := slices.Clone(newTool)
	for i, st := range steps {
		res := f.discover(sv.ID, discovery("connect", st.def))
		tl := f.toolsByName(sv.ID)["t"]
		if tl.Version() != st.wantVersion || tl.Status != "validated" {
			t.Fatalf("step %d: got version %s status %q, want %s validated", i, tl.Version(), tl.Status, st.wantVersion)
		}
		if res.Validated != 1 || res.Invalid != 0 {
			t.Fatalf("step %d: got validated %d invalid %d, want 1 0", i, res.Validated, res.Invalid)
		}
		if n := f.count(`SELECT count(*) FROM tool_state_history WHERE tool_id = $1`, tl.ID); n != st.wantHistory {
			t.Fatalf("step %d: got %d history rows, want %d", i, n, st.wantHistory)
		}
		if i > 0 {
			want = append(want, changedTool("validated")...)
		}
		if got := f.transitions(tl.ID); !slices.Equal(got, want) {
			t.Fatalf("step %d: got history %v, want %v", i, got, want)
		}
		if n := f.count(`SELECT count(*) FROM tool_validations WHERE tool_id = $1`, tl.ID); n != i+1 {
			t.Fatalf("step %d: got %d validations, want %d", i, n, i+1)
		}
		if n := f.count(`SELECT count(*) FROM tool_schemas WHERE tool_id = $1`, tl.ID); n != i+1 {
			t.Fatalf("step %d: got %d versions, want %d", i, n, i+1)
		}
	}
	// Once a person has moved the tool on (toolstate), a change takes it from there back
	// through updating and validation.
	f.exec(`UPDATE mcp_tools SET status = 'enabled'`)
	f.discover(sv.ID, discovery("connect", tool("t", "v4", map[string]string{"a": intProp})))
	tl := f.toolsByName(sv.ID)["t"]
	want = append(want, changedTool("enabled")...)
	if got := f.transitions(tl.ID); tl.Status != "validated" || !slices.Equal(got, want) {
		t.Fatalf("got status %q history %v, want validated after %v", tl.Status, got, want)
	}
	// A tool left in updating (no validation yet) gets no second → updating row; it is
	// validated from updating.
	f.exec(`UPDATE mcp_tools SET status = 'updating'`)
	f.discover(sv.ID, discovery("connect", tool("t", "v5", map[string]string{"a": intProp})))
	tl = f.toolsByName(sv.ID)["t"]
	want = append(want, "updating→validating", "validating→validated")
	if got := f.transitions(tl.ID); tl.Status != "validated" || tl.Version() != "2.3" || !slices.Equal(got, want) {
		t.Fatalf("got status %q version %s history %v, want validated 2.3 after %v", tl.Status, tl.Version(), got, want)
	}
}

func TestApplyDiscoveryRemovalAndReturn(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sv := f.create(stdioSpec("gone"))
	all := threeTools()
	f.discover(sv.ID, discovery("connect", all...))
	before := f.toolsByName(sv.ID)

	res := f.discover(sv.ID, discovery("connect", all[0], all[1]))
	wantResult(t, "without ping", res, 0, 0, 2, 1)
	if !slices.Equal(res.Changed, []string{"ping"}) {
		t.Fatalf("changed: got %v, want [ping]", res.Changed)
	}
	tools := f.toolsByName(sv.ID)
	if len(tools) != 3 {
		t.Fatalf("got %d tools, want 3 (a missing tool is kept)", len(tools))
	}
	if p := tools["ping"]; p.Available || p.Status != before["ping"].Status || p.Status != "validated" || p.ID != before["ping"].ID {
		t.Fatalf("ping: got available %v status %q, want unavailable, status kept (validated)", p.Available, p.Status)
	}
	if res.Validated != 0 || !slices.Equal(f.transitions(before["ping"].ID), newTool) {
		t.Fatalf("removal: got validated %d history %v, want no validation and no transition", res.Validated, f.transitions(before["ping"].ID))
	}
	if got := mustGet(t, f, sv.ID); got.ToolCount != 2 {
		t.Fatalf("tool_count: got %d, want 2", got.ToolCount)
	}
	list, err := f.reg.ServerTools(f.ctx, sv.ID)
	if err != nil {
		t.Fatal(err)
	}
	if last := list[len(list)-1]; last.Name != "ping" {
		t.Fatalf("server tools: got %s last, want the unavailable ping last", last.Name)
	}
	if n := len(f.eventPayloads("tools.changed")); n != 2 {
		t.Fatalf("got %d tools.changed events, want 2", n)
	}

	// Missing again: already unavailable, so not removed twice.
	res = f.discover(sv.ID, discovery("connect", all[0], all[1]))
	wantResult(t, "still without ping", res, 0, 0, 2, 0)

	res = f.discover(sv.ID, discovery("connect", all...))
	wantResult(t, "ping back", res, 0, 1, 2, 0)
	if !slices.Equal(res.Changed, []string{"ping"}) {
		t.Fatalf("changed: got %v, want [ping]", res.Changed)
	}
	p := f.toolsByName(sv.ID)["ping"]
	if !p.Available || p.Version() != "1.0" || p.Status != "validated" || p.ID != before["ping"].ID {
		t.Fatalf("ping back: got available %v version %s status %q, want available 1.0 validated, same id", p.Available, p.Version(), p.Status)
	}
	// The same definition back: nothing to validate, no transition.
	if res.Validated != 0 || !slices.Equal(f.transitions(p.ID), newTool) {
		t.Fatalf("ping back: got validated %d history %v, want none and %v", res.Validated, f.transitions(p.ID), newTool)
	}
	if n := f.count(`SELECT count(*) FROM tool_schemas WHERE tool_id = $1`, p.ID); n != 1 {
		t.Fatalf("ping versions: got %d, want 1 (same definition)", n)
	}

	// Gone and back with a new definition: a new version, available again.
	f.discover(sv.ID, discovery("connect", all[0], all[1]))
	res = f.discover(sv.ID, discovery("connect", all[0], all[1], tool("ping", "Pings harder", nil)))
	wantResult(t, "ping back changed", res, 0, 1, 2, 0)
	p = f.toolsByName(sv.ID)["ping"]
	if !p.Available || p.Version() != "1.1" || p.Status != "validated" || res.Validated != 1 {
		t.Fatalf("ping back changed: got available %v version %s status %q validated %d, want true 1.1 validated 1", p.Available, p.Version(), p.Status, res.Validated)
	}
	if got, want := f.transitions(p.ID), append(slices.Clone(newTool), changedTool("validated")...); !slices.Equal(got, want) {
		t.Fatalf("ping back changed: got history %v, want %v", got, want)
	}

	// An empty but complete list marks everything unavailable.
	res = f.discover(sv.ID, discovery("connect"))
	wantResult(t, "empty list", res, 0, 0, 0, 3)
	if got := mustGet(t, f, sv.ID); got.ToolCount != 0 {
		t.Fatalf("tool_count: got %d, want 0", got.ToolCount)
	}
	if n := f.count(`SELECT count(*) FROM mcp_tools`); n != 3 {
		t.Fatalf("got %d tool rows, want 3", n)
	}
	// Removal changes no status.
	if got := f.strings(`SELECT name || '|' || status FROM mcp_tools ORDER BY name`); !slices.Equal(got, []string{"add|validated", "echo|validated", "ping|validated"}) {
		t.Fatalf("after the empty list: got %v, want every status kept", got)
	}
}

// A name listed twice with different definitions is stored under neither (which one
// the server runs is its choice); listed_twice_test.go has the rest.
func TestApplyDiscoveryDuplicateNames(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sv := f.create(stdioSpec("dups"))
	first := tool("dup", "first", nil)
	second := tool("dup", "second", map[string]string{"x": strProp})
	res := f.discover(sv.ID, discovery("connect", first, second, tool("solo", "", nil)))
	wantResult(t, "duplicates", res, 1, 0, 0, 0)
	tools := f.toolsByName(sv.ID)
	if _, ok := tools["dup"]; len(tools) != 1 || ok {
		t.Fatalf("got %d tools (dup stored: %v), want only solo", len(tools), ok)
	}
	// The same list again: still left out, nothing changes.
	res = f.discover(sv.ID, discovery("connect", first, second, tool("solo", "", nil)))
	wantResult(t, "duplicates again", res, 0, 0, 1, 0)
}

func TestApplyDiscoveryListsAndErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sv := f.create(stdioSpec("lists"))
	d := discovery("import", tool("a", "", nil))
	d.Resources = []registry.Resource{{URI: "file:///a", Name: "a"}}
	d.Prompts = []registry.Prompt{{Name: "greet", Arguments: []string{"name"}}}
	f.discover(sv.ID, d)
	got := mustGet(t, f, sv.ID)
	if len(got.Resources) != 1 || got.Resources[0].URI != "file:///a" || len(got.Prompts) != 1 || got.Prompts[0].Name != "greet" {
		t.Fatalf("got resources %+v prompts %+v", got.Resources, got.Prompts)
	}
	// nil lists keep what is stored.
	f.discover(sv.ID, discovery("connect", tool("a", "", nil)))
	if got := mustGet(t, f, sv.ID); len(got.Resources) != 1 || len(got.Prompts) != 1 {
		t.Fatalf("after a run without lists: got resources %+v prompts %+v, want them kept", got.Resources, got.Prompts)
	}
	// Import runs are audited even with nothing changed.
	f.discover(sv.ID, discovery("import", tool("a", "", nil)))
	if n := len(f.auditPayloads("server.discover")); n != 2 {
		t.Fatalf("got %d server.discover audit rows, want 2 (first import, second import)", n)
	}
	if _, err := f.reg.ApplyDiscovery(f.ctx, "00000000-0000-0000-0000-0000000000ff", discovery("connect")); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("unknown server: got %v, want ErrNotFound", err)
	}
}

func TestRecordDiscoveryFailure(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sv := f.create(stdioSpec("fail"))
	f.discover(sv.ID, discovery("connect", threeTools()...))
	snapshot := f.strings(`SELECT t::text FROM mcp_tools t ORDER BY name`)
	auditBefore := f.count(`SELECT count(*) FROM audit_log`)

	d := discovery("list_changed")
	d.Pages = 2
	id, err := f.reg.RecordDiscoveryFailure(f.ctx, sv.ID, d, errors.New("page 3: connection reset"))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.strings(`SELECT t::text FROM mcp_tools t ORDER BY name`); !slices.Equal(got, snapshot) {
		t.Fatalf("tools changed after a failed discovery:\ngot  %v\nwant %v", got, snapshot)
	}
	// 3 versions, 3 × 3 transitions (→discovered, →validating, →validated), 3 validations.
	if n := f.count(`SELECT count(*) FROM tool_schemas`) + f.count(`SELECT count(*) FROM tool_state_history`) + f.count(`SELECT count(*) FROM tool_validations`); n != 15 {
		t.Fatalf("got %d version, history and validation rows, want 15 (none new)", n)
	}
	runs, err := f.reg.DiscoveryRuns(f.ctx, sv.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].ID != id || runs[0].Status != "failed" || runs[0].Trigger != "list_changed" || runs[0].Pages != 2 ||
		runs[0].Error == nil || *runs[0].Error != "page 3: connection reset" || runs[0].Added+runs[0].Updated+runs[0].Removed != 0 {
		t.Fatalf("failed run: got %+v", runs)
	}
	ev := f.eventPayloads("discovery.failed")
	if len(ev) != 1 || ev[0]["server"] != "fail" || ev[0]["error"] != "page 3: connection reset" {
		t.Fatalf("discovery.failed events: got %v", ev)
	}
	if n := len(f.eventPayloads("tools.changed")); n != 1 {
		t.Fatalf("got %d tools.changed events, want 1 (the first run only)", n)
	}
	if n := f.count(`SELECT count(*) FROM audit_log`); n != auditBefore {
		t.Fatalf("got %d audit rows, want %d", n, auditBefore)
	}
	if got := mustGet(t, f, sv.ID); got.ToolCount != 3 {
		t.Fatalf("tool_count: got %d, want 3", got.ToolCount)
	}
}

func TestDiscoveryActor(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sv := f.create(stdioSpec("actor"))
	d := discovery("manual", tool("a", "", nil))
	d.Actor = audit.Actor{Kind: audit.ActorUser, ID: "00000000-0000-0000-0000-000000000007", Name: "alice"}
	res := f.discover(sv.ID, d)
	// A tool without a description fails validation (description_missing is an error).
	if res.Validated != 1 || res.Invalid != 1 {
		t.Fatalf("result: got validated %d invalid %d, want 1 1", res.Validated, res.Invalid)
	}
	got := f.strings(`SELECT actor || '|' || coalesce(from_status, '') || '→' || to_status || '|' || reason FROM tool_state_history ORDER BY id`)
	if len(got) != 3 || !strings.HasPrefix(got[0], "alice|→discovered|") || !strings.Contains(got[0], "manual") ||
		!strings.HasPrefix(got[1], "alice|discovered→validating|validating definition ") ||
		!strings.HasPrefix(got[2], "alice|validating→invalid|1 error") || !strings.Contains(got[2], "description_missing") {
		t.Fatalf("history: got %v, want → discovered (mentioning manual), → validating, → invalid (description_missing), all by alice", got)
	}
	a := f.toolsByName(sv.ID)["a"]
	if a.Status != "invalid" {
		t.Fatalf("status: got %q, want invalid", a.Status)
	}
	var (
		hash, worst, by string
		success         bool
		findings        []struct{ Code, Path, Severity string }
	)
	if err := f.pool.QueryRow(f.ctx, `SELECT definition_hash, success, coalesce(worst, ''), validated_by, findings FROM tool_validations WHERE tool_id = $1`, a.ID).
		Scan(&hash, &success, &worst, &by, &findings); err != nil {
		t.Fatalf("tool_validations: %v", err)
	}
	if hash != a.DefinitionHash || success || worst != "error" || by != "alice" ||
		!slices.ContainsFunc(findings, func(fd struct{ Code, Path, Severity string }) bool {
			return fd.Code == "description_missing" && fd.Path == "/description" && fd.Severity == "error"
		}) {
		t.Fatalf("tool_validations: got hash %s success %v worst %q by %q findings %+v, want a failed validation by alice with description_missing", hash, success, worst, by, findings)
	}
	if w := f.strings(`SELECT coalesce(validation_worst, '') FROM mcp_tools WHERE id = $1`, a.ID); !slices.Equal(w, []string{"error"}) {
		t.Fatalf("validation_worst: got %v, want error", w)
	}
	if got := f.strings(`SELECT actor_name || '|' || target_id FROM audit_log WHERE action = 'server.discover'`); len(got) != 1 || got[0] != "alice|"+sv.ID {
		t.Fatalf("audit: got %v, want alice on %s", got, sv.ID)
	}
}

// TestApplyDiscoveryValidatesWaitingTools: a tool of the server still awaiting validation
// (left discovered or updating, as an older version or an interrupted writer could leave
// it) is validated by the next discovery, listed unchanged or no longer listed, as any
// new definition is: its moves, findings and event, and its worst finding on the row.
func TestApplyDiscoveryValidatesWaitingTools(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sv := f.create(stdioSpec("waiting"))
	f.discover(sv.ID, discovery("connect", threeTools()...))
	tools := f.toolsByName(sv.ID)
	echo, ping := tools["echo"].ID, tools["ping"].ID
	f.exec(`UPDATE mcp_tools SET status = 'discovered', validation_worst = NULL WHERE id = $1`, echo)
	f.exec(`UPDATE mcp_tools SET status = 'updating', validation_worst = NULL WHERE id = $1`, ping)
	before := len(f.eventPayloads("tool.state"))

	res := f.discover(sv.ID, discovery("connect", threeTools()[:2]...)) // ping is no longer listed
	wantResult(t, "run with waiting tools", res, 0, 0, 2, 1)
	if res.Validated != 2 || res.Invalid != 0 {
		t.Fatalf("got validated %d invalid %d, want the 2 waiting tools validated", res.Validated, res.Invalid)
	}
	after := f.toolsByName(sv.ID)
	if tl := after["echo"]; tl.Status != "validated" || !tl.Available {
		t.Fatalf("echo: got %s, available %v; want validated, available", tl.Status, tl.Available)
	}
	if tl := after["ping"]; tl.Status != "validated" || tl.Available {
		t.Fatalf("ping: got %s, available %v; want validated, unavailable", tl.Status, tl.Available)
	}
	if got, want := f.transitions(echo), append(slices.Clone(newTool), "discovered→validating", "validating→validated"); !slices.Equal(got, want) {
		t.Fatalf("echo history: got %v, want %v", got, want)
	}
	if got, want := f.transitions(ping), append(slices.Clone(newTool), "updating→validating", "validating→validated"); !slices.Equal(got, want) {
		t.Fatalf("ping history: got %v, want %v", got, want)
	}
	for _, id := range []string{echo, ping} {
		if n := f.count(`SELECT count(*) FROM tool_validations WHERE tool_id = $1`, id); n != 2 {
			t.Fatalf("tool %s: got %d validations, want 2", id, n)
		}
		if got := f.strings(`SELECT coalesce(validation_worst, '') FROM mcp_tools WHERE id = $1`, id); !slices.Equal(got, []string{"warning"}) {
			t.Fatalf("tool %s validation_worst: got %v, want warning", id, got)
		}
	}
	ev := f.eventPayloads("tool.state")
	if len(ev) != before+1 || ev[len(ev)-1]["count"] != float64(2) {
		t.Fatalf("tool.state events: got %v after %d, want one more, for 2 tools", ev, before)
	}
	changes, _ := ev[len(ev)-1]["changes"].([]any)
	if len(changes) != 2 || changes[0].(map[string]any)["id"] != echo || changes[1].(map[string]any)["from"] != "updating" ||
		changes[1].(map[string]any)["to"] != "validated" {
		t.Fatalf("tool.state changes: got %v, want echo then ping (by name), ping from updating to validated", changes)
	}
}

// A person's disable that commits while a discovery of a changed definition is under
// way is what the change starts from: the discovery waits for the tool's row and reads
// its status again, instead of writing over it from the list it loaded first.
func TestDiscoveryWaitsForAChangeUnderWay(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sv := f.create(stdioSpec("race"))
	f.discover(sv.ID, discovery("connect", threeTools()...))
	echo := f.toolsByName(sv.ID)["echo"]
	if _, err := f.pool.Exec(f.ctx, `UPDATE mcp_tools SET status = 'enabled' WHERE id = $1`, echo.ID); err != nil {
		t.Fatal(err)
	}
	tx, err := f.pool.Begin(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(f.ctx)
	if _, err := tx.Exec(f.ctx, `UPDATE mcp_tools SET status = 'disabled' WHERE id = $1`, echo.ID); err != nil {
		t.Fatal(err)
	}
	changed := threeTools()
	changed[0].Description = "Echoes a message back, changed"
	done := make(chan error, 1)
	go func() {
		_, err := f.reg.ApplyDiscovery(f.ctx, sv.ID, discovery("list_changed", changed...))
		done <- err
	}()
	testkit.WaitForLockWait(t, f.pool, "Discovery")
	if err := tx.Commit(f.ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	h := f.transitions(echo.ID)
	if got := h[len(h)-3:]; !slices.Equal(got, changedTool("disabled")) {
		t.Fatalf("history after the change: %v, want it to start from disabled: %v", h, changedTool("disabled"))
	}
}

// A discovery's tool.state event says where a changed tool started from (enabled, say),
// not the updating state it passed through in the same transaction: a client counting
// tools per state from events would otherwise miss the enabled one leaving.
func TestDiscoveryEventFromStateOfChangedTool(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sv := f.create(stdioSpec("event-from"))
	f.discover(sv.ID, discovery("connect", threeTools()...))
	echo := f.toolsByName(sv.ID)["echo"].ID
	f.exec(`UPDATE mcp_tools SET status = 'enabled' WHERE id = $1`, echo)
	changed := threeTools()
	changed[0] = tool("echo", "Echoes a message, louder", map[string]string{"message": strProp}, "message")
	f.discover(sv.ID, discovery("connect", changed...))
	if got := f.toolsByName(sv.ID)["echo"].Status; got != "validated" {
		t.Fatalf("echo after its change: %s, want validated", got)
	}
	ev := f.eventPayloads("tool.state")
	changes, _ := ev[len(ev)-1]["changes"].([]any)
	if len(changes) != 1 || changes[0].(map[string]any)["id"] != echo || changes[0].(map[string]any)["from"] != "enabled" ||
		changes[0].(map[string]any)["to"] != "validated" {
		t.Fatalf("tool.state changes: got %v, want echo from enabled to validated", changes)
	}
}
