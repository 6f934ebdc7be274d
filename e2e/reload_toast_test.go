package e2e

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/views"
)

// TestBrowserReloadToastStays: the toast that says the page missed too many live
// updates is not removed after a while (it gets a Dismiss button), and the header badge
// then says the page is out of date, even when the socket reconnects. An ordinary toast
// still goes by itself.
func TestBrowserReloadToastStays(t *testing.T) {
	t.Parallel()
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
