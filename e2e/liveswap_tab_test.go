package e2e

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/registry"
)

// TestBrowserLiveHeadKeepsTheTab: on a tab other than the Overview, a live update of the
// page head keeps the override reason being typed (the live head's forms carried another
// back than the page's, so the text was dropped), and Enable and Validate, used after
// the update, come back to the tab the person was on instead of the Overview.
func TestBrowserLiveHeadKeepsTheTab(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	ctx := context.Background()
	docsServer(t, srv, registry.ToolDef{Name: "broken", Description: "Has a schema that cannot be used.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"strin"}}}`)})
	id := srv.ToolID(t, "docs__broken")
	tag := func(tags ...string) {
		t.Helper()
		if _, err := srv.Tools.Tag(ctx, audit.System, []string{id}, tags, false); err != nil {
			t.Fatal(err)
		}
	}

	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)

	// The Schema tab: the reason survives the head's update, and the override lands here.
	reason := `#override-reason-` + id
	b.do("open the blocked tool's schema", chromedp.Navigate(srv.URL+"/tools/"+id+"?tab=schema"),
		chromedp.WaitVisible(chromedp.CSS(reason)))
	b.waitJS("the page is live", `document.querySelector("#live-status")?.dataset.state === "open"`)
	b.do("type a reason", chromedp.SendKeys(chromedp.CSS(reason), "a false positive"))
	b.do("remember the field", chromedp.Evaluate[chromedp.Void](`window.__old = document.querySelector('`+reason+`')`))
	tag("live")
	b.waitJS("the head was replaced", `!window.__old.isConnected && !!document.querySelector('`+reason+`')`)
	if got := eval[string](b, `document.querySelector('`+reason+`').value`); got != "a false positive" {
		t.Errorf("on the Schema tab the reason reads %q after the head was replaced", got)
		b.do("type it again", chromedp.SendKeys(chromedp.CSS(reason), "a false positive")) // to check where Enable lands
	}
	b.do("enable with the override", chromedp.Click(chromedp.CSS(`[data-testid=override-submit]`)))
	b.waitAfterNavigation("the override is done", `!window.__old && !!document.querySelector('[data-testid=override-note]')`)
	if got := eval[string](b, `location.pathname + location.search`); got != "/tools/"+id+"?tab=schema" {
		t.Errorf("enabling from the Schema tab after a live update landed on %s", got)
	}

	// The Test tab: Validate, used after the head's update, comes back to the panel.
	b.do("open the test panel", chromedp.Navigate(srv.URL+"/tools/"+id+"/test"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=tool-validate]`)))
	b.waitJS("the page is live", `document.querySelector("#live-status")?.dataset.state === "open"`)
	b.do("remember the head", chromedp.Evaluate[chromedp.Void](`window.__old = document.querySelector('[data-testid=tool-validate]')`))
	tag("again")
	b.waitJS("the head was replaced", `!window.__old.isConnected && !!document.querySelector('[data-testid=tool-validate]')`)
	b.do("validate again", chromedp.Click(chromedp.CSS(`[data-testid=tool-validate]`)))
	b.waitAfterNavigation("the validation is done", `!window.__old && !!document.querySelector('[data-testid=tool-validate]')`)
	if got := eval[string](b, `location.pathname + location.search`); got != "/tools/"+id+"/test" {
		t.Errorf("validating from the Test tab after a live update landed on %s", got)
	}
	b.checkConsole()
}
