package e2e

import (
	"context"
	"strconv"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/registry"
)

// TestBrowserConfirmDescribedAndEscapeScoped: the confirm dialog's description (what
// is being confirmed) is tied to it with aria-describedby, and Escape pressed in an
// Actions menu or a dialog closes only that, not the assistant's slide-over.
func TestBrowserConfirmDescribedAndEscapeScoped(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	sv, err := srv.Registry.CreateServer(context.Background(), audit.System, registry.Spec{Name: "one",
		Type: registry.TypeStreamableHTTP, URL: "http://127.0.0.1:9/mcp"})
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)
	menu := `#server-menu-` + sv.ID
	del := menu + ` form[action$="/delete"] button`
	b.do("open the servers", chromedp.Navigate(srv.URL+"/servers"), chromedp.WaitVisible(chromedp.ID("server-menu-"+sv.ID)))

	// (a) The dialog's description is the confirm text.
	want := eval[string](b, `document.querySelector(`+strconv.Quote(menu+` form[action$="/delete"]`)+`).dataset.confirm`)
	b.do("ask to delete", chromedp.Click(chromedp.CSS(menu+` > summary`)), chromedp.Click(chromedp.CSS(del)),
		chromedp.WaitVisible(chromedp.ID("confirm-dialog")))
	got := eval[string](b, `(function () {
		var ids = document.getElementById("confirm-dialog").getAttribute("aria-describedby");
		var el = ids && document.getElementById(ids);
		return el ? el.textContent : "(no aria-describedby element)";
	})()`)
	if want == "" || got != want {
		t.Errorf("the confirm dialog's description is %q, want the confirm text %q", got, want)
	}
	b.do("cancel", chromedp.Click(chromedp.CSS(`#confirm-dialog [data-dialog-close]`)),
		chromedp.WaitNotVisible(chromedp.ID("confirm-dialog")), chromedp.Click(chromedp.CSS(`main h1`)))

	// (b) With the slide-over open, Escape in a menu closes the menu only. Clicks go
	// through JavaScript: the slide-over may cover the menu.
	b.do("open the slide-over", chromedp.Click(chromedp.CSS(`[data-testid=assistant-open]`)),
		chromedp.WaitVisible(chromedp.ID("assistant-panel-input")))
	assistantOpen := func() bool { return eval[bool](b, `!document.getElementById("assistant-panel").hidden`) }
	b.do("open the menu", chromedp.Evaluate[chromedp.Void](`(function () {
		var s = document.querySelector(`+strconv.Quote(menu+` > summary`)+`); s.focus(); s.click();
	})()`))
	if !eval[bool](b, `document.querySelector(`+strconv.Quote(menu)+`).open`) {
		t.Fatal("the menu did not open")
	}
	b.do("press Escape in the menu", chromedp.KeyEvent(kb.Escape))
	if eval[bool](b, `document.querySelector(`+strconv.Quote(menu)+`).open`) {
		t.Fatal("Escape left the menu open")
	}
	if !assistantOpen() {
		t.Fatal("Escape in the Actions menu also closed the assistant's slide-over")
	}
	if !eval[bool](b, `document.activeElement === document.querySelector(`+strconv.Quote(menu+` > summary`)+`)`) {
		t.Fatalf("after Escape the focus is on %s, want the menu's button",
			eval[string](b, `document.activeElement?.outerHTML.slice(0, 120) ?? "nothing"`))
	}

	// Escape in a confirm dialog closes the dialog only.
	b.do("ask to delete again", chromedp.Evaluate[chromedp.Void](`(function () {
		var s = document.querySelector(`+strconv.Quote(menu+` > summary`)+`); s.click();
		document.querySelector(`+strconv.Quote(del)+`).click();
	})()`), chromedp.WaitVisible(chromedp.ID("confirm-dialog")))
	b.do("press Escape in the dialog", chromedp.KeyEvent(kb.Escape), chromedp.WaitNotVisible(chromedp.ID("confirm-dialog")))
	if !assistantOpen() {
		t.Fatal("Escape in the confirm dialog also closed the assistant's slide-over")
	}

	// Escape in the slide-over still closes it.
	b.do("focus the slide-over", chromedp.Focus(chromedp.ID("assistant-panel-input")))
	b.do("press Escape in the slide-over", chromedp.KeyEvent(kb.Escape), chromedp.WaitNotVisible(chromedp.ID("assistant-panel")))
	b.checkConsole()
}
