package e2e

import (
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/toolwarden/toolwarden/app/webtest"
)

// TestBrowserNoHistoryCache: a search on the tool list pushes its address, and htmx
// kept the page it left (names, pending questions) in the tab's storage, past a
// sign-out, for Back to show without asking the server. Nothing is kept now, and Back
// loads the page from the server.
func TestBrowserNoHistoryCache(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("open the tools", chromedp.Navigate(srv.URL+"/tools"), chromedp.WaitVisible(chromedp.ID("tool-q")))
	b.waitJS("htmx is ready", `document.readyState === "complete" && !!window.htmx`)
	b.do("search", chromedp.SendKeys(chromedp.ID("tool-q"), "zz"))
	b.waitJS("the search's address is pushed", `location.search.indexOf("?q=zz") === 0`)
	kept := eval[string](b, `["htmx-history-cache"].map(function (k) {
		return (sessionStorage.getItem(k) || "") + (localStorage.getItem(k) || "");
	}).join("")`)
	if kept != "" {
		t.Errorf("the tab's storage keeps htmx's history cache (%d characters)", len(kept))
	}
	// Back loads the page anew (a mark left on this document goes with it).
	b.do("go back", chromedp.Evaluate[chromedp.Void](`window.__twMark = 1; history.back()`))
	b.waitAfterNavigation("Back loaded the page", `!window.__twMark && location.pathname === "/tools" && location.search === ""`)
	b.checkConsole()
}
