package configcode_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// oldExport is an export as written before definition_hash: the same text without it.
func oldExport(t *testing.T, file string) string {
	t.Helper()
	old := regexp.MustCompile(`(?m)^ *definition_hash: .*\n`).ReplaceAllString(file, "")
	if strings.Contains(old, "    definition_hash: ") {
		t.Fatalf("the old-style export still has a definition_hash:\n%s", old)
	}
	return old
}

// A backup written before definition_hash has override: beside state: enabled for an
// overridden tool, and no hash. Restoring it applies its servers, categories, settings
// and the tool's other settings; that tool's state and override alone are reported as
// not applied, saying how to pin them. Before, the file was refused whole at parse.
func TestOldOverrideWithoutHashAppliesTheRest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := startPinned(t)
	a := p.a
	base := export(t, a)
	if !strings.Contains(base, "approval_ttl_seconds: ") || !strings.Contains(base, "\n  - name: s\n") {
		t.Fatalf("the export lacks the settings or server s:\n%s", base)
	}
	file := regexp.MustCompile(`approval_ttl_seconds: \d+`).ReplaceAllString(base, "approval_ttl_seconds: 1234")
	file = strings.Replace(file, "\n  - name: s\n", "\n  - name: s\n    description: restored from a backup\n", 1)
	file += "categories:\n  - name: restored\n    description: from the backup\n" +
		"tools:\n  - tool: s__t\n    state: enabled\n    override: checked by hand\n    risk: high\n    category: restored\n"
	file = oldExport(t, file)
	pl := plan(t, a, "backup.yaml", file)
	if pl.HasErrors() {
		t.Fatalf("plan has errors:\n%s", pl)
	}
	if strings.Contains(pl.String(), "validated → enabled") {
		t.Errorf("the plan enables s__t, whose override pins no definition:\n%s", pl)
	}
	got := fmt.Sprint(pl.Unapplied)
	for _, want := range []string{"tools.s__t.override", "needs definition_hash beside it", "export the tool again",
		"copy the hash from the tool's page", "state and override were not applied", "stays validated"} {
		if !strings.Contains(got, want) {
			t.Errorf("not applied lacks %q: %s", want, got)
		}
	}
	if len(pl.Unapplied) != 1 {
		t.Errorf("not applied: %v, want the one override", pl.Unapplied)
	}
	res, err := a.ConfigCode.Apply(ctx, admin, pl)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Unapplied) != 1 || res.Unapplied[0].Field != "tools.s__t.override" {
		t.Errorf("not applied after the import: %v", res.Unapplied)
	}
	now := a.Settled(t, "s__t")
	if now.Status != "validated" || now.EnableOverride != nil {
		t.Errorf("s__t after the import: %s, override %v; want validated, none", now.Status, now.EnableOverride)
	}
	if now.RiskOverride == nil || *now.RiskOverride != "high" || now.Category == nil || *now.Category != "restored" {
		t.Errorf("s__t's risk %v and category %v after the import, want high and restored (the rest of the tool applies)", now.RiskOverride, now.Category)
	}
	after := export(t, a)
	for _, want := range []string{"approval_ttl_seconds: 1234", "description: restored from a backup", "name: restored"} {
		if !strings.Contains(after, want) {
			t.Errorf("the export after the import lacks %q (the rest of the file applies):\n%s", want, after)
		}
	}
}

