package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/tools"
)

// TestBrowserDiffAndKeyLayout: on a phone, the tool version diff keeps its four
// columns (line numbers apart from the code) while the execution diff's lines are
// blocks, and a long key of a dl.kv (a resource URI) wraps inside the list.
func TestBrowserDiffAndKeyLayout(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
