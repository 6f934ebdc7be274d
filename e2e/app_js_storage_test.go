package e2e

import (
	"strings"
	"testing"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
)

// blockStorage makes the page's site storage throw, as a browser set not to let sites
// save data does (Chrome's "Sites can't save data", Firefox's cookie blocking).
const blockStorage = `(function () {
	function blocked() { throw new DOMException("The operation is insecure.", "SecurityError"); }
	Object.defineProperty(window, "localStorage", { get: blocked, configurable: true });
	Object.defineProperty(window, "sessionStorage", { get: blocked, configurable: true });
})();`

// TestBrowserSecretShownWithoutStorage: with site storage blocked, reading the saved
// theme threw at load, before the one-time secret dialog opened: a password just reset
// was never shown, and lost. The dialog opens (modal), toasts and the theme button
// still work, and nothing is thrown. Without script the value shows too.
func TestBrowserSecretShownWithoutStorage(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	srv.CreateUser(t, "bob", auth.RoleToolUser, "bob-password-1")
	b := newBrowser(t)
	if _, err := chromedp.Call(b.ctx, page.AddScriptToEvaluateOnNewDocument,
		page.AddScriptToEvaluateOnNewDocumentParams{Source: blockStorage}); err != nil {
		t.Fatalf("install the storage block: %v", err)
	}
	b.login(srv, "admin", webtest.AdminPassword)
	if !eval[bool](b, `(function () { try { localStorage.length; return false; } catch (e) { return e.name === "SecurityError"; } })()`) {
		t.Fatal("the page's localStorage does not throw: the test would prove nothing")
	}

	reset := func(user string) {
		t.Helper()
		b.do("reset "+user+"'s password", chromedp.Navigate(srv.URL+"/users"),
			chromedp.WaitVisible(chromedp.CSS(`[data-testid=user-row][data-username=`+user+`] [data-testid=reset-password]`)),
			chromedp.Click(chromedp.CSS(`[data-testid=user-row][data-username=`+user+`] [data-testid=reset-password]`)))
	}
	reset("alice")
	b.do("confirm", chromedp.WaitVisible(chromedp.CSS(`[data-testid=confirm-ok]`)), chromedp.Click(chromedp.CSS(`[data-testid=confirm-ok]`)))
	b.waitAfterNavigation("the new password is shown in a modal dialog", `!!document.getElementById("secret-dialog")?.matches(":modal") &&
		document.getElementById("secret-value").textContent.trim() !== ""`)
	b.do("close it", chromedp.Click(chromedp.CSS(`#secret-dialog [data-dialog-close]`)))
	b.waitJS("the dialog closed", `!document.getElementById("secret-dialog").open`)

	// The theme button cycles, though nothing can be saved.
	b.do("switch the theme", chromedp.Click(chromedp.CSS(`[data-theme-toggle]`)))
	if got := eval[string](b, `document.documentElement.dataset.theme + " " + document.querySelector("[data-theme-toggle]").getAttribute("aria-label")`); got != "light Theme: light" {
		t.Errorf("after a click the theme is %q; want light", got)
	}
	b.do("switch the theme again", chromedp.Click(chromedp.CSS(`[data-theme-toggle]`)))
	if got := eval[string](b, `document.documentElement.dataset.theme || ""`); got != "dark" {
		t.Errorf("after a second click the theme is %q; want dark", got)
	}
	b.checkConsole()

	// Without script: the value is on the page all the same.
	if _, err := chromedp.Call(b.ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
		t.Fatal(err)
	}
	reset("bob") // no confirm dialog without script: the form posts at once
	b.do("the new password shows", chromedp.WaitVisible(chromedp.CSS(`[data-testid=secret-value]`)))
	value, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS(`[data-testid=secret-value]`)))
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(value) == "" {
		t.Error("without script the secret dialog shows no value")
	}
}
