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
	b.do("click Run all", chromedp.Click(chromedp.CSS(`[data-testid=run-all]`)))
	b.waitJS("Run all says it is running", `(() => {
		const btn = document.querySelector("[data-testid=run-all]");
		return btn.disabled && btn.getAttribute("aria-busy") === "true" && btn.textContent.includes("Running");
	})()`)
	b.waitAfterNavigation("the case's outcome", `document.querySelector('[data-testid="case-nap"] [data-testid=case-outcome] .badge')`)
	if got := eval[string](b, `document.querySelector('[data-testid="case-nap"] [data-testid=case-outcome] .badge').textContent`); got != "passed" {
		t.Errorf("the case %s", got)
	}
	if eval[bool](b, `document.querySelector("[data-testid=run-all]").disabled`) {
		t.Error("Run all stays disabled on the page that shows the outcome")
	}
	b.checkConsole()
}
