package e2e

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/registry"
)

// TestBrowserServersLiveElsewhere: a server added elsewhere gets its card on the open
// list, with the counts, once; an edit elsewhere changes the open server page's
// Connection panel, not only its head.
func TestBrowserServersLiveElsewhere(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	ctx := context.Background()
	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)

	b.do("open the server list", chromedp.Navigate(srv.URL+"/servers"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=no-servers]`)))
	b.waitJS("the page's live connection is open", `document.querySelector("#live-status")?.dataset.state === "open"`)
	b.do("choose a status filter (not applied)", chromedp.SetValue(chromedp.ID("status"), registry.StatusDisconnected))
	sv, err := srv.Registry.CreateServer(ctx, audit.System, registry.Spec{Name: "elsewhere", Type: registry.TypeStreamableHTTP,
		URL: "http://127.0.0.1:9/mcp", Enabled: false})
	if err != nil {
		t.Fatal(err)
	}
	b.waitJS("its card appears", `!!document.querySelector("#server-cards > #server-card-`+sv.ID+`")`)
	b.waitJS("the counts follow", `document.querySelector("[data-testid=server-total]").textContent === "(1)" &&
		document.querySelector("#status option[value=disconnected]").textContent === "Disconnected (1)"`)
	if !eval[bool](b, `document.getElementById("status").value === "disconnected" && !document.querySelector("[data-testid=no-servers]")`) {
		t.Error("the chosen status was lost, or the list still says there are no servers")
	}
	desc := "described elsewhere"
	if _, err := srv.Registry.UpdateServer(ctx, audit.System, sv.ID, registry.Patch{Description: &desc}); err != nil {
		t.Fatal(err)
	}
	b.waitJS("the card changes", `(document.getElementById("server-card-`+sv.ID+`")?.textContent || "").includes("described elsewhere")`)
	if n := eval[int](b, `document.querySelectorAll("[data-testid=server-card]").length`); n != 1 {
		t.Errorf("after the edit the list shows %d cards, want 1", n)
	}

	b.do("open its page", chromedp.Navigate(srv.URL+"/servers/"+sv.ID),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=server-connection]`)))
	b.waitJS("the page's live connection is open", `document.querySelector("#live-status")?.dataset.state === "open"`)
	moved := "http://127.0.0.1:10/mcp"
	if _, err := srv.Registry.UpdateServer(ctx, audit.System, sv.ID, registry.Patch{URL: &moved}); err != nil {
		t.Fatal(err)
	}
	b.waitJS("the Connection panel shows the new URL", `document.querySelector("[data-testid=server-connection]").textContent.includes("`+moved+`")`)
	b.checkConsole()
}
