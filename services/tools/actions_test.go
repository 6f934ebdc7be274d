package tools_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/toolstate"
	"github.com/toolwarden/toolwarden/services/verr"
)

// toolIn creates a tool in a state on the fixture's "act" server (created on first use).
func (f *fixture) toolIn(name, status string) string {
	f.t.Helper()
	var srv string
	if err := f.pool.QueryRow(f.ctx, `SELECT id::text FROM mcp_servers WHERE name = 'act'`).Scan(&srv); err != nil {
		srv = f.server("act", false)
	}
	return f.tool(toolSpec{server: srv, name: name, status: status})
}

func (f *fixture) setEnabled(ids []string, enable bool, reason string, override bool) []tools.Outcome {
	f.t.Helper()
	out, err := f.svc.SetEnabled(f.ctx, alice, ids, enable, reason, override)
	if err != nil {
		f.t.Fatalf("set enabled %v: %v", ids, err)
	}
	return out
}

// historyMeta returns the metadata of a tool's history rows, oldest first.
func (f *fixture) historyMeta(id string) []map[string]any {
	f.t.Helper()
	raws := f.strings(`SELECT metadata::text FROM tool_state_history WHERE tool_id = $1 ORDER BY id`, id)
	out := make([]map[string]any, len(raws))
	for i, r := range raws {
		_ = json.Unmarshal([]byte(r), &out[i])
	}
	return out
}

func TestSetEnabledMoves(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cases := []struct {
		from, to       string
		enable         bool
		testingSkipped bool
	}{
		{"validated", "enabled", true, true},
		{"configured", "enabled", true, true},
		{"verified", "enabled", true, false},
		{"disabled", "enabled", true, false},
		{"enabled", "disabled", false, false},
	}
	for _, c := range cases {
		id := f.toolIn("from-"+c.from, c.from)
		out := f.setEnabled([]string{id}, c.enable, "  because  ", false)
		if len(out) != 1 || out[0].ID != id || out[0].From != c.from || out[0].To != c.to || out[0].Error != "" || out[0].Err() != nil ||
			out[0].Name != "act__from-"+c.from {
			t.Errorf("%s: outcome %+v", c.from, out)
			continue
		}
		if f.status(id) != c.to {
			t.Errorf("%s: status %s, want %s", c.from, f.status(id), c.to)
		}
		if h := f.history(id); !slices.Equal(h, []string{c.from + "→" + c.to}) {
			t.Errorf("%s: history %v", c.from, h)
		}
		meta := f.historyMeta(id)[0]
		if (meta["testing_skipped"] == true) != c.testingSkipped || meta["override"] != nil {
			t.Errorf("%s: history metadata %v", c.from, meta)
		}
		if r := f.str(`SELECT reason || '|' || actor FROM tool_state_history WHERE tool_id = $1`, id); r != "because|alice" {
			t.Errorf("%s: history reason|actor %q", c.from, r)
		}
		action := "tool.disable"
		if c.enable {
			action = "tool.enable"
		}
		p := f.auditPayloads(action, id)
		if len(p) != 1 || p[0]["from"] != c.from || p[0]["to"] != c.to || p[0]["reason"] != "because" ||
			(p[0]["testing_skipped"] == true) != c.testingSkipped || p[0]["override"] != nil {
			t.Errorf("%s: audit %v", c.from, p)
		}
		if n := f.count(`SELECT count(*) FROM audit_log WHERE target_id = $1 AND actor_name = 'alice' AND target_name = $2`, id,
			"act__from-"+c.from); n != 1 {
			t.Errorf("%s: audit row does not name actor and target", c.from)
		}
	}
	// Already there: no move, no history, no audit, no error.
	for _, c := range []struct {
		status string
		enable bool
	}{{"enabled", true}, {"disabled", false}} {
		id := f.toolIn("already-"+c.status, c.status)
		out := f.setEnabled([]string{id}, c.enable, "", false)
		if len(out) != 1 || out[0].From != c.status || out[0].To != c.status || out[0].Err() != nil || out[0].Error != "" {
			t.Errorf("already %s: %+v", c.status, out)
		}
		if len(f.history(id)) != 0 || f.count(`SELECT count(*) FROM audit_log WHERE target_id = $1`, id) != 0 {
			t.Errorf("already %s: a no-op wrote history or audit", c.status)
		}
	}
}

