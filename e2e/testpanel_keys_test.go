package e2e

import (
	"strings"
	"testing"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
)

// TestBrowserTestPanelSaveCaseEnterAndInvalidFocus: Enter in the fields of "Save these
// arguments as a test case" saves the case and makes no call (it used to press Run);
// a case the server refuses marks its field invalid and described by the message; and
// arguments refused in the JSON editor mark the box invalid, described by their list,
// with the focus on it after the run (Run, disabled while it ran, had left it on the
// page's body).
func TestBrowserTestPanelSaveCaseEnterAndInvalidFocus(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "mt"})
	ids := enabledLiveTools(t, srv, hs, "mt", "echo")
	echo := ids["echo"]

	b := newBrowser(t)
	if _, err := chromedp.Call(b.ctx, page.AddScriptToEvaluateOnNewDocument,
		page.AddScriptToEvaluateOnNewDocumentParams{Source: panelWatch}); err != nil {
		t.Fatalf("install the page watcher: %v", err)
	}
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("open echo's test panel", chromedp.Navigate(srv.URL+"/tools/"+echo+"/test"))
	b.settled("echo's test panel", `[data-testid=test-workspace] [data-testid=test-result-empty]`)
	// The actions the workspace's form sent: a browser's own submission on Enter would
	// press its first button (Form, mode:form) after the one app.js pressed.
	b.do("record the form's actions", chromedp.Evaluate[chromedp.Void](`window.__actions = [];
		document.addEventListener("htmx:configRequest", e => { if (e.detail.elt.matches(".test-run-form")) window.__actions.push(e.detail.parameters.get ? e.detail.parameters.get("_action") : e.detail.parameters._action); })`))
	actions := func() string { return eval[string](b, `window.__actions.join(",")`) }
	calls := func() int {
		return srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE action LIKE 'tool.call%' AND target_id = $1`, echo)
	}

	// 1. Enter in the case's name with no name: refused, the field marked.
	b.do("open the case's fields and press Enter in the empty name",
		chromedp.SendKeys(chromedp.CSS(`input[name="arg/message"]`), "kept as a case"),
		chromedp.Click(chromedp.CSS(`.save-case summary`)),
		chromedp.Focus(chromedp.ID("case-name")),
		chromedp.KeyEvent(kb.Enter))
	b.waitJS("the case refused", `!!document.querySelector("#case-name[aria-invalid=true]")`)
	b.settled("the refused case", `#case-name`)
	if got := eval[string](b, `(d => d && document.getElementById(d)?.textContent || "")(document.getElementById("case-name").getAttribute("aria-describedby"))`); !strings.Contains(got, "is required") {
		t.Errorf("the refused name is described by %q, want its message", got)
	}
	if got := eval[string](b, `document.activeElement.id`); got != "case-name" {
		t.Errorf("after the refused case the focus is on %q, want #case-name", got)
	}

	// 2. Enter in the case's name: saved, not run.
	b.do("name the case and press Enter",
		chromedp.SendKeys(chromedp.ID("case-name"), "by enter"),
		chromedp.KeyEvent(kb.Enter))
	b.settled("the saved case", `[data-testid=test-notice]`)
	if got := eval[string](b, `document.querySelector("[data-testid=test-notice]").textContent`); !strings.Contains(got, "Saved the test case") {
		t.Errorf("after Enter in the case's name the panel says %q, want the case saved", got)
	}
	if n := srv.App.Count(t, `SELECT count(*) FROM tool_test_cases WHERE tool_id = $1 AND name = 'by enter'`, echo); n != 1 {
		t.Errorf("cases named \"by enter\": %d, want 1", n)
	}
	if !eval[bool](b, `!!document.querySelector("[data-testid=test-result-empty]") && !document.querySelector("[data-testid=test-result]")`) {
		t.Error("Enter in the case's name ran the tool: a result is shown")
	}
	// Enter in "Output contains" saves too.
	b.do("press Enter in Output contains",
		chromedp.Evaluate[chromedp.Void](`document.querySelector(".save-case").open = true; document.getElementById("case-name").value = "by enter too"`),
		chromedp.SendKeys(chromedp.ID("case-text"), "Echo"),
		chromedp.KeyEvent(kb.Enter))
	b.waitJS("the second case saved", `document.querySelector("[data-testid=test-notice]")?.textContent.includes("by enter too")`)
	if n := calls(); n != 0 {
		t.Errorf("Enter in the case's fields called the tool %d times, want none", n)
	}
	if got := actions(); got != "save,save,save" {
		t.Errorf("Enter in the case's fields sent the actions %s, want save,save,save", got)
	}

	// 3. Enter in an argument still runs.
	b.do("press Enter in the message",
		chromedp.Focus(chromedp.CSS(`input[name="arg/message"]`)),
		chromedp.KeyEvent(kb.Enter))
	b.settled("the run's result", `[data-testid=test-result]`)
	if got := actions(); got != "save,save,save,run" {
		t.Errorf("Enter in the message sent the actions %s, want run after the saves", got)
	}

	// 4. Arguments the schema refuses, in the JSON editor.
	b.do("switch to JSON", chromedp.Click(chromedp.CSS(`[data-testid=mode-json]`)))
	b.settled("the JSON editor", `[data-testid=arguments-json]`)
	if got := eval[string](b, `String(document.getElementById("arguments-json").getAttribute("aria-invalid"))`); got != "null" {
		t.Errorf("the JSON editor before a refused run: aria-invalid=%s, want none", got)
	}
	b.runTest("run {} from the JSON editor", "failed", chromedp.SetValue(chromedp.CSS(`[data-testid=arguments-json]`), "{}"))
	if got := eval[string](b, `document.activeElement === document.body ? "body" : document.activeElement.id`); got != "arguments-json" {
		t.Errorf("after the refused run the focus is on %q, want the JSON editor", got)
	}
	if got := eval[string](b, `String(document.getElementById("arguments-json").getAttribute("aria-invalid"))`); got != "true" {
		t.Errorf("the refused JSON editor: aria-invalid=%q, want true", got)
	}
	described := eval[string](b, `document.getElementById("arguments-json").getAttribute("aria-describedby").split(" ").map(id => document.getElementById(id)?.textContent || "").join(" | ")`)
	if !strings.Contains(described, "/message") || !strings.Contains(described, "is required") {
		t.Errorf("the refused JSON editor is described by %q, want its errors", strings.Join(strings.Fields(described), " "))
	}
	b.checkConsole()
}
