package web_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/decide"
	"github.com/toolwarden/toolwarden/services/risk"
)

// The test panel offers a tool manager a self-approved high-risk run only of a tool
// nobody has enabled yet (its vetting), as the router allows: a tool disabled after use
// needs another approver, so Run is withheld saying so. With separation of duties set to
// always, the vetting run needs another approver too.
func TestTestPanelVettingOnlyBeforeFirstEnable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, nil)
	srv.LiveServer(t, "v", true, "echo")
	srv.App.Settled(t, "v__add")
	srv.App.SetRisk(t, "v__echo", risk.High)
	srv.App.SetRisk(t, "v__add", risk.High)
	echo := srv.App.ToolID(t, "v__echo")
	if outs, err := srv.Tools.SetEnabled(ctx, audit.System, []string{echo}, false, "test", false); err != nil || outs[0].Err() != nil {
		t.Fatalf("disable: %v %v", err, outs)
	}
	srv.Login(t, "admin", webtest.AdminPassword) // another person who may approve (signed in once)
	srv.CreateUser(t, "mgr", auth.RoleToolManager, "a long enough password 1")
	mgr := srv.Login(t, "mgr", "a long enough password 1")
	for _, c := range []struct {
		sep     decide.Separation
		tool    string
		mayRun  bool
		explain string
	}{
		{decide.SeparationAuto, "v__echo", false, "disabled after use"},
		{decide.SeparationAuto, "v__add", true, "never enabled"},
		{decide.SeparationAlways, "v__add", false, "never enabled, separation always"},
	} {
		if err := db.WithTx(ctx, srv.Pool, func(tx pgx.Tx) error {
			return decide.SetSeparation(ctx, tx, c.sep, "test")
		}); err != nil {
			t.Fatal(err)
		}
		doc := page(t, srv.Get(t, mgr, "/tools/"+srv.App.ToolID(t, c.tool)+"/test"))
		cannot := strings.TrimSpace(doc.Find(`[data-testid="cannot-run"]`).Text())
		if got := cannot == ""; got != c.mayRun {
			t.Errorf("%s (%s): Run offered %v, want %v (%q)", c.tool, c.explain, got, c.mayRun, cannot)
		}
		if !c.mayRun && c.sep == decide.SeparationAlways && !strings.Contains(cannot, "enable the tool, then use Ask for approval") {
			t.Errorf("%s (%s): %q, want it to say how to get the run approved", c.tool, c.explain, cannot)
		}
	}
}
