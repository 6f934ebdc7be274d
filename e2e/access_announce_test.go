package e2e

import (
	"testing"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/auth"
)

// TestBrowserAccessOutcomeAnnounced: Save rule and Remove on a tool's Access tab swap
// the whole panel, so a notice that comes with it (a live region inserted with its text)
// is not reliably read, and the focus stays on Save or moves to a neighbouring row. The
// outcome is said by the page's lasting #announce region, and the focus lands where it
// did; the notice is still shown.
func TestBrowserAccessOutcomeAnnounced(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "mt"})
	ids := enabledLiveTools(t, srv, hs, "mt", "echo")
	srv.CreateUser(t, "ann", auth.RoleToolUser, "ann-announce-pass-1")
	srv.CreateUser(t, "bob", auth.RoleToolUser, "bob-announce-pass-1")

	b := newBrowser(t)
	if _, err := chromedp.Call(b.ctx, page.AddScriptToEvaluateOnNewDocument,
		page.AddScriptToEvaluateOnNewDocumentParams{Source: panelWatch}); err != nil {
		t.Fatalf("install the page watcher: %v", err)
	}
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("open the tool's access", chromedp.Navigate(srv.URL+"/tools/"+ids["echo"]+"/access"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=access-form]`)))

	// said waits until #announce says want (it empties itself 5 s later), then checks
	// that the panel shows it too and where the focus is.
	said := func(when, want, focus string) {
		t.Helper()
		b.waitJS(when+": the panel settled", `window.__unsettled.size === 0`)
		b.waitJS(when+": #announce says "+want, `document.getElementById("announce").textContent === `+jsQuote(want))
		if got := eval[string](b, `document.querySelector("[data-testid=access-notice]")?.textContent.trim() ?? ""`); got != want {
			t.Errorf("%s: the panel's notice reads %q, want %q", when, got, want)
		}
		if got := eval[string](b, `(a => "#" + (a.id || a.tagName))(document.activeElement)`); got != focus {
			t.Errorf("%s: the focus is on %s, want %s", when, got, focus)
		}
	}
	save := func(u, access string) {
		t.Helper()
		b.do("save a rule for "+u, chromedp.Evaluate[chromedp.Void](`window.__rules = document.querySelectorAll("[data-testid=access-rule]").length`),
			chromedp.SetValue(chromedp.CSS(`[data-testid=access-username]`), u),
			chromedp.SetValue(chromedp.CSS(`[data-testid=access-choice]`), access),
			chromedp.Focus(chromedp.CSS(`[data-testid=access-save]`)), chromedp.KeyEvent(kb.Enter))
		b.waitJS("the rule for "+u, `document.querySelectorAll("[data-testid=access-rule]").length > window.__rules`)
	}
	remove := func(u string) {
		t.Helper()
		b.do("remove "+u+"'s rule", chromedp.Focus(chromedp.ID("access-remove-"+u)), chromedp.KeyEvent(kb.Enter))
		b.waitJS(u+"'s rule is gone", `!document.querySelector("[data-testid=access-rule][data-username=`+u+`]")`)
	}

	save("ann", "deny")
	said("after saving ann's rule", "ann may not call mt__echo, whatever their role.", "#access-save")
	save("bob", "allow")
	said("after saving bob's rule", "bob may call mt__echo, whatever their role.", "#access-save")
	remove("bob")
	said("after removing bob's rule", "The role of bob decides again whether they may call mt__echo.", "#access-remove-ann")
	remove("ann")
	said("after removing the only rule", "The role of ann decides again whether they may call mt__echo.", "#access-username")
	b.checkConsole()
}
