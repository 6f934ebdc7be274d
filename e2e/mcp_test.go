package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/gateway"
)

// bearerRT adds an API token to every request of a real MCP client.
type bearerRT struct{ token string }

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

type mcpOutcome struct {
	res *mcp.CallToolResult
	err error
}

// mcpCall starts a tools/call of a real go-sdk client; hold (seconds, 0: the server's)
// asks the gateway to hold it less.
func mcpCall(ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any, hold float64) <-chan mcpOutcome {
	p := &mcp.CallToolParams{Name: name, Arguments: args}
	if hold > 0 {
		p.Meta = mcp.Meta{gateway.HoldMeta: hold}
	}
	out := make(chan mcpOutcome, 1)
	go func() {
		res, err := cs.CallTool(ctx, p)
		out <- mcpOutcome{res, err}
	}()
	return out
}

func mcpText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func mcpWait(t *testing.T, what string, ch <-chan mcpOutcome) *mcp.CallToolResult {
	t.Helper()
	select {
	case o := <-ch:
		if o.err != nil {
			t.Fatalf("%s: %v", what, o.err)
		}
		return o.res
	case <-time.After(60 * time.Second):
		t.Fatalf("%s: the call did not come back", what)
	}
	return nil
}

// TestBrowserApprovalInsideMCPCall: an agent's HIGH call through /mcp waits in the
// request while the approver, in chromium, finds it in /approvals, sees which MCP
// client asks, types the phrase and approves; the agent receives the real result in
// the same call. A rejection reaches the agent with the reviewer's reason. A call
// still undecided when its hold ends tells the agent how to wait, and
// toolwarden__await_execution returns the result once the approver has opened the
// link it gave and approved. An agent that gives up cancels its call, and the open
// page shows it live.
func TestBrowserApprovalInsideMCPCall(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "mt"})
	enabledLiveTools(t, srv, hs, "mt", "write-note")
	srv.CreateUser(t, "tina", "tool_user", "tina-password-123")
	tr := &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: &http.Client{Transport: bearerRT{srv.Token(t, "tina")}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "claude-code", Version: "2.0.14"}, nil).Connect(context.Background(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	ctx := context.Background()

	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("open the approvals", chromedp.Navigate(srv.URL+"/approvals"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=approvals-empty]`)))
	b.waitJS("the page is live", `document.querySelector("#live-status")?.dataset.state === "open"`)

	// 1. Held, approved with the phrase, the real result in the same call.
	out := mcpCall(ctx, cs, "mt__write-note", map[string]any{"text": "ship it"}, 0)
	b.waitJS("the held call appears in the approvals without a reload", `!!document.querySelector("[data-testid=approval-item]")`)
	if got := eval[string](b, `document.querySelector("[data-testid=approval-client]")?.textContent ?? ""`); got != "MCP client claude-code 2.0.14" {
		t.Errorf("the approval card names the client %q", got)
	}
	b.do("open it", chromedp.Click(chromedp.CSS(`[data-testid=approval-title]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=danger-input]`)))
	if got := eval[string](b, `document.querySelector("[data-testid=execution-requester]").textContent`); !strings.Contains(got, "tina") ||
		!strings.Contains(got, "MCP client claude-code 2.0.14") {
		t.Errorf("the requester reads %q, want tina and the MCP client", got)
	}
	select {
	case o := <-out:
		t.Fatalf("the call answered before the approval: %+v %v", o.res, o.err)
	default:
	}
	b.do("type the phrase and approve", chromedp.SendKeys(chromedp.CSS(`[data-testid=danger-input]`), "mt__write-note"),
		chromedp.Click(chromedp.CSS(`[data-testid=danger-confirm]`)))
	if res := mcpWait(t, "the approved call", out); res.IsError || mcpText(res) != "ok" {
		t.Fatalf("the approved call: got %+v %q, want the tool's own result", res, mcpText(res))
	}
	b.do("the page shows the success", chromedp.WaitVisible(chromedp.CSS(`[data-testid=execution-status][data-status=success]`)))

	// 2. Rejected with a reason, which the agent reads.
	out = mcpCall(ctx, cs, "mt__write-note", map[string]any{"text": "on friday"}, 0)
	b.do("back to the approvals", chromedp.Navigate(srv.URL+"/approvals"))
	b.waitJS("the second call waits", `!!document.querySelector("[data-testid=approval-item]")`)
	b.do("open it and reject", chromedp.Click(chromedp.CSS(`[data-testid=approval-title]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=reject-open]`)),
		chromedp.Click(chromedp.CSS(`[data-testid=reject-open]`)),
		chromedp.SendKeys(chromedp.CSS(`[data-testid=reject-reason]`), "not on a friday"),
		chromedp.Click(chromedp.CSS(`[data-testid=reject-submit]`)))
	if res := mcpWait(t, "the rejected call", out); !res.IsError || mcpText(res) != "Rejected by admin: not on a friday" {
		t.Fatalf("the rejected call: got %+v %q", res, mcpText(res))
	}
	b.do("the page says who rejected it", chromedp.WaitVisible(chromedp.CSS(`[data-testid=outcome]`)))
	if got := eval[string](b, `document.querySelector("[data-testid=outcome]").textContent`); !strings.Contains(got, "Rejected by admin: not on a friday") {
		t.Errorf("the rejected execution's outcome reads %q", got)
	}

	// 3. Undecided when the hold ends: the agent learns how to wait; the approver opens
	// the link the agent was given; the wait returns the result.
	res := mcpWait(t, "a call held one second", mcpCall(ctx, cs, "mt__write-note", map[string]any{"text": "later"}, 1))
	var p gateway.Pending
	if raw, _ := json.Marshal(res.StructuredContent); !res.IsError || json.Unmarshal(raw, &p) != nil || p.Status != "awaiting_approval" {
		t.Fatalf("an undecided call: got %+v %q", res, mcpText(res))
	}
	waited := mcpCall(ctx, cs, gateway.AwaitTool, map[string]any{"execution_id": p.ExecutionID}, 0)
	b.do("open the approval link the agent got", chromedp.Navigate(p.ApproveURL), chromedp.WaitVisible(chromedp.CSS(`[data-testid=danger-input]`)),
		chromedp.SendKeys(chromedp.CSS(`[data-testid=danger-input]`), "mt__write-note"),
		chromedp.Click(chromedp.CSS(`[data-testid=danger-confirm]`)))
	if res := mcpWait(t, "await_execution", waited); res.IsError || mcpText(res) != "ok" {
		t.Fatalf("await_execution after the approval: got %+v %q", res, mcpText(res))
	}
	b.do("the page shows the success", chromedp.WaitVisible(chromedp.CSS(`[data-testid=execution-status][data-status=success]`)))

	// 4. The agent gives up: its call is cancelled, live on the open page.
	cctx, cancel := context.WithCancel(ctx)
	out = mcpCall(cctx, cs, "mt__write-note", map[string]any{"text": "never mind"}, 0)
	b.do("back to the approvals", chromedp.Navigate(srv.URL+"/approvals"))
	// Found and clicked in one step: the list is live, and a push that redraws it between
	// finding the link and clicking it made chromedp's click miss the node (once, in a
	// loaded run).
	b.waitJS("the call waits, and its link is clicked",
		`(() => { const a = document.querySelector("[data-testid=approval-item] [data-testid=approval-title]"); if (!a) return false; a.click(); return true })()`)
	b.do("open it", chromedp.WaitVisible(chromedp.CSS(`[data-testid=danger-input]`)))
	b.waitJS("the page is live", `document.querySelector("#live-status")?.dataset.state === "open"`)
	cancel()
	<-out
	b.waitJS("the page shows the client's cancellation", `(document.querySelector("[data-testid=outcome]")?.textContent ?? "").includes("Cancelled by tina: cancelled by the client")`)
	b.checkConsole()
}
