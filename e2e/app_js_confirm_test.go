package e2e

import (
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
)

// TestBrowserConfirmAsksEveryTime: a form confirmed once was marked confirmed for good,
// so once its post left the page as it was (stopped, failed, or a Back to the page the
// browser kept), the next submit went without asking. Each submit asks.
func TestBrowserConfirmAsksEveryTime(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)
	reset := `[data-testid=user-row][data-username=alice] [data-testid=reset-password]`
	b.do("open the users", chromedp.Navigate(srv.URL+"/users"), chromedp.WaitVisible(chromedp.CSS(reset)))
	// The post is stopped before it leaves (as Esc or a dropped network would leave the
	// page): a capturing listener on window runs before the page's.
	b.do("hold back the posts", chromedp.Evaluate[chromedp.Void](`window.__twPosts = 0;
		window.addEventListener("submit", function (e) { e.preventDefault(); window.__twPosts++; }, true);`))
	for i, what := range []string{"first", "second"} {
		b.do(what+" reset", chromedp.Click(chromedp.CSS(reset)))
		b.waitJS(what+" reset: the confirm dialog asks", `document.getElementById("confirm-dialog").open`)
		b.do(what+" reset: confirm", chromedp.Click(chromedp.CSS(`[data-testid=confirm-ok]`)))
		b.waitJS(what+" reset: submitted", `window.__twPosts === `+itoa(2*(i+1))+` && !document.getElementById("confirm-dialog").open`)
		if eval[bool](b, `!!document.querySelector("form[data-confirmed]")`) {
			t.Errorf("%s reset: the form stays marked confirmed after its submit", what)
		}
	}
	// A page the browser brings back from its cache: no mark left from before.
	b.do("mark a form and come back from the cache", chromedp.Evaluate[chromedp.Void](`
		document.querySelector("form[data-confirm]").dataset.confirmed = "yes";
		window.dispatchEvent(new PageTransitionEvent("pageshow", { persisted: true }));`))
	if eval[bool](b, `!!document.querySelector("form[data-confirmed]")`) {
		t.Error("a page back from the cache keeps a form marked confirmed")
	}
	b.checkConsole()
}
