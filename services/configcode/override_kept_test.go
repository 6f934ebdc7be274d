package configcode_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// A file that changes or removes the override reason of a tool enabled already with an
// override plans no change (there is no enable to give the reason to) and names the
// override under not applied, instead of ignoring it unseen. The tool keeps its reason.
func TestOverrideOfEnabledToolChangedIsReported(t *testing.T) {
	t.Parallel()
	hs := liveServer(t)
	a := source(t, hs)
	file := export(t, a)
	for _, tc := range []struct{ name, file, want string }{
		{"changed", strings.Replace(file, "override: test\n", "override: reviewed again by the security team\n", 1),
			`the tool is enabled with the override "test"; the file's "reviewed again by the security team" was not applied`},
		{"removed", strings.Replace(file, "    override: test\n", "", 1),
			`the file gives no override, but the tool is enabled with one ("test"): an import does not remove it`},
	} {
		if tc.file == file {
			t.Fatalf("%s: the export has no override of ev__shady:\n%s", tc.name, file)
		}
		pl := plan(t, a, "config.yaml", tc.file)
		if pl.HasErrors() || !pl.Empty() {
			t.Fatalf("%s: plan, want no change:\n%s", tc.name, pl)
		}
		got := fmt.Sprint(pl.Unapplied)
		if len(pl.Unapplied) != 1 || !strings.Contains(got, "tools.ev__shady.override") || !strings.Contains(got, tc.want) ||
			!strings.Contains(got, "on the tool's page") {
			t.Errorf("%s: not applied %s, want the override: %s", tc.name, got, tc.want)
		}
		res, err := a.ConfigCode.Apply(context.Background(), admin, pl)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Unapplied) != 1 {
			t.Errorf("%s: not applied after the import: %v", tc.name, res.Unapplied)
		}
		if now := a.Settled(t, "ev__shady"); now.Status != "enabled" || now.EnableOverride == nil || *now.EnableOverride != "test" {
			t.Errorf("%s: ev__shady after the import: %s, override %v; want enabled with \"test\"", tc.name, now.Status, now.EnableOverride)
		}
	}
	// The file as exported names nothing.
	if pl := plan(t, a, "config.yaml", file); !pl.Empty() || len(pl.Unapplied) > 0 {
		t.Errorf("the export itself plans:\n%s", pl)
	}
}
