package e2e

import (
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/toolwarden/toolwarden/app/webtest"
)

// TestBrowserInvalidGroupFocusesItsControl: a form that comes back with a group marked
// invalid (a <fieldset>, which takes no focus) puts the focus on the group's control.
// Saving a wrong approval time left the focus on <body>.
func TestBrowserInvalidGroupFocusesItsControl(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)

	b.do("save an approval time of zero", chromedp.Navigate(srv.URL+"/settings/executions"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=approval-ttl-value]`)),
		chromedp.SetValue(chromedp.CSS(`[data-testid=approval-ttl-value]`), "0"),
		chromedp.Click(chromedp.CSS(`[data-testid=settings-save]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=settings-errors]`)))
	b.waitJS("the page is loaded", `document.readyState === "complete"`)
	if got := eval[string](b, `document.activeElement.id || document.activeElement.tagName`); got != "approval-ttl-value" {
		t.Errorf("after the refused save the focus is on %s; want the approval time's amount (approval-ttl-value)", got)
	}

	// The history's status filter is a group of checkboxes: its first takes the focus.
	b.do("filter by a status that does not exist", chromedp.Navigate(srv.URL+"/executions?status=bogus"),
		chromedp.WaitVisible(chromedp.CSS(`.status-choices[aria-invalid=true]`)))
	b.waitJS("the page is loaded", `document.readyState === "complete"`)
	if !eval[bool](b, `document.activeElement === document.querySelector(".status-choices input[type=checkbox]")`) {
		t.Errorf("after the refused filter the focus is on %s; want the status group's first checkbox",
			eval[string](b, `document.activeElement.outerHTML.slice(0, 120)`))
	}
	b.checkConsole("status of 422", "status of 400")
}

// TestBrowserCopyIsAnnounced: a copy button's "Copied" (or, with no clipboard, its
// "Selected: press Ctrl+C") is said in a live region; the button's text changed under
// an aria-label, which screen readers read instead. In the token's modal dialog it is
// said in the dialog's own region (the page behind is inert).
func TestBrowserCopyIsAnnounced(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)
	const said = `(el => /^(Copied|Selected: press Ctrl\+C)$/.test(el?.textContent ?? ""))`

	b.do("copy the MCP endpoint", chromedp.Navigate(srv.URL+"/tokens"),
		chromedp.WaitVisible(chromedp.CSS(`[data-copy=connect-mcp-url]`)),
		chromedp.Click(chromedp.CSS(`[data-copy=connect-mcp-url]`)))
	b.waitJS("the live region says it was copied", said+`(document.getElementById("announce"))`)
	if got := eval[string](b, `(el => el.getAttribute("role") + " " + el.closest("[aria-hidden=true], [inert]"))(document.getElementById("announce"))`); got != "status null" {
		t.Errorf("the announcing element: %q; want a role=status region, not hidden from assistive technology", got)
	}

	b.do("create a token", chromedp.SendKeys(chromedp.ID("token-name"), "copy-test"),
		chromedp.Click(chromedp.CSS(`[data-testid=create-token]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=secret-value]`)),
		chromedp.Click(chromedp.CSS(`#secret-dialog [data-copy=secret-value]`)))
	b.waitJS("the dialog's live region says it was copied", said+`(document.querySelector("#secret-dialog [data-announce]"))`)
	b.checkConsole()
}

// TestBrowserSecretDialogSurvivesOneEscape: the dialog that shows a new token once comes
// back, with a warning, after a first Escape (the value would be lost for good); a
// second Escape closes it.
func TestBrowserSecretDialogSurvivesOneEscape(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("create a token", chromedp.Navigate(srv.URL+"/tokens"),
		chromedp.WaitVisible(chromedp.ID("token-name")),
		chromedp.SendKeys(chromedp.ID("token-name"), "escape-test"),
		chromedp.Click(chromedp.CSS(`[data-testid=create-token]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=secret-value]`)))
	b.do("press Escape", chromedp.KeyEvent(kb.Escape))
	b.waitJS("the dialog is back, with a warning", `document.getElementById("secret-dialog").open &&
		!!document.querySelector("#secret-dialog [data-testid=secret-dialog-warning]")`)
	b.waitJS("the warning is said", `document.querySelector("#secret-dialog [data-announce]").textContent.includes("not shown again")`)
	b.do("press Escape again", chromedp.KeyEvent(kb.Escape))
	b.waitJS("the dialog is closed", `!document.getElementById("secret-dialog").open`)
	b.checkConsole()
}