func TestSetEnabledRefusals(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cases := []struct {
		status string
		enable bool
		says   string
	}{
		{"discovered", true, "once it is validated"},
		{"validating", true, "once it is validated"},
		{"updating", true, "updating"},
		{"testing", true, "being tested"},
		{"validated", false, "nothing to disable"},
		{"invalid", false, "nothing to disable"},
		{"failed", true, "override"},
		{"invalid", true, "override"},
	}
	for _, c := range cases {
		id := f.toolIn(fmt.Sprintf("%s-%v", c.status, c.enable), c.status)
		out := f.setEnabled([]string{id}, c.enable, "", false)
		if len(out) != 1 || out[0].Err() == nil || !strings.Contains(out[0].Error, c.says) || out[0].To != c.status {
			t.Errorf("%s (enable %v): %+v, want an error saying %q", c.status, c.enable, out, c.says)
			continue
		}
		if c.says == "override" && !errors.Is(out[0].Err(), toolstate.ErrOverrideRequired) {
			t.Errorf("%s: error %v, want ErrOverrideRequired", c.status, out[0].Err())
		}
		if f.status(id) != c.status || len(f.history(id)) != 0 || f.count(`SELECT count(*) FROM audit_log WHERE target_id = $1`, id) != 0 {
			t.Errorf("%s: a refused move changed something", c.status)
		}
	}
	// Input errors.
	_, err := f.svc.SetEnabled(f.ctx, alice, nil, true, "", false)
	wantFields(t, err, "ids")
	many := make([]string, tools.MaxLimit+1)
	for i := range many {
		many[i] = uuid.NewString()
	}
	_, err = f.svc.SetEnabled(f.ctx, alice, many, true, "", false)
	wantFields(t, err, "ids")
	id := f.toolIn("inv", "invalid")
	_, err = f.svc.SetEnabled(f.ctx, alice, []string{id}, true, "  ", true)
	ve := wantFields(t, err, "reason")
	if !strings.Contains(ve.For("reason"), "override") {
		t.Errorf("message %q", ve.For("reason"))
	}
	if f.status(id) != "invalid" {
		t.Errorf("override without a reason moved the tool")
	}
	// Unknown and malformed ids are reported per tool.
	unknown := uuid.NewString()
	out := f.setEnabled([]string{unknown, "not-a-uuid"}, true, "", false)
	if len(out) != 2 {
		t.Fatalf("outcomes %+v", out)
	}
	for _, o := range out {
		if !errors.Is(o.Err(), tools.ErrNotFound) || o.Error == "" {
			t.Errorf("unknown %s: %+v", o.ID, o)
		}
	}
}

func TestSetEnabledOverride(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	inv := f.toolIn("inv", "invalid")
	f.exec(`UPDATE mcp_tools SET validation_worst = 'error' WHERE id = $1`, inv)

	out := f.setEnabled([]string{inv}, true, "", false)
	if out[0].Err() == nil || !strings.Contains(out[0].Error, "override") {
		t.Fatalf("invalid without override: %+v", out)
	}
	out = f.setEnabled([]string{inv}, true, " vendor confirmed the finding is harmless ", true)
	if out[0].Err() != nil || out[0].To != "enabled" {
		t.Fatalf("invalid with override: %+v", out)
	}
	it := f.get(inv)
	if it.Status != "enabled" || deref(it.EnableOverride) != "vendor confirmed the finding is harmless" {
		t.Errorf("after override: status %s override %v", it.Status, it.EnableOverride)
	}
	if m := f.historyMeta(inv); len(m) != 1 || m[0]["override"] != true {
		t.Errorf("history metadata %v", m)
	}
	p := f.auditPayloads("tool.enable", inv)
	if len(p) != 1 || p[0]["override"] != true || p[0]["validation_worst"] != "error" || p[0]["reason"] != "vendor confirmed the finding is harmless" {
		t.Errorf("audit %v", p)
	}
	failed := f.toolIn("failed", "failed")
	if out := f.setEnabled([]string{failed}, true, "the test server was down", true); out[0].Err() != nil || f.status(failed) != "enabled" {
		t.Errorf("failed with override: %+v", out)
	}
	// An override is recorded only where one was needed.
	val := f.toolIn("val", "validated")
	inv2 := f.toolIn("inv2", "invalid")
	out = f.setEnabled([]string{val, inv2}, true, "bulk override", true)
	for _, o := range out {
		if o.Err() != nil || o.To != "enabled" {
			t.Errorf("bulk override: %+v", o)
		}
	}
	if it := f.get(val); it.EnableOverride != nil {
		t.Errorf("validated tool got an override note %q", *it.EnableOverride)
	}
	if m := f.historyMeta(val); m[0]["override"] != nil || m[0]["testing_skipped"] != true {
		t.Errorf("validated tool's history %v", m)
	}
	if p := f.auditPayloads("tool.enable", val); p[0]["override"] != nil || p[0]["reason"] != "bulk override" {
		t.Errorf("validated tool's audit %v", p)
	}
	if it := f.get(inv2); deref(it.EnableOverride) != "bulk override" {
		t.Errorf("invalid tool's override note %v", it.EnableOverride)
	}
	// Disabling clears the note.
	f.setEnabled([]string{inv}, false, "", false)
	if it := f.get(inv); it.Status != "disabled" || it.EnableOverride != nil {
		t.Errorf("after disable: %s %v", it.Status, it.EnableOverride)
	}
}

