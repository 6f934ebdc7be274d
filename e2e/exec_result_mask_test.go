package e2e

import (
	"net/http"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/risk"
)

// An upstream step's result is masked in the live fragment every open page shares:
// the requester's open page shows the token her tool answered with as the step ends,
// with no reload, and another tool user's open page shows it masked.
func TestBrowserStepResultMaskedLive(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	srv.LiveServer(t, "mt", true, "fail")
	// Medium: the plan waits for alice's confirmation while both pages are open.
	srv.App.SetRisk(t, "mt__fail", risk.Medium)
	srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	srv.CreateUser(t, "bob", auth.RoleToolUser, "bob-password-12")
	alice := webtest.API{T: t, Srv: srv, C: srv.Login(t, "alice", "alice-password-1")}
	const token = "ghp_Z7c3Kq9Wm2Xv5Bn8Lp4Rt6Yh1Df0Gs3Ja9Uu"
	var ex struct {
		ID       string `json:"id"`
		Status   string `json:"status"`
		PlanHash string `json:"plan_hash"`
	}
	alice.JSON(http.MethodPost, "/api/v1/executions", map[string]any{"plan": map[string]any{"steps": []any{
		map[string]any{"tool": "mt__fail", "arguments": map[string]any{"message": "bad credentials " + token}}}}}, 201, &ex)
	if ex.Status != "awaiting_approval" {
		t.Fatalf("the plan is %s, want awaiting_approval", ex.Status)
	}

	pages, docs := openExecLive(t, srv, ex.ID)

	alice.JSON(http.MethodPost, "/api/v1/executions/"+ex.ID+"/confirm", map[string]any{"plan_hash": ex.PlanHash}, 200, nil)
	const result = `document.querySelector("[data-testid=step-result] [data-testid=output-0]")`
	pages["alice"].waitJS("alice's page shows the token in the step's result",
		result+`?.textContent.includes("`+token+`") ?? false`)
	pages["bob"].waitJS("bob's page shows the step's result masked",
		result+`?.textContent.includes("bad credentials") ?? false`)
	for name, b := range pages {
		b.waitJS(name+"'s page shows the execution failed", `document.querySelector("[data-testid=execution-status]")?.dataset.status === "failed"`)
		if got := b.execDocNo(); got != docs[name] {
			t.Errorf("%s's page was reloaded (document %d, was %d)", name, got, docs[name])
		}
		b.checkConsole()
	}
	if eval[bool](pages["bob"], `document.body.innerHTML.includes("`+token+`")`) {
		t.Error("bob's page shows alice's token")
	}
}
