package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/app/webtest"
)

// TestBrowserCollaborationAnswer: an agent (a real go-sdk client over /mcp with the
// person's token) calls builtin__user_collaboration; the person, signed in with a page
// open, sees the question appear live, types "yes, go ahead" and sends it; the waiting
// call receives the answer, and the card says it was answered.
func TestBrowserCollaborationAnswer(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	srv.App.Enable(t, "builtin__user_collaboration")
	tr := &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: &http.Client{Transport: bearerRT{srv.Token(t, "admin")}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1.0"}, nil).Connect(context.Background(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("open the tools", chromedp.Navigate(srv.URL+"/tools"))
	b.waitJS("the page is live", `document.querySelector("#live-status")?.dataset.state === "open"`)

	out := mcpCall(context.Background(), cs, "builtin__user_collaboration",
		map[string]any{"prompt": "May I deploy to staging?", "authorize_operation": "terminal_operations.run_command"}, 0)
	b.waitJS("the question appears without a reload", `!!document.querySelector("[data-testid=collaboration]")`)
	b.waitJS("the navigation counts the question", `document.querySelector("#nav-questions-count")?.dataset.count === "1"`)
	if got := eval[string](b, `document.querySelector("[data-testid=collaboration-prompt]").textContent`); got != "May I deploy to staging?" {
		t.Fatalf("the prompt reads %q", got)
	}
	select {
	case o := <-out:
		t.Fatalf("the call answered before the person: %+v %v", o.res, o.err)
	default:
	}
	b.do("answer", chromedp.SendKeys(chromedp.CSS(`[data-testid=collaboration-answer]`), "yes, go ahead"),
		chromedp.Click(chromedp.CSS(`[data-testid=collaboration-send]`)))
	b.do("answered", chromedp.WaitVisible(chromedp.CSS(`[data-testid=collaboration-answered]`)))
	res := mcpWait(t, "the waiting call", out)
	if res.IsError || !strings.Contains(mcpText(res), "User response: yes, go ahead") {
		t.Fatalf("the call got %+v %q", res, mcpText(res))
	}
	if got := eval[string](b, `document.querySelector("[data-testid=collaboration-answered]").textContent`); !strings.Contains(got, "Approved") {
		t.Errorf("the card reads %q", got)
	}
	b.waitJS("no question is left", `!document.querySelector("[data-testid=collaboration]")`)
	b.waitJS("the navigation's count is gone", `document.querySelector("#nav-questions-count")?.dataset.count === "0" && document.querySelector("#nav-questions-count").hidden`)

	// Reject, from another page: the agent is told no.
	b.do("open the approvals", chromedp.Navigate(srv.URL+"/approvals"))
	b.waitJS("the page is live", `document.querySelector("#live-status")?.dataset.state === "open"`)
	out = mcpCall(context.Background(), cs, "builtin__user_collaboration", map[string]any{"prompt": "Drop the cache?"}, 0)
	b.waitJS("the second question appears", `document.querySelector("[data-testid=collaboration-prompt]")?.textContent === "Drop the cache?"`)
	b.do("reject", chromedp.Click(chromedp.CSS(`[data-testid=collaboration-reject]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=collaboration-answered]`)))
	if res := mcpWait(t, "the rejected question", out); res.IsError || !strings.HasPrefix(mcpText(res), "The user declined: reject") {
		t.Fatalf("the call got %+v %q", res, mcpText(res))
	}
	b.checkConsole()
}
