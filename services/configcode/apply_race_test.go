package configcode_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/configcode"
	"github.com/toolwarden/toolwarden/services/decide"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/tools"
)

// A settings change committed while an import that sets the settings is being applied
// is not overwritten: the import, held on a category row the page is saving, checks the
// settings after it (under their lock) and is refused as changed since its plan; the
// page's change stays.
func TestImportRefusedBySettingsChangedWhileApplying(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := apptest.Start(t, nil)
	must[tools.Category](t)(a.Tools.SaveCategory(ctx, admin, "", tools.CategoryInput{Name: "c1", Description: "old"}))
	file := "version: 1\nservers: []\ncategories:\n  - name: c1\n    description: new\nsettings:\n  approval_ttl_seconds: 7200\n  high_separation: auto\n"
	p := plan(t, a, "c.yaml", file)

	// The category's row held, as a page's save holds it while it writes.
	held, err := a.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Rollback(ctx) }()
	if _, err := held.Exec(ctx, `SELECT 1 FROM tool_categories WHERE name = 'c1' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := a.ConfigCode.Apply(ctx, admin, p); done <- err }()
	deadline := time.Now().Add(30 * time.Second)
	for a.Count(t, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%tool_categories%' AND pid <> pg_backend_pid()`) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the import never waited on the category's row")
		}
		time.Sleep(20 * time.Millisecond)
	}
	always := decide.SeparationAlways
	if _, err := a.Executions.PatchSettings(ctx, audit.Actor{Kind: audit.ActorUser, Name: "other"}, executions.SettingsPatch{HighSeparation: &always}); err != nil {
		t.Fatalf("the settings page's change while the import waits: %v", err)
	}
	if err := held.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, configcode.ErrChangedSincePlan) {
		t.Fatalf("import after the settings changed: %v, want ErrChangedSincePlan", err)
	}
	st, err := a.Executions.Settings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.HighSeparation != decide.SeparationAlways || st.ApprovalTTL == 7200*time.Second {
		t.Fatalf("settings after the refused import: %+v, want the page's change kept and the import's not applied", st)
	}
	if got := testkit.Strings(t, a.Pool, `SELECT description FROM tool_categories WHERE name = 'c1'`); len(got) != 1 || got[0] != "old" {
		t.Fatalf("category after the refused import: %q, want it unchanged", got)
	}
}
