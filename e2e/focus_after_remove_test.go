package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/auth"
)

// activeTestID is a script expression for what has the focus: its data-testid, its
// id, or its tag.
const activeTestID = `(a => !a ? "nothing" : a.dataset.testid || (a.id ? "#" + a.id : a.tagName))(document.activeElement)`

// pressOnWorkspace focuses sel, presses Enter on it and waits until the test panel's
// workspace has been swapped and settled.
func (b *browser) pressOnWorkspace(what, sel string) {
	b.t.Helper()
	b.do(what+": mark", chromedp.Evaluate[chromedp.Void](`window.__swapsBefore = window.__workspaceSwaps`))
	b.do(what, chromedp.Focus(chromedp.CSS(sel)), chromedp.KeyEvent(kb.Enter))
	b.waitJS(what+": swapped", `window.__workspaceSwaps > window.__swapsBefore && window.__unsettled.size === 0`)
}

// TestBrowserRemoveKeepsFocus: a keyboard user who removes an array item, a map entry
// or an access rule keeps the focus near the row that went (the next row's Remove,
// else the previous row's, else the list's Add), not dropped to <body>.
func TestBrowserRemoveKeepsFocus(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "mt", Shapes: true})
	hs.Server().SetTool(mcptest.ToolSpec{
		Name:        "tags",
		Description: "Takes a list of tags and replies ok.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"tags":{"type":"array","items":{"type":"string"}}}}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	})
	ids := enabledLiveTools(t, srv, hs, "mt", "tags", "shapes")
	srv.CreateUser(t, "ann", auth.RoleToolUser, "ann-focus-pass-1")
	srv.CreateUser(t, "bob", auth.RoleToolUser, "bob-focus-pass-1")

	b := newBrowser(t)
	if _, err := chromedp.Call(b.ctx, page.AddScriptToEvaluateOnNewDocument,
		page.AddScriptToEvaluateOnNewDocumentParams{Source: panelWatch}); err != nil {
		t.Fatalf("install the page watcher: %v", err)
	}
	b.login(srv, "admin", webtest.AdminPassword)
	focusIs := func(when, want string) {
		t.Helper()
		expr := activeTestID
		if strings.HasPrefix(want, "#") { // the access rules' buttons share a data-testid
			expr = `(a => "#" + (a.id || a.tagName))(document.activeElement)`
		}
		if got := eval[string](b, expr); got != want {
			t.Errorf("%s: the focus is on %s, want %s", when, got, want)
		}
	}

	// An array: three items; the middle one, then the last, then the only one removed.
	b.do("open tags' test panel", chromedp.Navigate(srv.URL+"/tools/"+ids["tags"]+"/test"))
	b.settled("tags' test panel", `[data-testid="array-add-/tags"]`)
	for i := range 3 {
		b.pressOnWorkspace("add item "+itoa(i+1), `[data-testid="array-add-/tags"]`)
	}
	b.pressOnWorkspace("remove the middle item", `[data-testid="array-remove-/tags/1"]`)
	focusIs("after removing the middle item", "array-remove-/tags/1") // the row that took its place
	b.pressOnWorkspace("remove the last item", `[data-testid="array-remove-/tags/1"]`)
	focusIs("after removing the last item", "array-remove-/tags/0")
	b.pressOnWorkspace("remove the only item", `[data-testid="array-remove-/tags/0"]`)
	focusIs("after removing the only item", "array-add-/tags")

	// A map: two entries; the last, then the only one removed.
	b.do("open shapes' test panel", chromedp.Navigate(srv.URL+"/tools/"+ids["shapes"]+"/test"))
	b.settled("shapes' test panel", `[data-testid="map-add-/tags"]`)
	b.pressOnWorkspace("add a first entry", `[data-testid="map-add-/tags"]`)
	b.pressOnWorkspace("add a second entry", `[data-testid="map-add-/tags"]`)
	b.pressOnWorkspace("remove the last entry", `[data-testid="map-remove-/tags/1"]`)
	focusIs("after removing the last entry", "map-remove-/tags/0")
	b.pressOnWorkspace("remove the only entry", `[data-testid="map-remove-/tags/0"]`)
	focusIs("after removing the only entry", "map-add-/tags")

	// Access rules: two; the last, then the only one removed.
	b.do("open the tool's access", chromedp.Navigate(srv.URL+"/tools/"+ids["tags"]+"/access"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=access-form]`)))
	for _, u := range []string{"ann", "bob"} {
		b.do("add a rule for "+u, chromedp.Evaluate[chromedp.Void](`window.__rules = document.querySelectorAll("[data-testid=access-rule]").length`),
			chromedp.SetValue(chromedp.CSS(`[data-testid=access-username]`), u),
			chromedp.SetValue(chromedp.CSS(`[data-testid=access-choice]`), "deny"),
			chromedp.Click(chromedp.CSS(`[data-testid=access-save]`)))
		b.waitJS("the rule for "+u, `document.querySelectorAll("[data-testid=access-rule]").length > window.__rules && window.__unsettled.size === 0`)
	}
	removeRule := func(u string) {
		t.Helper()
		b.do("remove "+u+"'s rule", chromedp.Focus(chromedp.ID("access-remove-"+u)), chromedp.KeyEvent(kb.Enter))
		b.waitJS(u+"'s rule is gone", `!document.querySelector("[data-testid=access-rule][data-username=`+u+`]")`)
		b.waitJS("the access panel settled", `window.__unsettled.size === 0`)
	}
	removeRule("bob")
	focusIs("after removing the last rule", "#access-remove-ann")
	removeRule("ann")
	focusIs("after removing the only rule", "#access-username")
	b.checkConsole()
}

// TestBrowserConnectionTestKeepsFocus: "Test connection" pressed from the keyboard is
// disabled while its request is in flight, which takes the focus from it; once the
// test has ended the focus is back on it, not on <body>.
func TestBrowserConnectionTestKeepsFocus(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "mt"})
	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("open the form", chromedp.Navigate(srv.URL+"/servers/new"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=server-form]`)))
	b.do("fill it for an HTTP server", chromedp.SendKeys(chromedp.ID("name"), "mt"),
		chromedp.SetValue(chromedp.ID("type"), "streamable_http"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("type").dispatchEvent(new Event("change", {bubbles: true}))`),
		chromedp.SendKeys(chromedp.ID("url"), hs.URL()))
	b.do("press Test connection", chromedp.Focus(chromedp.CSS(`[data-testid=test-connection]`)), chromedp.KeyEvent(kb.Enter))
	b.waitJS("the test reports a connection", `!!document.querySelector("[data-testid=test-ok]")`)
	if got := eval[string](b, activeTestID); got != "test-connection" {
		t.Errorf("after the connection test the focus is on %s, want the Test connection button", got)
	}
	b.checkConsole()
}

// liveText is a script expression for the text of the live regions inside sel, one a
// line (a polite or assertive region, or a role that is one).
func liveText(sel string) string {
	return `[...document.querySelectorAll(` + jsQuote(sel+` :is([role=status], [role=alert], [role=log], [aria-live]:not([aria-live=off]))`) + `)]
		.map(e => e.getAttribute("role") + ":" + e.textContent.trim().replace(/\s+/g, " ")).join("\n")`
}

func jsQuote(s string) string {
	q, _ := json.Marshal(s)
	return string(q)
}

// TestBrowserRunStatusAnnouncedOnce: a running test's seconds tick in no live region
// (a screen reader read "Running… N s" at every push); the run's start is said once in
// the panel's live region, and how it ended once (not again by an alert in the result).
func TestBrowserRunStatusAnnouncedOnce(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "mt"})
	ids := enabledLiveTools(t, srv, hs, "mt", "sleep")
	b := newBrowser(t)
	if _, err := chromedp.Call(b.ctx, page.AddScriptToEvaluateOnNewDocument,
		page.AddScriptToEvaluateOnNewDocumentParams{Source: panelWatch}); err != nil {
		t.Fatalf("install the page watcher: %v", err)
	}
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("open sleep's test panel", chromedp.Navigate(srv.URL+"/tools/"+ids["sleep"]+"/test"))
	b.settled("sleep's test panel", `input[name="arg/ms"]`)
	announcer := `document.querySelector("[data-testid=test-announce]")`

	b.do("start a 20 s sleep", chromedp.SendKeys(chromedp.CSS(`input[name="arg/ms"]`), "20000"),
		chromedp.Click(chromedp.CSS(`[data-testid=run-test]`)))
	b.do("wait for the running panel",
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=test-running] [data-testid=test-run-progress]`)))
	b.waitJS("a pushed progress", `window.__pushedSince.length > 0`)
	if got := eval[string](b, liveText(`[data-testid=test-running]`)); got != "" {
		t.Errorf("the running panel has live regions, read again at every push: %q; want none", got)
	}
	if got := eval[string](b, `document.querySelector("[data-testid=test-run-progress]").textContent`); !strings.Contains(got, " s") {
		t.Errorf("the running panel reads %q; want its seconds still shown", strings.Join(strings.Fields(got), " "))
	}
	if got := eval[string](b, announcer+`.textContent.trim()`); got != "Running…" {
		t.Errorf("while the run goes on the live region says %q, want Running…", got)
	}

	b.do("cancel it", chromedp.Click(chromedp.CSS(`[data-testid=cancel-test]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=test-result][data-status=cancelled]`)))
	b.settled("the cancelled result", `[data-testid=test-result]`)
	if got := eval[string](b, liveText(`#test-result`)); got != "" {
		t.Errorf("the result also has live regions or alerts: %q; want the ending said once, by the panel's live region", got)
	}
	if got := eval[string](b, announcer+`.textContent.trim()`); !strings.Contains(got, "cancelled") {
		t.Errorf("after the run the live region says %q, want that it was cancelled", got)
	}
	b.checkConsole()
}
