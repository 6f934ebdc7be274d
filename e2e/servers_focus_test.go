package e2e

import (
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/toolwarden/toolwarden/app/webtest"
)

// TestBrowserServerFormRowFocus: on the form of an HTTP server, removing the last
// header row puts the focus on that list's Add button (not the environment's, hidden
// for an HTTP server, which dropped it to <body>), and a row added by the script has a
// Remove button that says what it removes.
func TestBrowserServerFormRowFocus(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("open the form", chromedp.Navigate(srv.URL+"/servers/new"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=server-form]`)))
	b.do("choose HTTP", chromedp.Evaluate[chromedp.Void](`(s => { s.value = "streamable_http"; s.dispatchEvent(new Event("change", {bubbles: true})) })(document.getElementById("type"))`),
		chromedp.Click(chromedp.CSS(`details.advanced > summary`)))
	b.do("add a header", chromedp.Click(chromedp.CSS(`[data-testid=add-headers]`)))
	if got := eval[string](b, `document.activeElement.name || document.activeElement.tagName`); got != "headers_name" {
		t.Errorf("after adding a header row the focus is on %q, want its name box", got)
	}
	b.do("name it", chromedp.SendKeys(chromedp.CSS(`#headers-rows .secret-row input[name=headers_name]`), "X-Key"))
	if label := eval[string](b, `document.querySelector("#headers-rows .secret-row [data-remove-row]").getAttribute("aria-label") || ""`); label != "Remove X-Key" {
		t.Errorf("the added row's Remove button is labelled %q, want \"Remove X-Key\"", label)
	}
	b.do("remove it from the keyboard", chromedp.Focus(chromedp.CSS(`#headers-rows .secret-row [data-remove-row]`)), chromedp.KeyEvent(kb.Enter))
	if n := eval[int](b, `document.querySelectorAll("#headers-rows .secret-row").length`); n != 0 {
		t.Fatalf("%d header rows left, want none", n)
	}
	if got := eval[string](b, activeTestID); got != "add-headers" {
		t.Errorf("after removing the last header row the focus is on %q, want add-headers", got)
	}
	b.checkConsole()
}
