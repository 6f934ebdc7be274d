package e2e

import (
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/toolwarden/toolwarden/app/webtest"
)

// cutProxy forwards TCP connections to the test server. While it is down it drops
// every connection it carries and refuses new ones: the network of a laptop asleep.
type cutProxy struct {
	URL    string
	ln     net.Listener
	target string

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]struct{}
}

func newCutProxy(t *testing.T, srv *webtest.Server) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{URL: "http://" + ln.Addr().String(), ln: ln, target: srv.Listener.Addr().String(), conns: map[net.Conn]struct{}{}}
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.setDown(true)
	})
	return p
}

func (p *cutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			_, _ = io.Copy(dst, src)
			dst.Close()
			src.Close()
			p.mu.Lock()
			delete(p.conns, dst)
			delete(p.conns, src)
			p.mu.Unlock()
		}
		go pipe(up, c)
		go pipe(c, up)
	}
}

// setDown drops every connection and refuses new ones (true), or carries them again.
func (p *cutProxy) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		for c := range p.conns {
			c.Close()
		}
	}
}

// forgetNetworkErrors drops what the console said about requests the test made fail
// (the socket's handshakes while the network was down, or refused).
func (b *browser) forgetNetworkErrors() {
	b.mu.Lock()
	defer b.mu.Unlock()
	kept := b.problems[:0]
	for _, p := range b.problems {
		// htmx logs the socket's error event as it is ("[object Event]").
		if !strings.Contains(p, "WebSocket connection to") && !strings.Contains(p, "net::ERR_") &&
			!strings.Contains(p, "status of 401") && !strings.Contains(p, "error: [object Event]") {
			kept = append(kept, p)
		}
	}
	b.problems = kept
}

// TestBrowserSessionEndedWhileOfflineSignsIn: the session expires while the page's
// socket is down (the laptop slept past the idle timeout). On wake the socket's
// handshakes are refused with 401, which the browser reports as a close 1006 that the
// ws extension retries forever: the page said "Offline — retrying" and showed stale
// data for good. It now asks for itself after a refused handshake and, sent to sign in,
// goes to the sign-in page, which brings the person back.
func TestBrowserSessionEndedWhileOfflineSignsIn(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	proxy := newCutProxy(t, srv)
	b := newBrowser(t)
	b.do("sign in through the proxy", chromedp.Navigate(proxy.URL+"/login"),
		chromedp.WaitVisible(chromedp.ID("username")),
		chromedp.SendKeys(chromedp.ID("username"), "admin"),
		chromedp.SendKeys(chromedp.ID("password"), webtest.AdminPassword),
		chromedp.Click(chromedp.CSS(`[data-testid=login-submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=system-status]`)))
	b.do("open the tools", chromedp.Navigate(proxy.URL+"/tools"), chromedp.WaitReady("main"))
	b.waitJS("the page is live", `document.getElementById("live-status")?.dataset.state === "open"`)

	proxy.setDown(true)
	b.waitJS("the page says it is offline and retrying",
		`document.querySelector("#live-status [data-live-label]").textContent === "Offline — retrying"`)
	// While it slept, the session passed its end.
	if _, err := srv.Pool.Exec(context.Background(),
		`UPDATE sessions SET expires_at = now() - interval '1 second' WHERE user_id = (SELECT id FROM users WHERE username = 'admin')`); err != nil {
		t.Fatal(err)
	}
	proxy.setDown(false)

	// The page navigates by itself: a poll in it would be cut off, so the tab's
	// address is read from outside until it changes.
	deadline := time.Now().Add(20 * time.Second)
	var loc string
	for {
		got, err := chromedp.Run(b.ctx, chromedp.Location())
		if err == nil {
			loc = got
			if strings.HasPrefix(loc, proxy.URL+"/login") {
				break
			}
		}
		if time.Now().After(deadline) {
			shown, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.getElementById("live-status")?.textContent.trim() ?? ""`))
			t.Fatalf("20 s after the network came back, the tab is still at %s (its badge: %q); want the sign-in page", loc, shown)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if want := proxy.URL + "/login?next=%2Ftools"; loc != want {
		t.Errorf("the tab went to %s; want %s, back to the page", loc, want)
	}
	b.do("the sign-in page loads", chromedp.WaitVisible(chromedp.ID("username")))
	b.forgetNetworkErrors()
	b.checkConsole()
}

// TestBrowserSocketNotRetriedSaysOffline: a socket the server closes with 1000
// (nothing it asked for may be followed) is not reconnected by the ws extension, so the
// badge says "Offline", not "Offline — retrying".
func TestBrowserSocketNotRetriedSaysOffline(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("open the tools", chromedp.Navigate(srv.URL+"/tools"), chromedp.WaitReady("main"))
	b.waitJS("the page is live", `document.getElementById("live-status")?.dataset.state === "open"`)
	b.do("record the closes", chromedp.Evaluate[chromedp.Void](`window.__twCodes = [];
		document.addEventListener("htmx:wsClose", function (e) { window.__twCodes.push(e.detail.event.code); });`))
	// The page now wants a topic nobody may follow: it subscribes again, and the server
	// closes the new socket with 1000.
	b.do("follow only a topic that does not exist", chromedp.Evaluate[chromedp.Void](`
		document.querySelector("[ws-connect]").dataset.topics = "no-such-topic";
		document.body.dispatchEvent(new CustomEvent("htmx:afterSettle", {bubbles: true}));`))
	b.waitJS("the server closed the socket with 1000", `window.__twCodes.includes(1000)`)
	if got := eval[string](b, `document.getElementById("live-status").dataset.state + ": " + document.querySelector("#live-status [data-live-label]").textContent`); got != "closed: Offline" {
		t.Errorf("after a close the page does not retry, the badge reads %q; want %q", got, "closed: Offline")
	}
	b.checkConsole()
}