// TestEnableBlockingFindings: critical and error findings of the current definition keep
// a tool from being enabled without an override in any state (a tool revalidated while
// configured, verified or disabled keeps its state but gets the findings).
func TestEnableBlockingFindings(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, c := range []struct{ status, worst string }{
		{"configured", "error"}, {"verified", "critical"}, {"disabled", "error"}, {"validated", "error"},
	} {
		id := f.toolIn(c.status+"-"+c.worst, c.status)
		f.exec(`UPDATE mcp_tools SET validation_worst = $2 WHERE id = $1`, id, c.worst)
		out := f.setEnabled([]string{id}, true, "", false)
		if out[0].Err() == nil || !errors.Is(out[0].Err(), toolstate.ErrOverrideRequired) || !strings.Contains(out[0].Error, "override") {
			t.Errorf("%s with %s findings enabled without an override: %+v", c.status, c.worst, out[0])
			continue
		}
		if f.status(id) != c.status {
			t.Errorf("%s: moved to %s", c.status, f.status(id))
		}
		out = f.setEnabled([]string{id}, true, "accepted the risk", true)
		if out[0].Err() != nil || f.status(id) != "enabled" || deref(f.get(id).EnableOverride) != "accepted the risk" {
			t.Errorf("%s with %s findings and an override: %+v", c.status, c.worst, out[0])
		}
		if p := f.auditPayloads("tool.enable", id); len(p) != 1 || p[0]["override"] != true || p[0]["validation_worst"] != c.worst {
			t.Errorf("%s: audit %v", c.status, p)
		}
	}
	// Warnings do not block; disabling is never blocked.
	warn := f.toolIn("warn", "configured")
	f.exec(`UPDATE mcp_tools SET validation_worst = 'warning' WHERE id = $1`, warn)
	if out := f.setEnabled([]string{warn}, true, "", false); out[0].Err() != nil {
		t.Errorf("warning blocked the enable: %+v", out[0])
	}
	bad := f.toolIn("bad-enabled", "enabled")
	f.exec(`UPDATE mcp_tools SET validation_worst = 'critical' WHERE id = $1`, bad)
	if out := f.setEnabled([]string{bad}, false, "", false); out[0].Err() != nil || f.status(bad) != "disabled" {
		t.Errorf("disabling a tool with findings: %+v", out[0])
	}
}

func TestSetEnabledBulk(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	val := f.toolIn("val", "validated")
	conf := f.toolIn("conf", "configured")
	dis := f.toolIn("dis", "disabled")
	en := f.toolIn("en", "enabled")
	inv := f.toolIn("inv", "invalid")
	disc := f.toolIn("disc", "discovered")
	unknown := uuid.NewString()
	events := f.count(`SELECT count(*) FROM events WHERE kind = 'tool.state'`)

	ids := []string{val, conf, dis, en, inv, disc, unknown, val} // one twice
	out := f.setEnabled(ids, true, "", false)
	if len(out) != 7 {
		t.Fatalf("%d outcomes for 7 distinct ids: %+v", len(out), out)
	}
	if !slices.IsSortedFunc(out, func(a, b tools.Outcome) int { return strings.Compare(a.ID, b.ID) }) {
		t.Errorf("outcomes not in id order")
	}
	byID := map[string]tools.Outcome{}
	for _, o := range out {
		byID[o.ID] = o
	}
	for _, id := range []string{val, conf, dis} {
		if o := byID[id]; o.Err() != nil || o.To != "enabled" || f.status(id) != "enabled" || len(f.history(id)) != 1 {
			t.Errorf("%s: %+v, status %s", o.Name, o, f.status(id))
		}
	}
	if o := byID[en]; o.Err() != nil || o.From != "enabled" || len(f.history(en)) != 0 {
		t.Errorf("already enabled: %+v", o)
	}
	if o := byID[inv]; !errors.Is(o.Err(), toolstate.ErrOverrideRequired) || f.status(inv) != "invalid" {
		t.Errorf("invalid: %+v", o)
	}
	if o := byID[disc]; o.Err() == nil || f.status(disc) != "discovered" {
		t.Errorf("discovered: %+v", o)
	}
	if o := byID[unknown]; !errors.Is(o.Err(), tools.ErrNotFound) {
		t.Errorf("unknown: %+v", o)
	}
	if n := f.count(`SELECT count(*) FROM audit_log WHERE action = 'tool.enable'`); n != 3 {
		t.Errorf("%d enable audit rows, want 3", n)
	}
	if n := f.count(`SELECT count(*) FROM events WHERE kind = 'tool.state'`); n != events+1 {
		t.Errorf("%d tool.state events, want one for the bulk action", n-events)
	}
	// Nothing allowed: nothing written.
	audits := f.count(`SELECT count(*) FROM audit_log`)
	out = f.setEnabled([]string{inv, disc}, true, "", false)
	if out[0].Err() == nil || out[1].Err() == nil || f.count(`SELECT count(*) FROM audit_log`) != audits {
		t.Errorf("refused bulk: %+v", out)
	}
	// Bulk disable.
	out = f.setEnabled([]string{val, conf, dis, en, inv}, false, "maintenance", false)
	moved := 0
	for _, o := range out {
		if o.Err() == nil {
			moved++
		}
	}
	if moved != 4 || f.status(inv) != "invalid" {
		t.Errorf("bulk disable: %+v", out)
	}
	for _, id := range []string{val, conf, dis, en} {
		if f.status(id) != "disabled" {
			t.Errorf("%s is %s", id, f.status(id))
		}
	}
}

