package e2e

import (
	"testing"

	"github.com/chromedp/chromedp"

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