// An export of an enabled tool from before definition_hash (state: enabled alone),
// re-applied after its server redefined the tool (discovery moved it enabled →
// updating → validated), leaves it validated, and the plan says why, naming the current
// version. Before, the unpinned enable put the new definition in service unreviewed.
func TestUnpinnedEnableOfRedefinedToolRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := startPinned(t)
	a := p.a
	a.Enable(t, "s__t")
	file := oldExport(t, strings.Replace(export(t, a), "tool: s__t\n", "tool: s__t\n    risk: high\n", 1))
	if !strings.Contains(file, "tool: s__t\n    risk: high\n    state: enabled\n") {
		t.Fatalf("the export does not enable s__t:\n%s", file)
	}
	after := p.redefine(t)
	if after.Status != "validated" {
		t.Fatalf("s__t after rediscovery: %s, want validated", after.Status)
	}
	pl := plan(t, a, "config.yaml", file)
	if pl.HasErrors() || strings.Contains(pl.String(), "validated → enabled") {
		t.Fatalf("plan, want no enable:\n%s", pl)
	}
	got := fmt.Sprint(pl.Unapplied)
	for _, want := range []string{"tools.s__t.state", "redefined the tool since it was last enabled here", "definition changed",
		"does not pin a definition", "stays validated at definition v" + after.Version(), "Review definition v" + after.Version() + " on the tool's page",
		"definition_hash"} {
		if !strings.Contains(got, want) {
			t.Errorf("not applied lacks %q: %s\nplan:\n%s", want, got, pl)
		}
	}
	if _, err := a.ConfigCode.Apply(ctx, admin, pl); err != nil {
		t.Fatal(err)
	}
	now := a.Settled(t, "s__t")
	if now.Status != "validated" {
		t.Fatalf("s__t after the import: %s, want validated (its new definition was never reviewed)", now.Status)
	}
	if now.RiskOverride == nil || *now.RiskOverride != "high" {
		t.Errorf("s__t's risk after the import: %v, want high (the rest of the file applies)", now.RiskOverride)
	}
}

// A tool a person disabled is enabled by a file that pins no definition, as before
// definition_hash: its definition is the one it was last enabled with. An earlier
// redefinition, reviewed and enabled again since, does not count.
func TestUnpinnedEnableOfDisabledToolApplies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := startPinned(t)
	a := p.a
	a.Enable(t, "s__t")
	if got := p.redefine(t); got.Status != "validated" {
		t.Fatalf("s__t after rediscovery: %s, want validated", got.Status)
	}
	cur := a.Enable(t, "s__t") // reviewed, enabled again
	if outs, err := a.Tools.SetEnabled(ctx, admin, []string{cur.ID}, false, "not today", false); err != nil || outs[0].Err() != nil {
		t.Fatalf("disable: %v %v", err, outs)
	}
	file := "version: 1\nservers: []\ntools:\n  - tool: s__t\n    state: enabled\n"
	pl := plan(t, a, "config.yaml", file)
	if pl.HasErrors() || len(pl.Unapplied) > 0 || !strings.Contains(pl.String(), "state: disabled → enabled (definition v"+cur.Version()+" not pinned by the file)") {
		t.Fatalf("plan:\n%s", pl)
	}
	if _, err := a.ConfigCode.Apply(ctx, admin, pl); err != nil {
		t.Fatal(err)
	}
	if now := a.Settled(t, "s__t"); now.Status != "enabled" {
		t.Fatalf("s__t after the import: %s, want enabled", now.Status)
	}
}

// The unpinned check is made again by the apply under the tool's row lock: a tool a
// person disabled when the plan was made, enabled and then redefined upstream before
// the apply, is not enabled by the file, even when the whole-plan check (unchanged)
// compares nothing.
func TestUnpinnedEnableRecheckedAtApply(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := startPinned(t)
	a := p.a
	cur := a.Enable(t, "s__t")
	if outs, err := a.Tools.SetEnabled(ctx, admin, []string{cur.ID}, false, "not today", false); err != nil || outs[0].Err() != nil {
		t.Fatalf("disable: %v %v", err, outs)
	}
	file := "version: 1\nservers: []\ntools:\n  - tool: s__t\n    state: enabled\n    risk: high\n"
	pl := plan(t, a, "config.yaml", file)
	if pl.HasErrors() || len(pl.Unapplied) > 0 || !strings.Contains(pl.String(), "state: disabled → enabled") {
		t.Fatalf("plan:\n%s", pl)
	}
	a.Enable(t, "s__t")
	after := p.redefine(t)
	if after.Status != "validated" {
		t.Fatalf("s__t after rediscovery: %s, want validated", after.Status)
	}
	pl.DropBaseForTest()
	res, err := a.ConfigCode.Apply(ctx, admin, pl)
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(res.Unapplied)
	if !strings.Contains(got, "tools.s__t.state") || !strings.Contains(got, "stays validated at definition v"+after.Version()) {
		t.Errorf("not applied: %s, want the state, naming the current version", got)
	}
	now := a.Settled(t, "s__t")
	if now.Status != "validated" {
		t.Fatalf("s__t after the import: %s, want validated (its new definition was never reviewed)", now.Status)
	}
	if now.RiskOverride == nil || *now.RiskOverride != "high" {
		t.Errorf("s__t's risk after the import: %v, want high", now.RiskOverride)
	}
}

