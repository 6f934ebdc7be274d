package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/risk"
)

// A live update that replaces a tool card while a person presses its link (the button
// down, the card re-rendered, the button up) does not eat the click: the tool's page
// opens. (A CI run of TestBrowserToolLifecycle waited its whole 90 s for a click that
// a card's live update had eaten.)
func TestBrowserClickSurvivesALiveSwap(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	srv.LiveServer(t, "mt", true, "echo")
	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("open the tool list", chromedp.Navigate(srv.URL+"/tools"),
		chromedp.WaitVisible(chromedp.CSS(`[data-tool="mt__echo"] [data-testid=tool-link]`)))
	b.waitJS("the page is live", `document.getElementById("live-status")?.dataset.state === "open"`)
	x := eval[float64](b, `(() => { const r = document.querySelector('[data-tool="mt__echo"] [data-testid=tool-link]').getBoundingClientRect(); return r.left + r.width / 2 })()`)
	y := eval[float64](b, `(() => { const r = document.querySelector('[data-tool="mt__echo"] [data-testid=tool-link]').getBoundingClientRect(); return r.top + r.height / 2 })()`)
	mouse := func(kind input.DispatchMouseEventType) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, input.DispatchMouseEvent, input.DispatchMouseEventParams{Type: kind, X: x, Y: y,
				Button: input.MouseButtonLeft, ClickCount: 1})
			return err
		})
	}
	b.do("mark the card", chromedp.Evaluate[chromedp.Void](`window.__pressedCard = document.querySelector('[data-tool="mt__echo"]')`))
	b.do("press the tool's link", mouse(input.DispatchMouseEventTypeMousePressed))
	srv.App.SetRisk(t, "mt__echo", risk.Medium) // the card is rendered again, live
	b.waitJS("the card was replaced under the pointer", `!window.__pressedCard.isConnected && document.querySelector('[data-tool="mt__echo"]') !== null`)
	b.do("release the button, and the tool's page opens", mouse(input.DispatchMouseEventTypeMouseReleased),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=tool-head]`)))
	if name := eval[string](b, `document.querySelector("[data-testid=tool-head]").innerText`); !strings.Contains(name, "echo") {
		t.Fatalf("opened %q", name)
	}
	b.checkConsole()
}
