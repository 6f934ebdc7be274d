package configcode_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/configcode"
)

// importNotApplied is the not_applied of each config.import entry, oldest first.
func importNotApplied(t *testing.T, a *apptest.App) []string {
	t.Helper()
	rows, err := a.Pool.Query(context.Background(), `SELECT payload->>'server_changes' || ':' || (payload->>'not_applied')
		FROM audit_log WHERE action = 'config.import' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// The config.import entry counts what the apply itself refused as not applied, beside
// what the plan showed: here an unpinned enable refused under the row lock (the server
// redefined the tool after the plan) and a permission of a user that does not exist.
func TestImportSummaryCountsApplyRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := startPinned(t)
	a := p.a
	cur := a.Enable(t, "s__t")
	if outs, err := a.Tools.SetEnabled(ctx, admin, []string{cur.ID}, false, "not today", false); err != nil || outs[0].Err() != nil {
		t.Fatalf("disable: %v %v", err, outs)
	}
	file := "version: 1\nservers: []\ntools:\n  - tool: s__t\n    state: enabled\n    risk: high\n    permissions: {nobody: true}\n"
	pl := plan(t, a, "config.yaml", file)
	if pl.HasErrors() || len(pl.Unapplied) != 1 || !strings.Contains(pl.String(), "state: disabled → enabled") {
		t.Fatalf("plan:\n%s", pl)
	}
	a.Enable(t, "s__t")
	p.redefine(t)
	pl.DropBaseForTest()
	res, err := a.ConfigCode.Apply(ctx, admin, pl)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Unapplied) != 2 || !strings.Contains(fmt.Sprint(res.Unapplied), "tools.s__t.state") {
		t.Fatalf("not applied: %v, want the permission and the state", res.Unapplied)
	}
	if got := importNotApplied(t, a); fmt.Sprint(got) != "[0:2]" {
		t.Errorf("config.import entries (server_changes:not_applied) %v, want [0:2]", got)
	}
}

// Each transaction's config.import entry counts what it left out: the second (the tools
// of the servers the import discovered) counts what was found not to apply after
// discovery, which before was always 0.
func TestImportSummaryOfDiscoveredServersCountsNotApplied(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "x"})
	a := apptest.Start(t, nil)
	file := "version: 1\nservers:\n  - name: x\n    type: streamable_http\n    url: " + hs.URL() + "\n    enabled: true\n" +
		"tools:\n  - tool: x__echo\n    risk: high\n    permissions: {nobody: true}\n"
	pl := plan(t, a, "config.yaml", file)
	if pl.HasErrors() || len(pl.Unapplied) != 0 || pl.Count(configcode.KindTool, configcode.ActionPending) != 1 {
		t.Fatalf("plan:\n%s", pl)
	}
	res, err := a.ConfigCode.Apply(ctx, admin, pl)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Unapplied) != 1 || !strings.Contains(fmt.Sprint(res.Unapplied), "tools.x__echo.permissions.nobody") {
		t.Fatalf("not applied: %v, want the permission", res.Unapplied)
	}
	if got := importNotApplied(t, a); fmt.Sprint(got) != "[1:0 0:1]" {
		t.Errorf("config.import entries (server_changes:not_applied) %v, want [1:0 0:1]", got)
	}
}
