package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/builtin"
)

// sentLog records what the page's terminal sockets send (window.__twSent), decoded.
const sentLog = `(function () {
	var send = WebSocket.prototype.send;
	window.__twSent = [];
	WebSocket.prototype.send = function (d) {
		if (typeof d === "string" && String(this.url).indexOf("/terminals/") >= 0) {
			try { window.__twSent.push(JSON.parse(d)); } catch (e) { /* not ours */ }
		}
		return send.call(this, d);
	};
})();`

// terminalText is the terminal's whole buffer, wrapped lines joined.
const terminalText = `(function () { var b = window.twTerminal.buffer.active, out = "";
	for (var i = 0; i < b.length; i++) { var l = b.getLine(i);
		out += (i > 0 && !l.isWrapped ? "\n" : "") + l.translateToString(true); }
	return out; })()`

// TestBrowserTerminalRefusesKeysWhileDisconnected: keys typed while the terminal's
// socket was down were dropped without a word while the terminal went on taking them,
// so a command typed across a reconnect ran with its middle missing ("rm -rf ~/" of
// "rm -rf ~/proj/build") at the next Enter. The terminal takes no keys while
// disconnected, says so in the terminal when one is pressed, and sends none of them later.
func TestBrowserTerminalRefusesKeysWhileDisconnected(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	alice := srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	ws, err := srv.App.Builtin.Workspace("conv-e2e-refuse")
	if err != nil {
		t.Fatal(err)
	}
	srv.App.Enable(t, builtin.TerminalToolName)
	term, _, err := srv.App.Terminals.OpenPTY(builtin.TerminalCaller{UserID: alice.ID, UserName: "alice"}, "conv-e2e-refuse", ws)
	if err != nil {
		t.Fatal(err)
	}
	termSockets := `window.__twSockets.filter(function (s) { return s.url.includes("/terminals/` + term.ID + `/ws"); })`
	const notice = "[not connected: keys not sent]"

	b := newBrowser(t)
	for _, src := range []string{socketLog, sentLog} {
		if _, err := chromedp.Call(b.ctx, page.AddScriptToEvaluateOnNewDocument,
			page.AddScriptToEvaluateOnNewDocumentParams{Source: src}); err != nil {
			t.Fatalf("install the socket scripts: %v", err)
		}
	}
	b.login(srv, "alice", "alice-password-1")
	b.do("open the terminal", chromedp.Navigate(srv.URL+"/terminals/"+term.ID), chromedp.WaitVisible(chromedp.CSS(`#terminal .xterm-rows`)))
	b.waitJS("the terminal is connected", `document.getElementById("terminal").dataset.state === "connected"`)
	b.do("type the start of a command", typeInto("echo kept"))
	webtest.WaitFor(t, 10*time.Second, func() bool {
		out, _, _ := term.Output(0)
		return strings.Contains(string(out), "echo kept")
	}, "the shell echoes what was typed")

	b.do("drop the socket, the server unreachable", chromedp.Evaluate[chromedp.Void](`window.__twHold = true; `+termSockets+`.forEach(function (s) { s.close(); })`))
	b.waitJS("the page is reconnecting", `document.getElementById("terminal").dataset.state === "reconnecting"`)
	if !eval[bool](b, `window.twTerminal.options.disableStdin`) {
		t.Error("while disconnected the terminal takes keys")
	}
	b.do("type while disconnected", typeInto("-lost"))
	b.waitJS("the terminal says the keys were not sent", terminalText+`.includes("`+notice+`")`)
	if n := strings.Count(eval[string](b, terminalText), notice); n != 1 {
		t.Errorf("the notice shows %d times for one burst of keys, want once", n)
	}

	b.do("the server is back", chromedp.Evaluate[chromedp.Void](`window.__twHold = false`))
	b.waitJS("the terminal is connected again", `document.getElementById("terminal").dataset.state === "connected" && !window.twTerminal.options.disableStdin`)
	b.do("press Enter", typeInto(kb.Enter))
	webtest.WaitFor(t, 10*time.Second, func() bool {
		out, _, _ := term.Output(0)
		return strings.Contains(string(out), "\rkept\r\n") // not "echo kept": its output
	}, "the command runs as it was before the disconnect")
	if out, _, _ := term.Output(0); strings.Contains(string(out), "lost") {
		t.Errorf("keys typed while disconnected reached the terminal: %q", out)
	}
	typed := `window.__twSent.filter(function (m) { return m.type === "input"; }).map(function (m) { return m.data; }).join("")`
	if sent := eval[string](b, typed); sent != "echo kept\r" {
		t.Errorf("the page sent the keys %q; want %q, nothing typed while disconnected", sent, "echo kept\r")
	}
	b.checkConsole()
}

// TestBrowserTerminalAnswersFromThePageInUse: xterm.js answers a program's queries
// (where is the cursor, what terminal is this) on every page that may type, so the
// program got a copy from each (an administrator watching, the owner's other tab) and
// read the extra ones as typed. A page that may type but has no focus and does not set
// the size (an administrator's, in the background) does not answer; focused, it does.
func TestBrowserTerminalAnswersFromThePageInUse(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	alice := srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	ws, err := srv.App.Builtin.Workspace("conv-e2e-answers")
	if err != nil {
		t.Fatal(err)
	}
	srv.App.Enable(t, builtin.TerminalToolName)
	who := builtin.TerminalCaller{UserID: alice.ID, UserName: "alice"}
	term, _, err := srv.App.Terminals.OpenPTY(who, "conv-e2e-answers", ws)
	if err != nil {
		t.Fatal(err)
	}
	// Whether the page's window has the focus, as the test says (window.__twFocus).
	const focus = `window.__twFocus = false; document.hasFocus = function () { return window.__twFocus; };`
	b := newBrowser(t)
	for _, src := range []string{sentLog, focus} {
		if _, err := chromedp.Call(b.ctx, page.AddScriptToEvaluateOnNewDocument,
			page.AddScriptToEvaluateOnNewDocumentParams{Source: src}); err != nil {
			t.Fatalf("install the page scripts: %v", err)
		}
	}
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("open the terminal", chromedp.Navigate(srv.URL+"/terminals/"+term.ID), chromedp.WaitVisible(chromedp.CSS(`#terminal .xterm-rows`)))
	b.waitJS("the administrator's page may type", `document.getElementById("terminal").dataset.state === "connected" &&
		document.getElementById("terminal").dataset.sizes === "false"`)
	answers := `window.__twSent.filter(function (m) { return m.type === "input" && /^\x1b\[[\d;?]*[Rc]$/.test(m.data); }).length`

	ask := func(marker string) {
		t.Helper()
		// The shell prints the query, then the marker; the page has answered the query
		// by the time it shows the marker.
		if err := term.Input(who, `printf '\033[6n\033[c'; echo `+marker+`-$((1+1))`+"\n"); err != nil {
			t.Fatal(err)
		}
		b.waitJS("the page shows "+marker, terminalText+`.includes("`+marker+`-2")`)
	}
	ask("bg")
	if n := eval[int](b, answers); n != 0 {
		t.Errorf("a page in the background that does not set the size answered %d queries; want none", n)
	}
	b.do("focus the window", chromedp.Evaluate[chromedp.Void](`window.__twFocus = true`))
	ask("fg")
	if n := eval[int](b, answers); n != 2 {
		t.Errorf("the focused page answered %d queries; want 2 (cursor position, device attributes): %s", n,
			eval[string](b, `JSON.stringify(window.__twSent)`))
	}
	b.checkConsole()
}
