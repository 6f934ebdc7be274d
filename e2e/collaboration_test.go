package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/app/webtest"
)

// TestBrowserCollaborationAnswer: an agent (a real go-sdk client over /mcp with the
// person's token) calls builtin__user_collaboration; the person, signed in with a page
// open, sees the question appear live, types "yes, go ahead" and sends it; the waiting
// call receives the answer, and the card says it was answered.
func TestBrowserCollaborationAnswer(t *testing.T) {
	t.Parallel()
	srv, cs := collaborationAgent(t)

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

// TestBrowserCollaborationEmptyAnswer: Enter in the empty answer box used to send
// nothing, and the server's refusal replaced the whole question (prompt, box, buttons)
// with an error line, the focus dropping to <body> and the agent blocked until a
// reload. The box now asks for an answer before anything is sent; an answer the server
// refuses (spaces only) brings the question back with the error at the box and the
// words as typed; the agent keeps waiting, and a real answer then reaches it, the focus
// on the line that says so.
func TestBrowserCollaborationEmptyAnswer(t *testing.T) {
	t.Parallel()
	srv, cs := collaborationAgent(t)
	// A failure leaves the call waiting: cancelled first, so that closing does not wait.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("open the tools", chromedp.Navigate(srv.URL+"/tools"))
	b.waitJS("the page is live", `document.querySelector("#live-status")?.dataset.state === "open"`)
	out := mcpCall(ctx, cs, "builtin__user_collaboration", map[string]any{"prompt": "May I deploy to staging?"}, 0)
	b.waitJS("the question appears", `!!document.querySelector("[data-testid=collaboration-answer]")`)

	// The question is a region named by its prompt, not an alertdialog that never
	// takes the focus.
	if !eval[bool](b, `(() => {
		const card = document.querySelector("[data-testid=collaboration]");
		const name = document.getElementById(card.getAttribute("aria-labelledby"));
		return card.getAttribute("role") === "region" && name?.textContent === "May I deploy to staging?";
	})()`) {
		t.Errorf("the question's card: %s", eval[string](b, `document.querySelector("[data-testid=collaboration]").outerHTML.slice(0, 300)`))
	}
	cardIntact := func(what string) {
		t.Helper()
		if !eval[bool](b, `!!document.querySelector("[data-testid=collaboration] [data-testid=collaboration-answer]") &&
			document.querySelector("[data-testid=collaboration-prompt]")?.textContent === "May I deploy to staging?" &&
			!!document.querySelector("[data-testid=collaboration-approve]") && !document.querySelector("[data-testid=collaboration-answered]")`) {
			t.Fatalf("%s: the question is gone; the stack reads %q", what,
				eval[string](b, `document.querySelector("#collaborations").innerText`))
		}
		select {
		case o := <-out:
			t.Fatalf("%s: the call answered: %+v %v", what, o.res, o.err)
		default:
		}
	}

	// Enter in the empty box: the browser asks for an answer (the box is required),
	// nothing is sent. Either that or the old request's answer ends the wait.
	b.do("watch for a refused box", chromedp.Evaluate[chromedp.Void](
		`document.addEventListener("invalid", e => { window.__twInvalid = e.target.id; }, true)`))
	b.do("press Enter in the empty box", chromedp.SendKeys(chromedp.CSS(`[data-testid=collaboration-answer]`), kb.Enter))
	b.waitJS("the empty answer is refused or answered", `!!window.__twInvalid || !!document.querySelector("[data-testid=collaboration-answered]")`)
	cardIntact("an empty answer")
	if !eval[bool](b, `(() => { const i = document.querySelector("[data-testid=collaboration-answer]");
		return i.validity.valueMissing && document.activeElement === i; })()`) {
		t.Errorf("the empty box is not flagged, or lost the focus (on %s)", eval[string](b, `document.activeElement?.outerHTML.slice(0, 120) ?? "nothing"`))
	}

	// Spaces pass the browser's check; the server refuses them. The question comes
	// back with the error at the box (aria-invalid, aria-describedby), what was typed,
	// and the focus in the box.
	b.do("send spaces", chromedp.SendKeys(chromedp.CSS(`[data-testid=collaboration-answer]`), "   "+kb.Enter))
	b.waitJS("the refusal is shown", `!!document.querySelector("[data-testid=collaboration-answer-error]") || !!document.querySelector("[data-testid=collaboration-answered]")`)
	cardIntact("an answer of spaces")
	if !eval[bool](b, `(() => {
		const i = document.querySelector("[data-testid=collaboration-answer]");
		const e = document.querySelector("[data-testid=collaboration-answer-error]");
		return i.getAttribute("aria-invalid") === "true" && (i.getAttribute("aria-describedby") || "").split(" ").includes(e.id) &&
			/say something/i.test(e.textContent) && i.value === "   " && document.activeElement === i;
	})()`) {
		t.Errorf("the refusal is not tied to the box: %s; focus on %s",
			eval[string](b, `document.querySelector("[data-testid=collaboration]").outerHTML`),
			eval[string](b, `document.activeElement?.outerHTML.slice(0, 120) ?? "nothing"`))
	}

	// A real answer reaches the agent; the focus is on the line that says so.
	b.do("answer", chromedp.Evaluate[chromedp.Void](`document.querySelector("[data-testid=collaboration-answer]").value = ""`),
		chromedp.SendKeys(chromedp.CSS(`[data-testid=collaboration-answer]`), "yes, go ahead"+kb.Enter))
	b.do("answered", chromedp.WaitVisible(chromedp.CSS(`[data-testid=collaboration-answered]`)))
	res := mcpWait(t, "the waiting call", out)
	if res.IsError || !strings.Contains(mcpText(res), "User response: yes, go ahead") {
		t.Fatalf("the call got %+v %q", res, mcpText(res))
	}
	b.waitJS("the focus is on the answered line", `document.activeElement?.dataset.testid === "collaboration-answered"`)
	b.checkConsole()
}

// collaborationAgent starts Toolwarden with builtin__user_collaboration enabled and
// connects an agent (the go-sdk client, an admin's token) to its /mcp.
func collaborationAgent(t *testing.T) (*webtest.Server, *mcp.ClientSession) {
	t.Helper()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	srv.App.Enable(t, "builtin__user_collaboration")
	tr := &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: &http.Client{Transport: bearerRT{srv.Token(t, "admin")}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1.0"}, nil).Connect(context.Background(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return srv, cs
}
