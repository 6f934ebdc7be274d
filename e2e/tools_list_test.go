package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/registry"
)

// searchSchema is the input schema of docsServer's tools.
var searchSchema = json.RawMessage(`{"type":"object","properties":{"q":{"type":"string","description":"What to look for."}}}`)

// docsServer registers a disabled server "docs" (at an address nothing answers, so its
// cards change only when a test changes them) with the tools search_docs, search_code
// and more, as if discovered.
func docsServer(t *testing.T, srv *webtest.Server, more ...registry.ToolDef) registry.Server {
	t.Helper()
	ctx := context.Background()
	sv, err := srv.Registry.CreateServer(ctx, audit.System, registry.Spec{Name: "docs", Type: registry.TypeStreamableHTTP,
		URL: "http://127.0.0.1:9/mcp"})
	if err != nil {
		t.Fatal(err)
	}
	tools := append([]registry.ToolDef{
		{Name: "search_docs", Description: "Searches the documentation for a phrase.", InputSchema: searchSchema},
		{Name: "search_code", Description: "Searches the source code for a phrase.", InputSchema: searchSchema},
	}, more...)
	if _, err := srv.Registry.ApplyDiscovery(ctx, sv.ID, registry.Discovery{Trigger: "manual", Actor: audit.System,
		StartedAt: time.Now(), Pages: 1, Tools: tools}); err != nil {
		t.Fatal(err)
	}
	return sv
}

// TestBrowserToolCardSwitch: a card's enable switch, which submits the list's bulk form
// to the tool's own address (formaction), changes that tool alone and brings the person
// back to the same search, by mouse and by keyboard; the status badge keeps its dot.
func TestBrowserToolCardSwitch(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	docsServer(t, srv, registry.ToolDef{Name: "read_page", Description: "Reads one page of the documentation.", InputSchema: searchSchema})

	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("open the search", chromedp.Navigate(srv.URL+"/tools?q=search"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=tool-cards]`)))
	card := func(name string) string { return `[data-tool="docs__` + name + `"]` }
	status := func(name string) string {
		return eval[string](b, `document.querySelector('`+card(name)+`').dataset.status`)
	}
	if n := eval[int](b, `document.querySelectorAll("[data-testid=tool-card]").length`); n != 2 || status("search_docs") != "validated" {
		t.Fatalf("the search shows %d cards, search_docs %s", n, status("search_docs"))
	}
	if w := eval[string](b, `getComputedStyle(document.querySelector('`+card("search_docs")+` [data-testid=tool-status]'), "::before").width`); w != "8px" {
		t.Errorf("the status badge's dot is %q wide, want 8px", w)
	}

	// Tick the other card, then flip this one's switch: only this one changes.
	b.do("tick search_code", chromedp.Click(chromedp.CSS(card("search_code")+` [data-testid=tool-pick]`)))
	b.waitJS("the bulk bar counts it", `document.getElementById("bulk-count").textContent === "1 tool selected"`)
	b.do("switch search_docs on", chromedp.Click(chromedp.CSS(card("search_docs")+` [data-testid=tool-toggle]`)))
	b.waitAfterNavigation("search_docs is enabled, on the same search",
		`document.querySelector('`+card("search_docs")+`')?.dataset.status === "enabled" && location.search === "?q=search"`)
	if got := status("search_code"); got != "validated" {
		t.Errorf("the ticked tool moved to %s; the switch acts on its own tool only", got)
	}
	if got := eval[string](b, `document.querySelector('`+card("search_docs")+` [data-testid=tool-toggle]').getAttribute("aria-checked")`); got != "true" {
		t.Errorf("the switch says aria-checked=%s", got)
	}

	// By keyboard: focus the switch, press Enter.
	b.do("switch search_docs off by keyboard", chromedp.Focus(chromedp.CSS(card("search_docs")+` [data-testid=tool-toggle]`)),
		chromedp.KeyEvent("\r"))
	b.waitAfterNavigation("search_docs is disabled",
		`document.querySelector('`+card("search_docs")+`')?.dataset.status === "disabled" && location.search === "?q=search"`)
	b.checkConsole()
}

// TestBrowserServerDeletedFromToolList: the tool list open in a browser loses the cards
// of a server deleted elsewhere, live, and says so; another server's cards stay. A guest
// (no server.view) sees the server's name on a card as text, not as a link to a page
// that would refuse them, and no Servers button.
func TestBrowserServerDeletedFromToolList(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	ctx := context.Background()
	docs := docsServer(t, srv)
	other, err := srv.Registry.CreateServer(ctx, audit.System, registry.Spec{Name: "other", Type: registry.TypeStreamableHTTP,
		URL: "http://127.0.0.1:9/mcp"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Registry.ApplyDiscovery(ctx, other.ID, registry.Discovery{Trigger: "manual", Actor: audit.System,
		StartedAt: time.Now(), Pages: 1, Tools: []registry.ToolDef{{Name: "keep_me", InputSchema: searchSchema}}}); err != nil {
		t.Fatal(err)
	}
	srv.CreateUser(t, "gus", auth.RoleGuest, "gus-password-1234")

	b := newBrowser(t)
	b.login(srv, "gus", "gus-password-1234")
	b.do("open the tool list", chromedp.Navigate(srv.URL+"/tools"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=tool-cards]`)))
	if n := eval[int](b, `document.querySelectorAll("[data-testid=tool-card]").length`); n != 3 {
		t.Fatalf("the list shows %d cards, want 3", n)
	}
	if n := eval[int](b, `[...document.querySelectorAll('a[href^="/servers"]')].filter(a => a.offsetParent !== null).length`); n != 0 {
		t.Errorf("a guest sees %d links to server pages, which refuse them", n)
	}
	if n := eval[int](b, `[...document.querySelectorAll("[data-testid=tool-card] .badge")].filter(s => s.textContent === "docs").length`); n != 2 {
		t.Errorf("the cards name their server %d times, want 2 (as text)", n)
	}
	if vis := eval[bool](b, `[...document.querySelectorAll('a')].some(a => a.textContent.trim() === "Servers" && a.offsetParent !== null)`); vis {
		t.Error("a guest sees the Servers button")
	}
	b.waitJS("the page's live connection is open", `document.querySelector("#live-status")?.dataset.state === "open"`)
	if err := srv.Registry.DeleteServer(ctx, audit.System, docs.ID); err != nil {
		t.Fatal(err)
	}
	b.waitJS("the deleted server's cards go", `document.querySelectorAll("[data-testid=tool-card]").length === 1 &&
		document.querySelector('[data-tool="other__keep_me"]') !== null`)
	b.waitJS("a toast says why", `[...document.querySelectorAll(".toast")].some(t => t.textContent.includes("Server docs was deleted"))`)
	b.checkConsole()
}

