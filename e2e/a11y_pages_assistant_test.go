package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/toolwarden/toolwarden/app/webtest"
)

// TestBrowserAssistantFailedActionSaysSo: an action the assistant could not do is
// listed with the words "(failed)", not only struck through (which a screen reader does
// not read, and not every eye tells apart).
func TestBrowserAssistantFailedActionSaysSo(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	docsServer(t, srv)
	// Critical findings block an enable without an override: the assistant's fails.
	if _, err := srv.Pool.Exec(context.Background(), `UPDATE mcp_tools SET validation_worst = 'critical' WHERE name = 'search_docs'`); err != nil {
		t.Fatal(err)
	}

	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("open the assistant", chromedp.Navigate(srv.URL+"/assistant"),
		chromedp.WaitVisible(chromedp.CSS(`main [data-testid=assistant-chat]`)))
	c := chat{b: b, scope: "main", input: "assistant-input"}
	c.say("enable docs__search_docs", "search_docs")

	item := `document.querySelector("main [data-testid=assistant-msg-assistant]:last-child .assistant-actions li")`
	if cls := eval[string](b, item+`?.className ?? "no action listed"`); cls != "error" {
		t.Fatalf("the reply's action item: %q, want a failed one (class error)", cls)
	}
	if got := eval[string](b, item+`.innerText.replace(/\s+/g, " ").trim()`); !strings.Contains(got, "(failed)") {
		t.Errorf("the failed action reads %q, want it to say (failed)", got)
	}
	b.checkConsole()
}
