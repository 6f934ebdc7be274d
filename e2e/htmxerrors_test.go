package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
)

// toastTexts is the text of every toast on the page, one per line.
const toastTexts = `[...document.querySelectorAll("[data-testid=toast]")].map(t => t.textContent).join("\n")`

// TestBrowserRefusedRequestSaysSo: an administrator's role changes while a tool's
// access page is open with a rule typed; saving it is then refused (403, an error page htmx does not
// swap), and a toast says so with the error page's own words, once, instead of the
// button doing nothing.
func TestBrowserRefusedRequestSaysSo(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	srv.LiveServer(t, "ev", true, "echo")
	const pw = "admin-refused-pass-1"
	mia := srv.CreateUser(t, "mia", auth.RoleAdmin, pw)
	b := newBrowser(t)
	b.login(srv, "mia", pw)
	b.do("open the tool's access", chromedp.Navigate(srv.URL+"/tools/"+srv.ToolID(t, "ev__echo")+"/access"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=access-form]`)))
	// Typed before the change: a page with something typed on it is not reloaded under
	// the person when their role changes (it says it is out of date), so the form stays.
	b.do("type a rule", chromedp.SendKeys(chromedp.CSS(`[data-testid=access-username]`), "admin"))
	if _, err := srv.Auth.SetRole(context.Background(), audit.System, mia.ID, auth.RoleToolManager); err != nil {
		t.Fatal(err)
	}
	b.waitJS("the page says its role changed", `!!document.querySelector("#toasts [data-role-changed]")`)
	b.do("add the rule", chromedp.Click(chromedp.CSS(`[data-testid=access-form] button[type=submit]`)))
	b.waitJS("a toast says the request was refused", toastTexts+`.includes("403")`)
	got := eval[string](b, toastTexts)
	if n := strings.Count(got, "403"); n != 1 {
		t.Errorf("%d toasts name the 403, want 1: %q", n, got)
	}
	// The error page's title, not a generic line: it says what went wrong.
	if !strings.Contains(got, "You do not have access") {
		t.Errorf("the toast %q does not give the error page's message", got)
	}
	b.checkConsole("status of 403", "Response Status Error Code 403")
}

// emulateByRule is Network.emulateNetworkConditionsByRule as this chromium takes it:
// with "offline" beside the rules (the cdproto version has it in each rule only).
var emulateByRule = cdp.Command[emulateByRuleParams, network.EmulateNetworkConditionsByRuleResult]{Method: network.CommandEmulateNetworkConditionsByRule}

type emulateByRuleParams struct {
	Offline bool                  `json:"offline"`
	Rules   []*network.Conditions `json:"matchedNetworkConditions"`
}

// TestBrowserAssistantPanelOffline: the assistant's slide-over cannot load (no
// network for its request): a toast says there is no connection, and opening it again
// once the network is back loads it (the failed load is not taken for a loaded panel).
func TestBrowserAssistantPanelOffline(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("open the tool list", chromedp.Navigate(srv.URL+"/tools"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=assistant-open]`)))
	offline := func(on bool) {
		t.Helper()
		rules := []*network.Conditions{}
		if on {
			rules = []*network.Conditions{{URLPattern: "*://*:*/assistant/panel", Offline: true, DownloadThroughput: -1, UploadThroughput: -1}}
		}
		if _, err := chromedp.Call(b.ctx, emulateByRule, emulateByRuleParams{Offline: on, Rules: rules}); err != nil {
			t.Fatalf("emulate the network for the slide-over: %v", err)
		}
	}
	if _, err := chromedp.Call(b.ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	offline(true)
	b.do("open the slide-over", chromedp.Click(chromedp.CSS(`[data-testid=assistant-open]`)))
	b.waitJS("a toast says there is no connection", toastTexts+`.includes("No connection to the server")`)
	offline(false)
	b.do("close the slide-over", chromedp.Click(chromedp.CSS(`[data-testid=assistant-close]`)),
		chromedp.WaitNotVisible(chromedp.ID("assistant-panel")))
	b.do("open it again", chromedp.Click(chromedp.CSS(`[data-testid=assistant-open]`)))
	b.waitJS("the slide-over loads this time", `!!document.getElementById("assistant-panel-input")?.checkVisibility()`)
	b.checkConsole("ERR_INTERNET_DISCONNECTED", "htmx:afterRequest", "htmx:sendError") // the failure, and htmx logging it
}
