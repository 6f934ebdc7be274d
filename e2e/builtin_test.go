package e2e

import (
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/toolwarden/toolwarden/app/webtest"
)

// TestBrowserOperationForm: the test panel of a consolidated built-in tool shows the
// chosen operation's own parameters only, and follows a change of operation.
func TestBrowserOperationForm(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	tg := srv.App.Enable(t, "builtin__file_operations")
	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("open the test panel", chromedp.Navigate(srv.URL+"/tools/"+tg.ID+"/test"),
		chromedp.WaitVisible(chromedp.CSS(`[data-operation-select] select`)))
	visible := func(name string) bool {
		return eval[bool](b, `(f => !!f && !f.hidden && !f.closest("[hidden]"))(document.querySelector("[data-testid='field-/`+name+`']"))`)
	}
	choose := func(op string) {
		b.do("choose "+op, chromedp.SetValue(chromedp.CSS(`[data-operation-select] select`), op),
			chromedp.Evaluate[chromedp.Void](`document.querySelector("[data-operation-select] select").dispatchEvent(new Event("change", {bubbles: true}))`))
	}
	choose("read_file")
	if !visible("filePath") || !visible("offset") || !visible("limit") || visible("content") || visible("oldString") {
		t.Fatalf("read_file shows filePath %v offset %v limit %v content %v oldString %v", visible("filePath"), visible("offset"),
			visible("limit"), visible("content"), visible("oldString"))
	}
	choose("replace_string")
	if !visible("filePath") || !visible("oldString") || !visible("newString") || visible("offset") || visible("content") {
		t.Fatalf("replace_string shows filePath %v oldString %v newString %v offset %v content %v", visible("filePath"),
			visible("oldString"), visible("newString"), visible("offset"), visible("content"))
	}
	if !eval[bool](b, `document.querySelector("[data-testid='field-/offset'] input").disabled`) {
		t.Error("a hidden parameter's input is not disabled (it would be submitted)")
	}
	b.checkConsole()
}

// TestBrowserTestPanelRiskFollowsOperation: the test panel asks for what a call with the
// arguments as they stand needs, as the router will rate it. A tool user who may not
// approve their own high-risk call sees a built-in file read as low (Run, nothing to
// type) and a write as high (ask someone else), as the operation changes, with no reload.
func TestBrowserTestPanelRiskFollowsOperation(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	tg := srv.App.Enable(t, "builtin__file_operations")
	srv.CreateUser(t, "tina", "tool_user", "tina-password-123")
	srv.Login(t, "admin", webtest.AdminPassword) // someone else who could approve
	b := newBrowser(t)
	b.login(srv, "tina", "tina-password-123")
	b.do("open the test panel", chromedp.Navigate(srv.URL+"/tools/"+tg.ID+"/test"),
		chromedp.WaitVisible(chromedp.CSS(`[data-operation-select] select`)))
	choose := func(op string) {
		b.do("choose "+op, chromedp.SetValue(chromedp.CSS(`[data-operation-select] select`), op),
			chromedp.Evaluate[chromedp.Void](`document.querySelector("[data-operation-select] select").dispatchEvent(new Event("change", {bubbles: true}))`))
	}
	state := `(() => { const z = document.querySelector("#test-approval"), run = document.querySelector("[data-testid=run-test]");
		return z.dataset.risk + " " + (z.querySelector("[data-testid=needs-approver]") ? "ask" : "-") + " " + (run.disabled ? "off" : "on"); })()`
	for _, c := range []struct{ op, want string }{
		{"read_file", "low - on"},
		{"create_file", "high ask off"},
		{"get_file_info", "low - on"},
	} {
		choose(c.op)
		b.waitJS(c.op+" shows "+c.want, state+` === "`+c.want+`"`)
	}
	// The router agrees: the read runs (the file is missing, which the tool says), it
	// is not held for someone else's approval.
	// Enter in an argument runs it, as Run does.
	b.do("read a file", chromedp.SendKeys(chromedp.CSS(`[data-testid='field-/filePath'] input`), "missing.txt"+kb.Enter),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=test-result]`)))
	if got := eval[string](b, `document.querySelector("[data-testid=test-result]").dataset.status`); got != "tool_error" {
		t.Errorf("the read's result is %q (%s), want tool_error", got, eval[string](b, `document.querySelector("[data-testid=test-result]").textContent`))
	}
	b.checkConsole()
}