// A tool enabled, then disabled by a person, then redefined upstream while disabled
// (discovery moved it disabled → updating → validated) is not enabled by a file that
// pins no definition: the new definition was never reviewed, though the tool's last
// move out of enabled was the person's. Before, only that move was looked at.
func TestUnpinnedEnableOfToolRedefinedWhileDisabledRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := startPinned(t)
	a := p.a
	cur := a.Enable(t, "s__t")
	file := oldExport(t, export(t, a))
	if !strings.Contains(file, "tool: s__t\n    state: enabled\n") {
		t.Fatalf("the export does not enable s__t:\n%s", file)
	}
	if outs, err := a.Tools.SetEnabled(ctx, admin, []string{cur.ID}, false, "suspicious", false); err != nil || outs[0].Err() != nil {
		t.Fatalf("disable: %v %v", err, outs)
	}
	after := p.redefine(t)
	if after.Status != "validated" || after.Version() == cur.Version() {
		t.Fatalf("s__t after rediscovery: %s v%s, want validated at a new version (was v%s)", after.Status, after.Version(), cur.Version())
	}
	pl := plan(t, a, "config.yaml", file)
	if pl.HasErrors() || strings.Contains(pl.String(), "validated → enabled") {
		t.Fatalf("plan, want no enable:\n%s", pl)
	}
	got := fmt.Sprint(pl.Unapplied)
	for _, want := range []string{"tools.s__t.state", "redefined the tool since it was last enabled here", "definition changed",
		"stays validated at definition v" + after.Version()} {
		if !strings.Contains(got, want) {
			t.Errorf("not applied lacks %q: %s\nplan:\n%s", want, got, pl)
		}
	}
	res, err := a.ConfigCode.Apply(ctx, admin, pl)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(fmt.Sprint(res.Unapplied), "tools.s__t.state") {
		t.Errorf("not applied after the import: %v, want the state", res.Unapplied)
	}
	if now := a.Settled(t, "s__t"); now.Status != "validated" {
		t.Fatalf("s__t after the import: %s, want validated (its new definition was never reviewed)", now.Status)
	}
}

// The same under the apply's own check: planned while the tool sat disabled at the
// definition it was enabled with, applied after its server redefined it (still never
// enabled again), the file's unpinned enable is refused under the row lock.
func TestUnpinnedEnableRecheckedAtApplyAfterRedefinitionWhileDisabled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := startPinned(t)
	a := p.a
	cur := a.Enable(t, "s__t")
	if outs, err := a.Tools.SetEnabled(ctx, admin, []string{cur.ID}, false, "not today", false); err != nil || outs[0].Err() != nil {
		t.Fatalf("disable: %v %v", err, outs)
	}
	pl := plan(t, a, "config.yaml", "version: 1\nservers: []\ntools:\n  - tool: s__t\n    state: enabled\n")
	if pl.HasErrors() || len(pl.Unapplied) > 0 || !strings.Contains(pl.String(), "state: disabled → enabled") {
		t.Fatalf("plan:\n%s", pl)
	}
	after := p.redefine(t)
	if after.Status != "validated" {
		t.Fatalf("s__t after rediscovery: %s, want validated", after.Status)
	}
	pl.DropBaseForTest()
	res, err := a.ConfigCode.Apply(ctx, admin, pl)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(res.Unapplied); !strings.Contains(got, "tools.s__t.state") || !strings.Contains(got, "stays validated at definition v"+after.Version()) {
		t.Errorf("not applied: %s, want the state, naming the current version", got)
	}
	if now := a.Settled(t, "s__t"); now.Status != "validated" {
		t.Fatalf("s__t after the import: %s, want validated (its new definition was never reviewed)", now.Status)
	}
}
