package e2e

import (
	"strings"
	"testing"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
)

// TestBrowserRunKeepsFocusAndAnnounces: Run pressed from the keyboard keeps the focus
// on Run once the workspace is swapped (not dropped to <body>), and a polite live
// region outside the workspace, the same element run after run, says how it went.
func TestBrowserRunKeepsFocusAndAnnounces(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "mt"})
	ids := enabledLiveTools(t, srv, hs, "mt", "echo")

	b := newBrowser(t)
	if _, err := chromedp.Call(b.ctx, page.AddScriptToEvaluateOnNewDocument,
		page.AddScriptToEvaluateOnNewDocumentParams{Source: panelWatch}); err != nil {
		t.Fatalf("install the page watcher: %v", err)
	}
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("open echo's test panel", chromedp.Navigate(srv.URL+"/tools/"+ids["echo"]+"/test"))
	b.settled("echo's test panel", `[data-testid=test-workspace] [data-testid=test-result-empty]`)
	b.do("type a message", chromedp.SendKeys(chromedp.CSS(`input[name="arg/message"]`), "by keyboard"))

	announcer := `document.querySelector("[data-testid=test-announce]")`
	for i, what := range []string{"first run", "second run"} {
		b.do(what+": mark the page", chromedp.Evaluate[chromedp.Void](
			`document.querySelectorAll("#test-result").forEach(r => r.__stale = true);
			 (a => a && (a.__kept = true))(`+announcer+`)`))
		b.do(what+": Enter on Run", chromedp.Focus(chromedp.CSS(`[data-testid=run-test]`)), chromedp.KeyEvent(kb.Enter))
		b.waitJS(what+": a new result", `(r => !!r && !r.__stale)(document.querySelector("[data-testid=test-result]"))`)
		b.settled(what, `[data-testid=test-result][data-status=success]`)

		if got := eval[string](b, `(a => a.tagName + "#" + a.id)(document.activeElement)`); got != "BUTTON#test-run" {
			t.Errorf("%s: after the result the focus is on %s, want the Run button #test-run", what, got)
		}
		if got := eval[string](b, `(a => !a ? "none" : a.closest("#test-workspace") ? "inside the workspace" :
			(a.getAttribute("role") || "") + "/" + (a.getAttribute("aria-live") || ""))(`+announcer+`)`); got != "status/polite" && got != "status/" {
			t.Fatalf("%s: the result's live region is %s, want role=status outside #test-workspace", what, got)
		}
		if got := eval[string](b, announcer+`.textContent.trim()`); !strings.Contains(got, "Success") {
			t.Errorf("%s: the live region says %q, want the result's status, Success", what, got)
		}
		if i > 0 && !eval[bool](b, announcer+`.__kept === true`) {
			t.Errorf("%s: the live region was replaced; a screen reader announces changes only in one that stays", what)
		}
	}
	b.checkConsole()
}
