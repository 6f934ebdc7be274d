package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/risk"
)

// A tool manager's Reset keeps a risk level above the annotations' (clearing it would
// lower the risk, which takes tool.override) and says so; an administrator's clears it.
func TestResetKeepsARaisedRiskAndSaysSo(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	srv.LiveServer(t, "v", true, "echo")
	srv.App.SetRisk(t, "v__echo", risk.High)
	id := srv.ToolID(t, "v__echo")
	srv.CreateUser(t, "mgr", auth.RoleToolManager, "a long enough password 1")
	reset := func(c *http.Client) string {
		res := srv.PostForm(t, c, "/tools/"+id+"/reset", nil)
		res.Body.Close()
		if res.StatusCode != http.StatusSeeOther {
			t.Fatalf("reset: %d", res.StatusCode)
		}
		return page(t, srv.Get(t, c, res.Header.Get("Location"))).Find("[data-testid=flash]").Text()
	}
	flash := reset(srv.Login(t, "mgr", "a long enough password 1"))
	it, err := srv.Tools.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if it.RiskOverride == nil || *it.RiskOverride != "high" || !strings.Contains(flash, "high risk level stays") {
		t.Fatalf("a tool manager's reset: level %v, flash %q; want high kept and said", it.RiskOverride, flash)
	}
	flash = reset(srv.Login(t, "admin", webtest.AdminPassword))
	if it, _ = srv.Tools.Get(context.Background(), id); it.RiskOverride != nil || strings.Contains(flash, "stays") {
		t.Fatalf("an administrator's reset: level %v, flash %q; want none", it.RiskOverride, flash)
	}
}
