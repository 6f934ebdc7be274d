package e2e

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/registry"
)

// TestBrowserToolSearchAnnouncesCount: searching as you type keeps the count's live
// region the same element and changes its text, so a screen reader reads each new count
// (a region inserted with its text is not read); the bulk bar comes back to the search.
func TestBrowserToolSearchAnnouncesCount(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	docsServer(t, srv, registry.ToolDef{Name: "read_page", Description: "Reads one page of the documentation.", InputSchema: searchSchema})

	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("open the tool list", chromedp.Navigate(srv.URL+"/tools"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=tool-cards]`)))
	total := `document.querySelector("[data-testid=tool-total]")`
	if got := eval[string](b, total+`.textContent.replace(/\s+/g, " ").trim()`); got != "3 tools" {
		t.Fatalf("the list's count reads %q, want 3 tools", got)
	}
	if live := eval[string](b, total+`.getAttribute("aria-live") || ""`); live != "polite" {
		t.Fatalf("the count's aria-live is %q, want polite", live)
	}
	b.do("mark the count and the results", chromedp.Evaluate[chromedp.Void](
		total+`.twMark = "total"; document.getElementById("tool-results").twMark = "results"`))
	b.do("search", chromedp.SendKeys(chromedp.ID("tool-q"), "read"))
	b.waitJS("the results are swapped", `!document.getElementById("tool-results").twMark &&
		document.querySelectorAll("[data-testid=tool-card]").length === 1 && !document.querySelector(".htmx-settling")`)
	if got := eval[string](b, total+`?.twMark || "replaced"`); got != "total" {
		t.Errorf("the count's live region after a search: %s, want the same element", got)
	}
	if got := eval[string](b, total+`.textContent.replace(/\s+/g, " ").trim()`); !strings.HasPrefix(got, "1 tool match") {
		t.Errorf("after the search the count reads %q, want 1 tool match", got)
	}
	if n := eval[int](b, `document.querySelectorAll("[data-testid=tool-total]").length`); n != 1 {
		t.Errorf("%d counts on the page, want 1", n)
	}
	if back := eval[string](b, `document.querySelector("form#bulk input[name=back]").value`); !strings.Contains(back, "q=read") {
		t.Errorf("the bulk bar comes back to %q, want the search q=read", back)
	}
	b.checkConsole()
}
