package e2e

import (
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/toolwarden/toolwarden/app/webtest"
)

// Tests share one chromium, each in a window of its own: every test's page has the
// focus all the same (focus and blur must not depend on which test opened a window last).
func TestBrowserEachTestsPageHasTheFocus(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	first, second := newBrowser(t), newBrowser(t)
	for _, b := range []*browser{first, second} {
		b.do("open the sign-in page", chromedp.Navigate(srv.URL+"/login"), chromedp.WaitReady("main"))
	}
	for i, b := range []*browser{first, second} {
		if !eval[bool](b, `document.hasFocus()`) {
			t.Errorf("browser %d: the page does not have the focus", i+1)
		}
	}
}
