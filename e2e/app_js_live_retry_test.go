package e2e

import (
	"testing"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/toolwarden/toolwarden/app/webtest"
)

// closeAs lets a test report the next close of the page's live socket with the code
// and reason it chooses (window.__twCloseAs, __twCloseReason): a script may close a
// socket only with 1000 or 3000-4999, not with the 1001 a proxy going away sends. The
// socket's own close event is stopped before the ws extension's handler and replaced.
const closeAs = `(function () {
	var W = window.WebSocket;
	window.__twCloseAs = 0;
	window.__twCloseReason = "";
	window.__twLive = [];
	window.WebSocket = class extends W {
		constructor(url, protocols) {
			super(url, protocols);
			var sock = this;
			if (!/\/ws$/.test(String(url)) || String(url).indexOf("/terminals/") >= 0) return;
			window.__twLive.push(this);
			this.addEventListener("close", function (ev) {
				if (!window.__twCloseAs || ev.__twFake) return;
				var fake = new CloseEvent("close", { code: window.__twCloseAs, reason: window.__twCloseReason, wasClean: true });
				fake.__twFake = true;
				window.__twCloseAs = 0;
				ev.stopImmediatePropagation();
				sock.dispatchEvent(fake);
			});
		}
	};
})();`

// TestBrowserLiveRetriesGoingAway: a proxy restarting closes the live socket with 1001
// (or a plain 1000), which the ws extension does not retry: the page said "Offline"
// until reloaded. It reconnects, after its usual wait.
func TestBrowserLiveRetriesGoingAway(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	b := newBrowser(t)
	if _, err := chromedp.Call(b.ctx, page.AddScriptToEvaluateOnNewDocument,
		page.AddScriptToEvaluateOnNewDocumentParams{Source: closeAs}); err != nil {
		t.Fatalf("install the close reporter: %v", err)
	}
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("open the tools", chromedp.Navigate(srv.URL+"/tools"), chromedp.WaitReady("main"))
	b.waitJS("the page is live", `window.__twLive.length === 1 && document.getElementById("live-status")?.dataset.state === "open"`)
	for i, c := range []struct{ code, reason string }{{"1001", "going away"}, {"1000", "proxy restart"}} {
		b.do("close with "+c.code, chromedp.Evaluate[chromedp.Void](`window.__twCloseAs = `+c.code+`; window.__twCloseReason = "`+c.reason+`";
			window.__twLive[window.__twLive.length - 1].close();`))
		b.waitJS("a "+c.code+" close: the page says it retries", `document.querySelector("#live-status [data-live-label]").textContent !== "Offline"`)
		b.waitJS("a "+c.code+" close: the page is live again", `window.__twLive.length === `+itoa(i+2)+` &&
			window.__twLive[`+itoa(i+1)+`].readyState === WebSocket.OPEN && document.getElementById("live-status").dataset.state === "open"`)
	}
	b.checkConsole()
}

// TestBrowserLiveStatusSaysOnlyTheEnd: the header's badge was a live region, so a
// socket retrying was read out every few seconds ("Connecting…", "Offline — retrying")
// for as long as the server was away. It is no live region; the end of live updates (a
// close not retried) is said once.
func TestBrowserLiveStatusSaysOnlyTheEnd(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("open the tools", chromedp.Navigate(srv.URL+"/tools"), chromedp.WaitReady("main"))
	b.waitJS("the page is live", `document.getElementById("live-status")?.dataset.state === "open"`)
	if live := eval[string](b, `(function (s) {
		var r = s.closest("[role=status], [role=alert], [role=log], [aria-live]");
		return r ? r.outerHTML.slice(0, 120) : "";
	})(document.getElementById("live-status"))`); live != "" {
		t.Errorf("the live badge is inside a live region: %s", live)
	}
	// The page now wants a topic nobody may follow: the server closes with 1000, for good.
	b.do("follow only a topic that does not exist", chromedp.Evaluate[chromedp.Void](`
		document.querySelector("[ws-connect]").dataset.topics = "no-such-topic";
		document.body.dispatchEvent(new CustomEvent("htmx:afterSettle", {bubbles: true}));`))
	b.waitJS("the page says live updates stopped", `document.getElementById("live-status").dataset.state === "closed" &&
		document.getElementById("announce").textContent === "Live updates stopped: reload the page to see the latest."`)
	b.checkConsole()
}