// TestBrowserToolTabsByKeyboard: on a tool's page the section tabs (links) take the
// arrow keys, Home and End, and Enter opens the focused one.
func TestBrowserToolTabsByKeyboard(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	docsServer(t, srv)
	tg, err := srv.Tools.Target(context.Background(), "docs__search_docs")
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("open the tool", chromedp.Navigate(srv.URL+"/tools/"+tg.ID), chromedp.WaitVisible(chromedp.CSS(`[data-testid=tool-tabs]`)))
	tabs := eval[[]string](b, `[...document.querySelectorAll("[data-testid=tool-tabs] a[role=tab]")].map(a => a.id)`)
	if len(tabs) < 3 {
		t.Fatalf("tabs %v", tabs)
	}
	// The tab bar scrolls sideways on a narrow screen, never up and down (a selected
	// tab's underline hanging over the bar's rule made a 1 px vertical scrollbar).
	if tall := eval[int](b, `[...document.querySelectorAll(".tabs")].filter(e => e.scrollHeight > e.clientHeight).length`); tall != 0 {
		t.Errorf("%d tab bars scroll vertically", tall)
	}
	focused := func() string { return eval[string](b, `document.activeElement.id`) }
	b.do("focus the first tab", chromedp.Focus(chromedp.ID(tabs[0])), chromedp.KeyEvent(kb.ArrowRight))
	if got := focused(); got != tabs[1] {
		t.Fatalf("ArrowRight: focus on %q, want %q", got, tabs[1])
	}
	b.do("End", chromedp.KeyEvent(kb.End))
	if got := focused(); got != tabs[len(tabs)-1] {
		t.Fatalf("End: focus on %q, want %q", got, tabs[len(tabs)-1])
	}
	b.do("ArrowRight wraps", chromedp.KeyEvent(kb.ArrowRight))
	if got := focused(); got != tabs[0] {
		t.Fatalf("ArrowRight from the last: focus on %q, want %q", got, tabs[0])
	}
	b.do("ArrowLeft, Enter", chromedp.KeyEvent(kb.ArrowLeft), chromedp.KeyEvent(kb.Enter))
	last := tabs[len(tabs)-1]
	b.waitAfterNavigation("the last tab's page opens", `document.getElementById("`+last+`")?.getAttribute("aria-selected") === "true"`)
	b.checkConsole()
}
