package e2e

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/tools"
)

// TestBrowserRunAllBusy: Run all says it is running and stays disabled while the
// cases run (a second click would run every case again), then shows the outcome.
func TestBrowserRunAllBusy(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "mt"})
	ids := enabledLiveTools(t, srv, hs, "mt", "sleep")
	if _, err := srv.Tools.SaveTestCase(context.Background(), audit.System, ids["sleep"], tools.TestCase{Name: "nap",
		Arguments: json.RawMessage(`{"ms":3000}`), Expect: "success"}); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("open sleep's test panel", chromedp.Navigate(srv.URL+"/tools/"+ids["sleep"]+"/test"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=run-all]`)))
	if eval[bool](b, `!!document.querySelector('[data-testid=run-all-form] [name=confirm]')`) {
		b.do("tick confirm", chromedp.Click(chromedp.CSS(`[data-testid=run-all-form] [name=confirm]`)))
	}
	// The page notes, the moment it happens, that the button says it is running: a poll
	// from outside could miss it on a loaded machine before the outcome replaces the page
	// (and the note, in sessionStorage, outlives that page).
	b.do("watch Run all", chromedp.Evaluate[chromedp.Void](`(() => {
		const btn = document.querySelector("[data-testid=run-all]");
		new MutationObserver(() => {
			if (btn.disabled && btn.getAttribute("aria-busy") === "true" && btn.textContent.includes("Running")) {
				sessionStorage.setItem("e2e-run-all-busy", "1");
			}
		}).observe(btn, {attributes: true, childList: true, characterData: true, subtree: true});
	})()`))
	b.do("click Run all", chromedp.Click(chromedp.CSS(`[data-testid=run-all]`)))
	b.waitAfterNavigation("the case's outcome", `document.querySelector('[data-testid="case-nap"] [data-testid=case-outcome] .badge')`)
	if !eval[bool](b, `sessionStorage.getItem("e2e-run-all-busy") === "1"`) {
		t.Error("Run all never said it was running while the case ran")
	}
	if got := eval[string](b, `document.querySelector('[data-testid="case-nap"] [data-testid=case-outcome] .badge').textContent`); got != "passed" {
		t.Errorf("the case %s", got)
	}
	if eval[bool](b, `document.querySelector("[data-testid=run-all]").disabled`) {
		t.Error("Run all stays disabled on the page that shows the outcome")
	}
	b.checkConsole()
}
