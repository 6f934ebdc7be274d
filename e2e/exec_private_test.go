package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/risk"
)

// A built-in step's result is rendered per viewer (the live fragment, shared by every
// page that follows the execution, withholds it): the requester's open page shows the
// result of her memory list as it finishes, with no reload, and another tool user's open
// page says it is withheld.
func TestBrowserBuiltinResultLive(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	srv.App.Enable(t, "builtin__memory_operations")
	srv.App.SetRisk(t, "builtin__memory_operations", risk.Low)
	srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	srv.CreateUser(t, "bob", auth.RoleToolUser, "bob-password-12")
	alice := webtest.API{T: t, Srv: srv, C: srv.Login(t, "alice", "alice-password-1")}
	alice.JSON(http.MethodPost, "/api/v1/tools/call", map[string]any{"tool": "builtin__memory_operations",
		"arguments": map[string]any{"operation": "store", "content": "the vault opens with 4711"}}, 200, nil)
	// Medium: the plan waits for alice's confirmation while both pages are open.
	srv.App.SetRisk(t, "builtin__memory_operations", risk.Medium)
	var ex struct {
		ID       string `json:"id"`
		Status   string `json:"status"`
		PlanHash string `json:"plan_hash"`
	}
	alice.JSON(http.MethodPost, "/api/v1/executions", map[string]any{"plan": map[string]any{"steps": []any{
		map[string]any{"tool": "builtin__memory_operations.list", "arguments": map[string]any{}}}}}, 201, &ex)
	if ex.Status != "awaiting_approval" {
		t.Fatalf("the plan is %s, want awaiting_approval", ex.Status)
	}

	pages, docs := openExecLive(t, srv, ex.ID)

	alice.JSON(http.MethodPost, "/api/v1/executions/"+ex.ID+"/confirm", map[string]any{"plan_hash": ex.PlanHash}, 200, nil)
	const result = `document.querySelector("[data-testid=step-result]")`
	pages["alice"].waitJS("alice's page shows her note in the step's result",
		result+`?.textContent.includes("the vault opens with 4711") ?? false`)
	pages["bob"].waitJS("bob's page says the result is withheld",
		result+`?.querySelector("[data-testid=result-withheld]") != null`)
	for name, b := range pages {
		b.waitJS(name+"'s page shows the execution finished", `document.querySelector("[data-testid=execution-status]")?.dataset.status === "success"`)
		if got := b.execDocNo(); got != docs[name] {
			t.Errorf("%s's page was reloaded (document %d, was %d)", name, got, docs[name])
		}
		b.checkConsole()
	}
	if eval[bool](pages["bob"], `document.body.textContent.includes("4711")`) {
		t.Error("bob's page shows alice's note")
	}
}

// A built-in file write's preview diff shows the requester's file: once the plan is
// decided, the live fragment every open page shares leaves it out and each page asks
// for its preview as its viewer. The requester's page keeps the diff, another tool
// user's (who could read it while he could approve) says it is withheld, with no reload.
func TestBrowserPreviewDiffLive(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	srv.App.Enable(t, "builtin__file_operations")
	srv.App.SetRisk(t, "builtin__file_operations", risk.Medium)
	ws, err := srv.App.Builtin.Workspace("conv-diff")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "settings.txt"), []byte("vault=plum-Falcon-58\nmode=dev\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	srv.CreateUser(t, "bob", auth.RoleToolUser, "bob-password-12")
	alice := webtest.API{T: t, Srv: srv, C: srv.Login(t, "alice", "alice-password-1")}
	var ex struct {
		ID       string `json:"id"`
		Status   string `json:"status"`
		PlanHash string `json:"plan_hash"`
	}
	alice.JSON(http.MethodPost, "/api/v1/executions", map[string]any{"conversation_id": "conv-diff", "plan": map[string]any{"steps": []any{
		map[string]any{"tool": "builtin__file_operations.replace_string",
			"arguments": map[string]any{"filePath": "settings.txt", "oldString": "mode=dev", "newString": "mode=prod"}}}}}, 201, &ex)
	if ex.Status != "awaiting_approval" {
		t.Fatalf("the plan is %s, want awaiting_approval", ex.Status)
	}
	const diff = `document.querySelector("[data-testid=action-preview] [data-testid=step-diff]")`
	pages, docs := openExecLive(t, srv, ex.ID)
	for name, b := range pages {
		b.waitJS(name+"'s page shows the diff while the plan awaits approval", diff+` != null`)
	}

	alice.JSON(http.MethodPost, "/api/v1/executions/"+ex.ID+"/confirm", map[string]any{"plan_hash": ex.PlanHash}, 200, nil)
	for name, b := range pages {
		b.waitJS(name+"'s page shows the execution finished", `document.querySelector("[data-testid=execution-status]")?.dataset.status === "success"`)
	}
	pages["alice"].waitJS("alice's page shows the diff", diff+`?.textContent.includes("plum-Falcon") ?? false`)
	pages["bob"].waitJS("bob's page says the change is withheld",
		`document.querySelector("[data-testid=action-preview] [data-testid=step-diff-withheld]") != null`)
	for name, b := range pages {
		if got := b.execDocNo(); got != docs[name] {
			t.Errorf("%s's page was reloaded (document %d, was %d)", name, got, docs[name])
		}
		b.checkConsole()
	}
	if eval[bool](pages["bob"], `document.body.textContent.includes("plum-Falcon")`) {
		t.Error("bob's page shows alice's file")
	}
}

// openExecLive opens execution id's page as alice and as bob (users the test made with
// these passwords), each in a browser of its own, once live; docs are the pages'
// document numbers (execDocNo), to tell a reload later.
func openExecLive(t *testing.T, srv *webtest.Server, id string) (pages map[string]*browser, docs map[string]int) {
	t.Helper()
	pages, docs = map[string]*browser{}, map[string]int{}
	for _, who := range []struct{ name, password string }{{"alice", "alice-password-1"}, {"bob", "bob-password-12"}} {
		b := newExecBrowser(t)
		b.login(srv, who.name, who.password)
		b.do(who.name+" opens the execution", chromedp.Navigate(srv.URL+"/executions/"+id),
			chromedp.WaitVisible(chromedp.CSS(`[data-testid=execution-page]`)))
		b.waitJS(who.name+"'s page is live", `document.querySelector("[data-live-label]")?.textContent === "Live"`)
		pages[who.name], docs[who.name] = b, b.execDocNo()
	}
	return pages, docs
}
