package e2e

import (
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
)

// fillSilentServer opens the new server form and fills it for a stdio server that
// never answers, so that its connection test runs until its limit.
func fillSilentServer(b *browser, srv *webtest.Server) {
	b.t.Helper()
	cmd, args, env := mcptest.StdioCommand(&mcptest.Options{Name: "silent", Hang: true}, "")
	names := make([]string, 0, len(env))
	for k := range env {
		names = append(names, k)
	}
	slices.Sort(names)
	b.do("open the form", chromedp.Navigate(srv.URL+"/servers/new"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=server-form]`)))
	b.do("fill name and command",
		chromedp.SendKeys(chromedp.ID("name"), "silent"),
		chromedp.SendKeys(chromedp.ID("command"), cmd),
		chromedp.SendKeys(chromedp.ID("args"), strings.Join(args, "\n")),
		chromedp.Click(chromedp.CSS(`details.advanced > summary`)),
	)
	for i, k := range names {
		b.do("add variable "+k, chromedp.Click(chromedp.CSS(`[data-testid=add-env]`)))
		row := `#env-rows .secret-row:nth-child(` + itoa(i+1) + `)`
		b.do("fill variable "+k,
			chromedp.SendKeys(chromedp.CSS(row+` input[name=env_name]`), k),
			chromedp.SendKeys(chromedp.CSS(row+` input[name=env_value]`), env[k]),
		)
	}
}

// TestBrowserCancelConnectionTest tries a stdio server that never answers from the
// form: the result panel shows the test's progress while it runs, and Cancel ends it
// at once with a result that says so.
func TestBrowserCancelConnectionTest(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)
	fillSilentServer(b, srv)
	// On a short window the panel starts below the fold; the click brings it into view.
	b.do("a short window", chromedp.EmulateViewport(1000, 420))
	b.do("test the connection", chromedp.Click(chromedp.CSS(`[data-testid=test-connection]`)))
	b.waitJS("the panel shows the test initializing",
		`(document.querySelector("[data-testid=test-step]")||{}).textContent === "connecting and initializing"`)
	b.waitJS("the panel is in view",
		`(function(){var r=document.querySelector("[data-testid=test-result]").getBoundingClientRect();return r.top>=0&&r.bottom<=innerHeight;})()`)
	// The status polls in place: the Cancel button a keyboard user reached keeps its
	// focus through the polls, and Enter cancels (a button replaced under a click lost it).
	b.do("focus Cancel", chromedp.Focus(chromedp.CSS(`[data-testid=test-cancel]`)))
	b.waitJS("the status polled since",
		`/^[1-9]/.test(((document.querySelector("[data-testid=test-running] .muted")||{}).textContent||"").slice(1))`)
	if !eval[bool](b, `document.activeElement && document.activeElement.dataset.testid === "test-cancel"`) {
		t.Fatal("the Cancel button lost the focus while the test ran")
	}
	b.do("cancel it with the keyboard", chromedp.KeyEvent("\r"))
	b.waitJS("the panel says it was cancelled",
		`!!document.querySelector("[data-testid=test-failed]") && document.querySelector("[data-testid=test-failed]").textContent.includes("cancelled")`)
	if eval[bool](b, `!!document.querySelector("[data-testid=test-running]")`) {
		t.Fatal("the panel still shows a running test after Cancel")
	}
}

// TestBrowserConnectionTestPollFails: a poll of a running connection test that fails
// (an error status, or no answer at all) is asked again, so the progress goes on; after
// ten failures in a row the panel says it lost touch. htmx swaps no failed answer, so
// the next poll never started and "Testing… 0 s" stayed forever.
func TestBrowserConnectionTestPollFails(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)
	fillSilentServer(b, srv)

	// The browser's requests for the test's progress go through the test: the first
	// fails with 503, the next ones pass until failAll, then they fail, with 503 and as
	// a connection reset in turn.
	var (
		mu       sync.Mutex
		polls    int // polls asked so far
		failAll  bool
		failFrom int // polls when failAll was set
	)
	paused := chromedp.Events(b.ctx, fetch.RequestPaused)
	if _, err := chromedp.Call(b.ctx, fetch.Enable, fetch.EnableParams{
		Patterns: []*fetch.RequestPattern{{URLPattern: "*/servers/test/runs/*"}}}); err != nil {
		t.Fatalf("intercept the polls: %v", err)
	}
	go func() {
		for ev, err := range paused {
			if err != nil {
				return
			}
			mu.Lock()
			poll := !strings.HasSuffix(ev.Request.URL, "/cancel")
			if poll {
				polls++
			}
			fail503 := poll && (polls == 1 || (failAll && (polls-failFrom)%2 == 1))
			reset := poll && failAll && (polls-failFrom)%2 == 0
			mu.Unlock()
			switch {
			case fail503:
				_, _ = chromedp.Call(b.ctx, fetch.FulfillRequest, fetch.FulfillRequestParams{RequestID: ev.RequestID,
					ResponseCode: 503, Body: []byte("unavailable")})
			case reset:
				_, _ = chromedp.Call(b.ctx, fetch.FailRequest, fetch.FailRequestParams{RequestID: ev.RequestID,
					ErrorReason: network.ErrorReasonConnectionReset})
			default:
				_, _ = chromedp.Call(b.ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
			}
		}
	}()

	b.do("test the connection", chromedp.Click(chromedp.CSS(`[data-testid=test-connection]`)))
	b.waitJS("the status polled again after its first poll failed",
		`/^[1-9]/.test(((document.querySelector("[data-testid=test-running] .muted")||{}).textContent||"").slice(1))`)

	mu.Lock()
	failAll, failFrom = true, polls
	mu.Unlock()
	b.waitJS("the panel says it lost touch", `!!document.querySelector("[data-testid=test-poll-failed]")`)
	mu.Lock()
	failed := polls - failFrom
	mu.Unlock()
	if failed != 10 {
		t.Fatalf("the panel gave up after %d failed polls in a row, want 10", failed)
	}
	if msg := eval[string](b, `document.querySelector("[data-testid=test-poll-failed]").textContent`); !strings.Contains(msg, "Test again") {
		t.Fatalf("the message when the polls failed: %q", msg)
	}
}
