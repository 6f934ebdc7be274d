package e2e

import (
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
)

// TestBrowserCancelConnectionTest tries a stdio server that never answers from the
// form: the result panel shows the test's progress while it runs, and Cancel ends it
// at once with a result that says so.
func TestBrowserCancelConnectionTest(t *testing.T) {
	srv := webtest.Start(t, nil)
	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)
	cmd, args, env := mcptest.StdioCommand(&mcptest.Options{Name: "silent", Hang: true}, "")
	names := make([]string, 0, len(env))
	for k := range env {
		names = append(names, k)
	}
	slices.Sort(names)
	b.do("open the form", chromedp.Navigate(srv.URL+"/servers/new"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=server-form]`)))
	b.do("fill name and command",
		chromedp.SendKeys(chromedp.ID("name"), "silent"),
		chromedp.SendKeys(chromedp.ID("command"), cmd),
		chromedp.SendKeys(chromedp.ID("args"), strings.Join(args, "\n")),
		chromedp.Click(chromedp.CSS(`details.advanced > summary`)),
	)
	for i, k := range names {
		b.do("add variable "+k, chromedp.Click(chromedp.CSS(`[data-testid=add-env]`)))
		row := `#env-rows .secret-row:nth-child(` + itoa(i+1) + `)`
		b.do("fill variable "+k,
			chromedp.SendKeys(chromedp.CSS(row+` input[name=env_name]`), k),
			chromedp.SendKeys(chromedp.CSS(row+` input[name=env_value]`), env[k]),
		)
	}
	// On a short window the panel starts below the fold; the click brings it into view.
	b.do("a short window", chromedp.EmulateViewport(1000, 420))
	b.do("test the connection", chromedp.Click(chromedp.CSS(`[data-testid=test-connection]`)))
	b.waitJS("the panel shows the test initializing",
		`(document.querySelector("[data-testid=test-step]")||{}).textContent === "connecting and initializing"`)
	b.waitJS("the panel is in view",
		`(function(){var r=document.querySelector("[data-testid=test-result]").getBoundingClientRect();return r.top>=0&&r.bottom<=innerHeight;})()`)
	// The status polls in place: the Cancel button a keyboard user reached keeps its
	// focus through the polls, and Enter cancels (a button replaced under a click lost it).
	b.do("focus Cancel", chromedp.Focus(chromedp.CSS(`[data-testid=test-cancel]`)))
	b.waitJS("the status polled since",
		`/^[1-9]/.test(((document.querySelector("[data-testid=test-running] .muted")||{}).textContent||"").slice(1))`)
	if !eval[bool](b, `document.activeElement && document.activeElement.dataset.testid === "test-cancel"`) {
		t.Fatal("the Cancel button lost the focus while the test ran")
	}
	b.do("cancel it with the keyboard", chromedp.KeyEvent("\r"))
	b.waitJS("the panel says it was cancelled",
		`!!document.querySelector("[data-testid=test-failed]") && document.querySelector("[data-testid=test-failed]").textContent.includes("cancelled")`)
	if eval[bool](b, `!!document.querySelector("[data-testid=test-running]")`) {
		t.Fatal("the panel still shows a running test after Cancel")
	}
}