// TestSetEnabledConcurrent: ten sessions enabling one tool at once leave one move.
func TestSetEnabledConcurrent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.toolIn("contended", "validated")
	var wg sync.WaitGroup
	outs := make([][]tools.Outcome, 10)
	errs := make([]error, 10)
	start := make(chan struct{})
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			outs[i], errs[i] = f.svc.SetEnabled(f.ctx, audit.Actor{Kind: audit.ActorUser, Name: fmt.Sprintf("user%d", i)},
				[]string{id}, true, "", false)
		}()
	}
	close(start)
	wg.Wait()
	moves := 0
	for i := range 10 {
		if errs[i] != nil {
			t.Errorf("session %d: %v", i, errs[i])
			continue
		}
		o := outs[i][0]
		if o.Err() != nil || o.To != "enabled" {
			t.Errorf("session %d: %+v", i, o)
		}
		if o.From == "validated" {
			moves++
		}
	}
	if moves != 1 {
		t.Errorf("%d sessions report the move, want 1", moves)
	}
	if f.status(id) != "enabled" {
		t.Errorf("status %s", f.status(id))
	}
	if h := f.history(id); !slices.Equal(h, []string{"validated→enabled"}) {
		t.Errorf("history %v, want exactly one move", h)
	}
	if n := f.count(`SELECT count(*) FROM audit_log WHERE action = 'tool.enable' AND target_id = $1`, id); n != 1 {
		t.Errorf("%d audit rows, want 1", n)
	}

	// Enables and disables racing: whatever order they ran in, the history is one chain
	// ending in the final state, with one audit row per move.
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := f.svc.SetEnabled(f.ctx, alice, []string{id}, i%2 == 0, "race", false); err != nil {
				t.Errorf("racer %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	h := f.history(id)
	for i := 1; i < len(h); i++ {
		prevTo := strings.Split(h[i-1], "→")[1]
		from := strings.Split(h[i], "→")[0]
		if prevTo != from {
			t.Errorf("history does not chain: %v", h)
			break
		}
	}
	if last := strings.Split(h[len(h)-1], "→")[1]; last != f.status(id) {
		t.Errorf("history ends in %s, status is %s", last, f.status(id))
	}
	audits := f.count(`SELECT count(*) FROM audit_log WHERE action IN ('tool.enable', 'tool.disable') AND target_id = $1`, id)
	if audits != len(h) {
		t.Errorf("%d moves but %d audit rows", len(h), audits)
	}
}

func TestNormalizeTags(t *testing.T) {
	t.Parallel()
	got, err := tools.NormalizeTags([]string{" Beta ", "alpha", "beta", "", "  ", "ALPHA", "a-1", "9lives"})
	if err != nil || !slices.Equal(got, []string{"9lives", "a-1", "alpha", "beta"}) {
		t.Errorf("normalize: %q %v", got, err)
	}
	if got, err := tools.NormalizeTags(nil); err != nil || got == nil || len(got) != 0 {
		t.Errorf("nil: %#v %v, want an empty slice", got, err)
	}
	for _, bad := range []string{"-x", "a b", "a_b", "ä", "a.b", strings.Repeat("x", 33), "tag!"} {
		_, err := tools.NormalizeTags([]string{"ok", bad})
		ve := wantFields(t, err, "tags")
		if !strings.Contains(ve.For("tags"), fmt.Sprintf("%q", strings.ToLower(bad))) {
			t.Errorf("%q: message %q does not name it", bad, ve.For("tags"))
		}
	}
	if _, err := tools.NormalizeTags([]string{strings.Repeat("x", 32)}); err != nil {
		t.Errorf("32 characters: %v", err)
	}
	var many []string
	for i := range tools.MaxTags {
		many = append(many, fmt.Sprintf("t%d", i), fmt.Sprintf("T%d", i)) // 40 given, 20 distinct
	}
	if got, err := tools.NormalizeTags(many); err != nil || len(got) != tools.MaxTags {
		t.Errorf("20 distinct tags: %d %v", len(got), err)
	}
	_, err = tools.NormalizeTags(append(many, "one-more"))
	wantFields(t, err, "tags")
}

func TestTagBulk(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a, b, c := f.toolIn("a", "enabled"), f.toolIn("b", "validated"), f.toolIn("c", "disabled")
	f.update(c, tools.Patch{Tags: []string{"x", "y"}, SetTags: true}) // version 1

	n, err := f.svc.Tag(f.ctx, bob, []string{a, b, c, uuid.NewString(), a}, []string{"Y", " x "}, false)
	if err != nil || n != 2 {
		t.Fatalf("add: %d %v, want 2 tools changed", n, err)
	}
	for _, id := range []string{a, b, c} {
		if it := f.get(id); !slices.Equal(it.Tags, []string{"x", "y"}) {
			t.Errorf("%s tags %v", it.Name, it.Tags)
		}
	}
	if f.version(a) != 1 || f.version(b) != 1 || f.version(c) != 1 {
		t.Errorf("versions %d %d %d, want 1 1 1 (c had the tags)", f.version(a), f.version(b), f.version(c))
	}
	p := f.auditPayloads("tool.configure", a)
	if len(p) != 1 || p[0]["reason"] != "add tags x, y" || f.str(`SELECT actor FROM tool_configurations WHERE tool_id = $1`, a) != "bob" {
		t.Errorf("audit of a: %v", p)
	}
	if f.status(b) != "validated" {
		t.Errorf("tagging moved b to %s", f.status(b))
	}

	n, err = f.svc.Tag(f.ctx, alice, []string{a, c}, []string{"x", "z"}, true)
	if err != nil || n != 2 {
		t.Fatalf("remove: %d %v", n, err)
	}
	if it := f.get(a); !slices.Equal(it.Tags, []string{"y"}) || it.ConfigVersion != 2 {
		t.Errorf("a after remove: %v v%d", it.Tags, it.ConfigVersion)
	}
	if p := f.auditPayloads("tool.configure", c); len(p) != 2 || p[1]["reason"] != "remove tags x, z" {
		t.Errorf("audit of c: %v", p)
	}
	if n, err := f.svc.Tag(f.ctx, alice, []string{a}, []string{"absent"}, true); err != nil || n != 0 || f.version(a) != 2 {
		t.Errorf("removing an absent tag: %d %v v%d", n, err, f.version(a))
	}
	facets, err := f.svc.Tags(f.ctx)
	if err != nil || !slices.Equal(facets, []tools.Facet{{Value: "y", Count: 3}, {Value: "x", Count: 1}}) {
		t.Errorf("tag facets %+v %v", facets, err)
	}

	// Errors.
	_, err = f.svc.Tag(f.ctx, alice, []string{a}, nil, false)
	wantFields(t, err, "tags")
	_, err = f.svc.Tag(f.ctx, alice, []string{a}, []string{"", " "}, false)
	wantFields(t, err, "tags")
	_, err = f.svc.Tag(f.ctx, alice, []string{a}, []string{"Bad Tag"}, false)
	wantFields(t, err, "tags")
	_, err = f.svc.Tag(f.ctx, alice, nil, []string{"x"}, false)
	wantFields(t, err, "ids")
	// A tool that would get too many tags fails the whole call, naming the tool.
	var full []string
	for i := range tools.MaxTags - 1 {
		full = append(full, fmt.Sprintf("f%02d", i))
	}
	f.update(b, tools.Patch{Tags: full, SetTags: true})
	before := f.version(a)
	_, err = f.svc.Tag(f.ctx, alice, []string{a, b}, []string{"new1", "new2"}, false)
	ve := wantFields(t, err, "tags")
	if !strings.Contains(ve.For("tags"), "act__b") {
		t.Errorf("message %q does not name the tool", ve.For("tags"))
	}
	if f.version(a) != before || slices.Contains(f.get(a).Tags, "new1") {
		t.Errorf("a changed although the call failed")
	}
}

// TestRevalidate: validating again moves validated and invalid tools through validating;
// tools in other states keep theirs and get the findings. Each is audited.
func TestRevalidate(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	srv := f.server("val", false)
	// Invalid once, but its definition is fine now (say the rules changed).
	fixed := f.tool(toolSpec{server: srv, name: "fixed", status: "invalid", description: "Fetches the weather for a city and returns it as text."})
	f.exec(`UPDATE mcp_tools SET validation_worst = 'error' WHERE id = $1`, fixed)
	broken := f.tool(toolSpec{server: srv, name: "broken", status: "validated", description: "   "})
	brokenEnabled := f.tool(toolSpec{server: srv, name: "broken_enabled", status: "enabled", description: " "})

	it0 := f.get(fixed)
	if _, ok, err := f.svc.LatestValidation(f.ctx, it0); ok || err != nil {
		t.Fatalf("validation before any: %v %v", ok, err)
	}

	it, err := f.svc.Revalidate(f.ctx, alice, fixed)
	if err != nil {
		t.Fatal(err)
	}
	if it.Status != "validated" || it.ValidationWorst != nil && (*it.ValidationWorst == "error" || *it.ValidationWorst == "critical") {
		t.Errorf("fixed: status %s worst %v", it.Status, it.ValidationWorst)
	}
	if h := f.history(fixed); !slices.Equal(h, []string{"invalid→validating", "validating→validated"}) {
		t.Errorf("fixed history %v", h)
	}
	p := f.auditPayloads("tool.validate", fixed)
	if len(p) != 1 || p[0]["from"] != "invalid" || p[0]["definition_hash"] != "hash-fixed" {
		t.Errorf("audit %v", p)
	}
	v, ok, err := f.svc.LatestValidation(f.ctx, it)
	if err != nil || !ok || !v.Success || v.ValidatedBy != "alice" || v.DefinitionHash != "hash-fixed" || !json.Valid(v.Findings) {
		t.Errorf("latest validation: %+v %v %v", v, ok, err)
	}

	it, err = f.svc.Revalidate(f.ctx, alice, broken)
	if err != nil {
		t.Fatal(err)
	}
	if it.Status != "invalid" || deref(it.ValidationWorst) != "error" {
		t.Errorf("broken: %s %v", it.Status, it.ValidationWorst)
	}
	v, ok, _ = f.svc.LatestValidation(f.ctx, it)
	if !ok || v.Success || deref(v.Worst) != "error" || !strings.Contains(string(v.Findings), "description_missing") {
		t.Errorf("broken validation: %+v", v)
	}
	if p := f.auditPayloads("tool.validate", broken); len(p) != 1 || p[0]["worst"] != "error" || p[0]["findings"].(float64) < 1 {
		t.Errorf("broken audit %v", p)
	}

	// An enabled tool stays enabled, with the findings recorded; they block a later enable.
	it, err = f.svc.Revalidate(f.ctx, bob, brokenEnabled)
	if err != nil {
		t.Fatal(err)
	}
	if it.Status != "enabled" || deref(it.ValidationWorst) != "error" || len(f.history(brokenEnabled)) != 0 {
		t.Errorf("enabled: %s %v %v", it.Status, it.ValidationWorst, f.history(brokenEnabled))
	}
	f.setEnabled([]string{brokenEnabled}, false, "", false)
	if out := f.setEnabled([]string{brokenEnabled}, true, "", false); out[0].Err() == nil {
		t.Errorf("re-enabling a tool with error findings without an override worked")
	}

	// A validation of another definition is not the latest of this one.
	f.exec(`UPDATE mcp_tools SET definition_hash = 'hash-new' WHERE id = $1`, fixed)
	if _, ok, err := f.svc.LatestValidation(f.ctx, f.get(fixed)); ok || err != nil {
		t.Errorf("validation of an old definition counted: %v %v", ok, err)
	}
	// Validating twice: the latest wins.
	if _, err := f.svc.Revalidate(f.ctx, bob, fixed); err != nil {
		t.Fatal(err)
	}
	if v, ok, _ := f.svc.LatestValidation(f.ctx, f.get(fixed)); !ok || v.ValidatedBy != "bob" || v.DefinitionHash != "hash-new" {
		t.Errorf("latest after the new hash: %+v", v)
	}
	if _, err := f.svc.Revalidate(f.ctx, alice, uuid.NewString()); !errors.Is(err, tools.ErrNotFound) {
		t.Errorf("unknown: %v", err)
	}
}

// TestDiscoveredTools runs the service over tools the registry discovered and validated.
func TestDiscoveredTools(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	reg := registry.New(f.pool, f.keys, nil)
	sv, err := reg.CreateServer(f.ctx, audit.System, registry.Spec{Name: "disc", Type: registry.TypeStdio, Command: "npx", Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	def := func(name, description, schema, annotations string) registry.ToolDef {
		d := registry.ToolDef{Name: name, Description: description, InputSchema: json.RawMessage(schema)}
		m := map[string]any{"name": name, "description": description, "inputSchema": json.RawMessage(schema)}
		if annotations != "" {
			d.Annotations = json.RawMessage(annotations)
			m["annotations"] = d.Annotations
		}
		d.Raw, _ = json.Marshal(m)
		return d
	}
	_, err = reg.ApplyDiscovery(f.ctx, sv.ID, registry.Discovery{Trigger: "connect", Actor: audit.System, StartedAt: time.Now(), Pages: 1,
		Tools: []registry.ToolDef{
			def("read_file", "Reads a file from the workspace and returns its text.",
				`{"type":"object","properties":{"path":{"type":"string","description":"The file to read."}},"required":["path"]}`,
				`{"readOnlyHint":true}`),
			def("nodesc", "", `{"type":"object"}`, ""),
		}})
	if err != nil {
		t.Fatal(err)
	}
	items := f.listAll(tools.Query{Server: "disc"})
	if len(items) != 2 {
		t.Fatalf("listed %d tools", len(items))
	}
	byName := map[string]tools.Item{}
	for _, it := range items {
		byName[it.Name] = it
	}
	rf, nd := byName["read_file"], byName["nodesc"]
	if rf.Status != "validated" || nd.Status != "invalid" || deref(nd.ValidationWorst) != "error" {
		t.Fatalf("statuses %s %s", rf.Status, nd.Status)
	}
	if rf.Risk().Level != "medium" { // read-only, but the server is not trusted
		t.Errorf("read_file risk %s", rf.Risk().Level)
	}
	if got := f.listAll(tools.Query{Q: "read file", Risk: "medium"}); len(got) != 1 || got[0].ID != rf.ID {
		t.Errorf("search: %v", names(got))
	}
	v, ok, err := f.svc.LatestValidation(f.ctx, rf)
	if err != nil || !ok || !v.Success || v.ValidatedBy != "system" {
		t.Errorf("discovery's validation: %+v %v %v", v, ok, err)
	}
	// Configure, enable, and an invalid one only with an override.
	it := f.update(rf.ID, tools.Patch{Params: map[string]tools.ParamInput{"path": fixedText("/srv/notes.txt")}})
	if it.Status != "configured" {
		t.Errorf("after configuring: %s", it.Status)
	}
	out := f.setEnabled([]string{rf.ID, nd.ID}, true, "", false)
	for _, o := range out {
		switch o.ID {
		case rf.ID:
			if o.Err() != nil || o.To != "enabled" {
				t.Errorf("read_file: %+v", o)
			}
		case nd.ID:
			if !errors.Is(o.Err(), toolstate.ErrOverrideRequired) {
				t.Errorf("nodesc: %+v", o)
			}
		}
	}
	if h := f.history(rf.ID); !slices.Equal(h, []string{"→discovered", "discovered→validating", "validating→validated",
		"validated→configured", "configured→enabled"}) {
		t.Errorf("history %v", h)
	}
	r, err := f.svc.Resolve(rf.ID, f.config(rf.ID))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Merge(map[string]json.RawMessage{"path": json.RawMessage(`"/etc/passwd"`)}); err == nil {
		t.Errorf("a caller overrode the fixed path")
	} else {
		var ve *verr.Error
		if !errors.As(err, &ve) || ve.For("/path") == "" {
			t.Errorf("merge error %v does not name /path", err)
		}
	}
}

// TestBulkTagWithConcurrentChanges: a bulk tag racing single-tool changes (settings,
// enable/disable) of the same tools never deadlocks: every call succeeds.
func TestBulkTagWithConcurrentChanges(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var ids []string
	for i := range 4 {
		ids = append(ids, f.toolIn(fmt.Sprintf("t%d", i), "enabled"))
	}
	slices.Sort(ids)
	last := ids[len(ids)-1]
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	record := func(err error) {
		if err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
	}
	for i := range 30 {
		wg.Add(3)
		go func() {
			defer wg.Done()
			_, err := f.svc.Tag(f.ctx, alice, ids, []string{"hot"}, i%2 == 1)
			record(err)
		}()
		go func() {
			defer wg.Done()
			_, err := f.svc.Update(f.ctx, bob, last, tools.Patch{TimeoutMS: ptr(1000 + i)})
			record(err)
		}()
		go func() {
			defer wg.Done()
			_, err := f.svc.SetEnabled(f.ctx, bob, []string{ids[len(ids)-2]}, i%2 == 1, "", false)
			record(err)
		}()
		wg.Wait()
	}
	for _, err := range errs {
		t.Errorf("concurrent change failed: %v", err)
	}
	if n := f.version(last); n < 30 {
		t.Errorf("last tool at version %d, want every change recorded", n)
	}
}

// TestCategoryAutoEnableOnAssign: discovery stores new tools without a category, so an
// auto-enable category acts when a person puts a validated tool in it that was never
// enabled: enabled by the system, in the same change, with history and audit naming the
// category. A tool a person disabled before, an invalid one, or one put in a category
// without auto-enable stays as it is.
func TestCategoryAutoEnableOnAssign(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	reg := registry.New(f.pool, f.keys, nil)
	sv, err := reg.CreateServer(f.ctx, audit.System, registry.Spec{Name: "cats", Type: registry.TypeStdio, Command: "npx", Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	def := func(name, description string) registry.ToolDef {
		schema := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"The file to read."}},"required":["path"]}`)
		d := registry.ToolDef{Name: name, Description: description, InputSchema: schema}
		d.Raw, _ = json.Marshal(map[string]any{"name": name, "description": description, "inputSchema": schema})
		return d
	}
	discover := func(defs ...registry.ToolDef) {
		t.Helper()
		if _, err := reg.ApplyDiscovery(f.ctx, sv.ID, registry.Discovery{Trigger: "manual", Actor: audit.System,
			StartedAt: time.Now(), Pages: 1, Tools: defs}); err != nil {
			t.Fatal(err)
		}
	}
	readDef, toggledDef := def("read_file", "Reads a file from the workspace and returns its text."),
		def("toggled", "Reads a file from the workspace and returns its first line.")
	discover(readDef, toggledDef, registry.ToolDef{Name: "nodesc", InputSchema: json.RawMessage(`{"type":"object"}`)})
	byName := map[string]string{}
	for _, it := range f.listAll(tools.Query{Server: "cats"}) {
		byName[it.Name] = it.ID
	}
	rf, toggled, nd := byName["read_file"], byName["toggled"], byName["nodesc"]
	// A person enables and disables toggled; its definition changes: validated again,
	// and left for a person to decide.
	f.setEnabled([]string{toggled}, true, "", false)
	f.setEnabled([]string{toggled}, false, "noisy", false)
	discover(readDef, def("toggled", "Reads a file from the workspace and returns its first line, trimmed."),
		registry.ToolDef{Name: "nodesc", InputSchema: json.RawMessage(`{"type":"object"}`)})
	for id, want := range map[string]string{rf: "validated", toggled: "validated", nd: "invalid"} {
		if got := f.status(id); got != want {
			t.Fatalf("tool %s after discovery: %s, want %s", id, got, want)
		}
	}
	if _, err := f.svc.SaveCategory(f.ctx, alice, "", tools.CategoryInput{Name: "plain"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.SaveCategory(f.ctx, alice, "", tools.CategoryInput{Name: "reading", AutoEnable: true}); err != nil {
		t.Fatal(err)
	}

	if it := f.update(rf, tools.Patch{Category: ptr("plain")}); it.Status != "validated" {
		t.Errorf("read_file put in a category without auto-enable: %s, want validated", it.Status)
	}
	it := f.update(rf, tools.Patch{Category: ptr("reading")})
	if it.Status != "enabled" || f.status(rf) != "enabled" {
		t.Fatalf("read_file put in the auto-enable category: %s, want enabled", it.Status)
	}
	if h := f.history(rf); !slices.Equal(h, []string{"→discovered", "discovered→validating", "validating→validated", "validated→enabled"}) {
		t.Errorf("history of read_file: %v", h)
	}
	if by := f.str(`SELECT actor || ': ' || reason FROM tool_state_history WHERE tool_id = $1 ORDER BY id DESC LIMIT 1`, rf); !strings.Contains(by, "system: enabled by the auto-enable policy of category reading") {
		t.Errorf("the enable's history row: %q", by)
	}
	p := f.auditPayloads("tool.enable", rf)
	if len(p) != 1 || p[0]["policy"] != "category" || p[0]["category"] != "reading" {
		t.Errorf("tool.enable audit rows of read_file: %v, want one naming the category's policy", p)
	}
	if actor := f.str(`SELECT actor_kind || '/' || actor_name FROM audit_log WHERE action = 'tool.enable' AND target_id = $1`, rf); actor != "system/system" {
		t.Errorf("read_file enabled by %s, want the system", actor)
	}
	if n := len(f.auditPayloads("tool.configure", rf)); n != 2 {
		t.Errorf("%d tool.configure audit rows of read_file, want 2 (the two category changes)", n)
	}

	for id, want := range map[string]string{toggled: "validated", nd: "invalid"} {
		if it := f.update(id, tools.Patch{Category: ptr("reading")}); it.Status != want {
			t.Errorf("tool %s put in the auto-enable category: %s, want %s", id, it.Status, want)
		}
		if p := f.auditPayloads("tool.enable", id); id == nd && len(p) != 0 || id == toggled && len(p) != 1 {
			t.Errorf("tool %s: tool.enable audit rows %v (the person's only)", id, p)
		}
	}
}
