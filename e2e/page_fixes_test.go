package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/views"
)

// TestBrowserBulkTagsEnter: ticking a tool, typing a tag in the bulk Tags box and
// pressing Enter tags the tool, and enables nothing.
func TestBrowserBulkTagsEnter(t *testing.T) {
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

// TestBrowserReloadToastStays: the toast that says the page missed too many live
// updates is not removed after a while (it gets a Dismiss button), and the header badge
// then says the page is out of date, even when the socket reconnects. An ordinary toast
// still goes by itself.
func TestBrowserReloadToastStays(t *testing.T) {
	srv := webtest.Start(t, nil)
	docsServer(t, srv)
	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("open the tools", chromedp.Navigate(srv.URL+"/tools"))
	b.waitJS("the page is live", `document.getElementById("live-status")?.dataset.state === "open"`)

	inner := func(frag string) string {
		return strings.TrimSpace(frag[strings.Index(frag, ">")+1 : strings.LastIndex(frag, "</div>")])
	}
	var reload, toast bytes.Buffer
	if err := views.LiveReload().Render(context.Background(), &reload); err != nil {
		t.Fatal(err)
	}
	if err := views.LiveToast("ok", "Saved").Render(context.Background(), &toast); err != nil {
		t.Fatal(err)
	}
	// As a websocket message brings them: into #toasts, then htmx:wsAfterMessage.
	b.do("a reload toast and an ordinary one arrive", chromedp.Evaluate[chromedp.Void](`(() => {
		const box = document.getElementById("toasts");
		box.insertAdjacentHTML("beforeend", `+strconv.Quote(inner(reload.String()))+`);
		box.lastElementChild.id = "reload-toast";
		box.insertAdjacentHTML("beforeend", `+strconv.Quote(inner(toast.String()))+`);
		box.lastElementChild.id = "plain-toast";
		document.body.dispatchEvent(new CustomEvent("htmx:wsAfterMessage", {bubbles: true}));
	})()`))
	if got := eval[string](b, `document.getElementById("plain-toast").dataset.scheduled || ""`); got != "1" {
		t.Errorf("the ordinary toast is not set to go (data-scheduled=%q)", got)
	}
	if got := eval[string](b, `document.getElementById("reload-toast").dataset.scheduled || ""`); got != "" {
		t.Errorf("the reload toast is set to be removed (data-scheduled=%q); the page would be stale without a word", got)
	}
	if got := eval[string](b, `document.getElementById("live-status").dataset.state + ": " + document.querySelector("#live-status [data-live-label]").textContent`); got != "stale: Out of date" {
		t.Errorf("after the reload toast the badge reads %q", got)
	}
	// A reconnect does not make the stale page say Live again.
	b.do("the socket reconnects", chromedp.Evaluate[chromedp.Void](`document.body.dispatchEvent(new CustomEvent("htmx:wsConnecting", {bubbles: true}))`))
	if got := eval[string](b, `document.getElementById("live-status").dataset.state`); got != "stale" {
		t.Errorf("after a reconnect the badge is %q", got)
	}
	b.do("dismiss the reload toast", chromedp.Click(chromedp.CSS(`#reload-toast [data-toast-dismiss]`)))
	b.waitJS("the reload toast is gone", `!document.getElementById("reload-toast")`)
	b.checkConsole()
}

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

// TestBrowserDiffAndKeyLayout: on a phone, the tool version diff keeps its four
// columns (line numbers apart from the code) while the execution diff's lines are
// blocks, and a long key of a dl.kv (a resource URI) wraps inside the list.
func TestBrowserDiffAndKeyLayout(t *testing.T) {
	srv := webtest.Start(t, nil)
	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("emulate a phone", chromedp.EmulateViewport(390, 844, chromedp.EmulatePortrait))
	b.do("open the tools", chromedp.Navigate(srv.URL+"/tools"), chromedp.WaitVisible(chromedp.CSS(`main`)))
	uri := "file:///" + strings.Repeat("very-long-directory-name/", 12) + "resource.json"
	b.do("add the three to the page", chromedp.Evaluate[chromedp.Void](`document.querySelector("main").insertAdjacentHTML("beforeend",
		'<div class="diff" role="table"><div class="diff-line add" id="tool-line" role="row"><span class="diff-no">1</span><span class="diff-no">2</span><span class="diff-sign">+</span><span class="diff-text">x</span></div></div>' +
		'<figure class="exec-diff"><pre class="code diff"><ins class="diff-line diff-add" id="exec-line">x</ins></pre></figure>' +
		'<section class="panel"><dl class="kv" id="kv"><dt id="kv-dt">`+uri+`</dt><dd>A resource.</dd></dl></section>')`))
	if got := eval[string](b, `getComputedStyle(document.getElementById("tool-line")).display + " " + getComputedStyle(document.getElementById("tool-line")).gridTemplateColumns.split(" ").length`); got != "grid 4" {
		t.Errorf("the tool version diff's line is %q, want a grid of 4 columns", got)
	}
	if got := eval[string](b, `getComputedStyle(document.getElementById("exec-line")).display`); got != "block" {
		t.Errorf("the execution diff's line is %q, want block", got)
	}
	if got := eval[string](b, `(() => {
		const dl = document.getElementById("kv").getBoundingClientRect(), dt = document.getElementById("kv-dt").getBoundingClientRect();
		return dt.right <= dl.right + 0.5 && dt.width < dl.width ? "" : "dt " + Math.round(dt.width) + "px to " + Math.round(dt.right) + ", dl to " + Math.round(dl.right);
	})()`); got != "" {
		t.Errorf("the long URI does not wrap inside its list: %s", got)
	}
	b.checkConsole()
}

// TestBrowserCategoryEditRow: on a phone, a category's Edit opens its edit row below it
// (not a menu clipped by the scrolling table), by keyboard too, with the focus in its
// first field; Save is reachable inside the page.
func TestBrowserCategoryEditRow(t *testing.T) {
	srv := webtest.Start(t, nil)
	cat, err := srv.Tools.SaveCategory(context.Background(), audit.System, "", tools.CategoryInput{Name: "filesystem",
		Description: "Files and folders on the machine the tools run on, read and written"})
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("emulate a phone", chromedp.EmulateViewport(390, 844, chromedp.EmulatePortrait))
	b.do("open the categories", chromedp.Navigate(srv.URL+"/tools/categories"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=category-row]`)))
	row := `document.getElementById("cat-edit-` + cat.ID + `")`
	if eval[bool](b, row+`.checkVisibility()`) {
		t.Error("the edit row shows before Edit is opened")
	}
	b.do("open Edit by keyboard", chromedp.Focus(chromedp.CSS(`.category-edit-toggle > summary`)), chromedp.KeyEvent(kb.Enter))
	b.waitJS("the edit row shows, its first field focused", row+`.checkVisibility() && document.activeElement.id === "cat-`+cat.ID+`-name"`)
	if got := eval[string](b, `(() => {
		const save = `+row+`.querySelector("button[type=submit]"), r = save.getBoundingClientRect();
		const wrap = save.closest(".table-wrap").getBoundingClientRect();
		const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
		return r.right <= wrap.right + 0.5 && r.left >= wrap.left - 0.5 && (hit === save || save.contains(hit)) ? "" :
			"Save at " + Math.round(r.left) + "–" + Math.round(r.right) + ", the table " + Math.round(wrap.left) + "–" + Math.round(wrap.right);
	})()`); got != "" {
		t.Errorf("the edit form's Save is not reachable: %s", got)
	}
	b.checkConsole()
}
