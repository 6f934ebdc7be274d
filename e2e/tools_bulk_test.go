package e2e

import (
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/toolwarden/toolwarden/app/webtest"
)

// TestBrowserBulkTagsEnter: ticking a tool, typing a tag in the bulk Tags box and
// pressing Enter tags the tool, and enables nothing.
func TestBrowserBulkTagsEnter(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	docsServer(t, srv)
	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)
	card := `[data-tool="docs__search_docs"]`
	b.do("open the tools", chromedp.Navigate(srv.URL+"/tools"), chromedp.WaitVisible(chromedp.CSS(card)))
	b.do("tick search_docs", chromedp.Click(chromedp.CSS(card+` [data-testid=tool-pick]`)))
	b.waitJS("the bulk bar counts it", `document.getElementById("bulk-count").textContent === "1 tool selected"`)
	b.do("type a tag and press Enter", chromedp.SendKeys(chromedp.ID("bulk-tags"), "prod"), chromedp.KeyEvent(kb.Enter))
	b.waitAfterNavigation("the list is back", `!document.getElementById("bulk-tags")?.value && document.querySelector('`+card+`')`)
	got := eval[string](b, `document.querySelector('`+card+`').dataset.status + " " + (document.querySelector('`+card+` [data-testid=tool-tags]')?.textContent.trim() ?? "no tags")`)
	if got != "validated #prod" {
		t.Errorf("after Enter in the Tags box search_docs is %q, want validated and tagged #prod", got)
	}
	b.checkConsole()
}
