package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
)

// TestBrowserChangeOwnPassword opens Password from the user menu, is told at the field
// when the current password is wrong, changes it, stays signed in, and the person's
// other session ends.
func TestBrowserChangeOwnPassword(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	const pw, next = "browser-password-1", "browser-password-2"
	srv.CreateUser(t, "paula", auth.RoleToolUser, pw)
	other := srv.Login(t, "paula", pw)
	b := newBrowser(t)
	b.login(srv, "paula", pw)

	b.do("open Password from the user menu",
		chromedp.Click(chromedp.CSS(`[data-testid=account-password]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=password-form]`)),
	)
	b.do("give a wrong current password",
		chromedp.SendKeys(chromedp.ID("current-password"), "not-my-password"),
		chromedp.SendKeys(chromedp.ID("new-password"), next),
		chromedp.Click(chromedp.CSS(`[data-testid=change-password]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=error-current_password]`)),
	)
	// The answer is a new page whose password fields are empty.
	b.do("change it",
		chromedp.WaitVisible(chromedp.ID("current-password")),
		chromedp.SendKeys(chromedp.ID("current-password"), pw),
		chromedp.SendKeys(chromedp.ID("new-password"), next),
		chromedp.Click(chromedp.CSS(`[data-testid=change-password]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=password-changed]`)),
	)
	if got := eval[string](b, `document.querySelector("[data-testid=current-user]").textContent`); !strings.Contains(got, "paula") {
		t.Fatalf("after the change the page shows %q; want paula still signed in", got)
	}
	res := srv.Get(t, other, "/tools")
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("paula's other session after the change: %d, want 303 to sign in", res.StatusCode)
	}
	srv.Login(t, "paula", next)
	b.checkConsole("status of 422") // the refused change
}
