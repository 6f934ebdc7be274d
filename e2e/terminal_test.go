package e2e

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/builtin"
)

// TestBrowserTerminal opens an agent's terminal in chromium as its owner, types a
// command and sees its output live, resizes the window and the PTY follows; an
// auditor in another browser sees the history and what the owner types next, live,
// and cannot type. Neither page logs an error or a CSP violation.
func TestBrowserTerminal(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	alice := srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	srv.CreateUser(t, "audrey", auth.RoleAuditor, "audrey-password-1")
	ws, err := srv.App.Builtin.Workspace("conv-e2e")
	if err != nil {
		t.Fatal(err)
	}
	srv.App.Enable(t, builtin.TerminalToolName) // who types into it must be able to call it
	term, _, err := srv.App.Terminals.OpenPTY(builtin.TerminalCaller{UserID: alice.ID, UserName: "alice"}, "conv-e2e", ws)
	if err != nil {
		t.Fatal(err)
	}
	rowsText := `(document.querySelector("#terminal .xterm-rows")?.textContent || "")`

	b := newBrowser(t)
	b.login(srv, "alice", "alice-password-1")
	b.do("open the terminal from the list",
		chromedp.Navigate(srv.URL+"/terminals"),
		chromedp.Click(chromedp.CSS(`[data-terminal-id="`+term.ID+`"] a`)),
		chromedp.WaitVisible(chromedp.CSS(`#terminal .xterm-rows`)),
	)
	b.waitJS("the terminal is connected", `document.getElementById("terminal").dataset.state === "connected"`)
	b.do("type a command", typeInto("echo e2e-$((6*7))"+kb.Enter))
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](rowsText+`.includes("e2e-42")`,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		out, _, _ := term.Output(0)
		t.Fatalf("no output in the page: %q\nthe terminal: %q", eval[string](b, rowsText+` + " / " + document.getElementById("terminal").innerHTML.slice(0, 3000)`), out)
	}

	// The window's size decides the PTY's (the fit addon, then a resize message).
	webtest.WaitFor(t, 10*time.Second, func() bool {
		c, _ := term.Size()
		return int(c) == eval[int](b, `window.twTerminal.cols`)
	}, "the PTY takes the page's size")
	before, _ := term.Size()
	b.do("narrow the window", chromedp.EmulateViewport(700, 600))
	webtest.WaitFor(t, 10*time.Second, func() bool {
		c, r := term.Size()
		return c < before && int(c) == eval[int](b, `window.twTerminal.cols`) && int(r) == eval[int](b, `window.twTerminal.rows`)
	}, "the PTY follows the narrower window")
	b.do("ask the PTY its size", typeInto("stty size"+kb.Enter))
	c, r := term.Size()
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](rowsText+`.includes("`+itoa(int(r))+" "+itoa(int(c))+`")`,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		out, _, _ := term.Output(0)
		t.Fatalf("stty does not show %dx%d: %q\nthe terminal: %q", c, r, eval[string](b, rowsText), out)
	}
	b.checkConsole()

	d := newBrowser(t)
	d.login(srv, "audrey", "audrey-password-1")
	d.do("open the terminal as auditor",
		chromedp.Navigate(srv.URL+"/terminals/"+term.ID),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=terminal-readonly]`)),
		chromedp.WaitVisible(chromedp.CSS(`#terminal .xterm-rows`)),
	)
	d.waitJS("the auditor sees the history", rowsText+`.includes("e2e-42")`)
	b.do("the owner types more", typeInto("echo live-$((3+4))"+kb.Enter))
	d.waitJS("the auditor sees it live", rowsText+`.includes("live-7")`)
	d.do("the auditor tries to type", typeInto("echo AUDITOR"+kb.Enter))
	time.Sleep(500 * time.Millisecond)
	if out, _, _ := term.Output(0); strings.Contains(string(out), "AUDITOR") {
		t.Fatal("the auditor's keys reached the terminal")
	}
	// Closed by its agent (close_session), the terminal says so, not "exit code -1",
	// and stays readable: a reload still shows its page and output.
	term.End()
	d.waitJS("the page says the agent closed it", `document.getElementById("terminal").dataset.state === "closed by its agent"`)
	d.do("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#terminal .xterm-rows`)))
	d.waitJS("the closed terminal's output is still there", rowsText+`.includes("live-7")`)
	d.checkConsole()
	b.checkConsole()
}

// typeInto types keys into the terminal as Chrome's own keyboard does: a keyDown
// that carries the key's text, then a keyUp. (chromedp's SendKeys sends a keyDown
// without text and a separate char event, which xterm.js takes as two key presses.)
func typeInto(keys string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		if _, err := chromedp.Focus(chromedp.CSS(`#terminal .xterm-helper-textarea`))(ctx, t); err != nil {
			return err
		}
		for _, r := range keys {
			evs := kb.Encode(r)
			down, up := *evs[0], *evs[len(evs)-1]
			down.Type = input.DispatchKeyEventTypeRawKeyDown
			for _, k := range evs {
				if k.Type == kb.KeyChar {
					down.Type, down.Text, down.UnmodifiedText = input.DispatchKeyEventTypeKeyDown, k.Text, k.UnmodifiedText
				}
			}
			for _, k := range []input.DispatchKeyEventParams{down, up} {
				if _, err := cdp.Call(ctx, t, input.DispatchKeyEvent, k); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// socketLog records every websocket the page opens (window.__twSockets), so a test can
// drop the terminal's connection as a network failure would, without a hook in the page;
// while window.__twHold is set it sends a terminal socket to an address with no socket,
// as an unreachable server would fail it.
const socketLog = `(function () {
	var W = window.WebSocket;
	window.__twSockets = [];
	window.__twHold = false;
	window.WebSocket = class extends W {
		constructor(url, protocols) {
			if (window.__twHold && String(url).includes("/terminals/")) {
				url = String(url).replace(/\/terminals\/.*$/, "/held-socket");
			}
			super(url, protocols);
			window.__twSockets.push(this);
		}
	};
})();`

// TestBrowserTerminalReconnect drops the terminal page's websocket: the page says it
// is reconnecting, connects again from the index it reached, shows what is typed after
// the reconnect, and does not write the history a second time.
func TestBrowserTerminalReconnect(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	alice := srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	ws, err := srv.App.Builtin.Workspace("conv-e2e-re")
	if err != nil {
		t.Fatal(err)
	}
	srv.App.Enable(t, builtin.TerminalToolName) // who types into it must be able to call it
	term, _, err := srv.App.Terminals.OpenPTY(builtin.TerminalCaller{UserID: alice.ID, UserName: "alice"}, "conv-e2e-re", ws)
	if err != nil {
		t.Fatal(err)
	}
	// The terminal's whole buffer (scrollback too), a line each.
	bufferText := `(function () { var b = window.twTerminal.buffer.active, out = [];
		for (var i = 0; i < b.length; i++) { out.push(b.getLine(i).translateToString(true)); }
		return out.join("\n"); })()`
	count := func(b *browser, s string) int { return strings.Count(eval[string](b, bufferText), s) }
	termSockets := `window.__twSockets.filter(function (s) { return s.url.includes("/terminals/` + term.ID + `/ws"); })`

	b := newBrowser(t)
	if _, err := chromedp.Call(b.ctx, page.AddScriptToEvaluateOnNewDocument,
		page.AddScriptToEvaluateOnNewDocumentParams{Source: socketLog}); err != nil {
		t.Fatalf("install the socket log: %v", err)
	}
	b.login(srv, "alice", "alice-password-1")
	b.do("open the terminal",
		chromedp.Navigate(srv.URL+"/terminals/"+term.ID),
		chromedp.WaitVisible(chromedp.CSS(`#terminal .xterm-rows`)),
	)
	b.waitJS("the terminal is connected", `document.getElementById("terminal").dataset.state === "connected"`)
	b.do("type a command", typeInto("echo before-$((2+3))"+kb.Enter))
	b.waitJS("its output", bufferText+`.includes("before-5")`)
	if n := count(b, "before-5"); n != 1 {
		t.Fatalf("before the reconnect, before-5 shows %d times", n)
	}

	b.do("drop the terminal's socket", chromedp.Evaluate[chromedp.Void](termSockets+`.forEach(function (s) { s.close(); })`))
	b.waitJS("the page reconnects", `document.getElementById("terminal").dataset.state === "reconnecting"`)
	b.waitJS("a second socket is open", termSockets+`.length === 2 && `+termSockets+`[1].readyState === WebSocket.OPEN`+
		` && document.getElementById("terminal").dataset.state === "connected"`)
	if from := eval[string](b, termSockets+`[1].url`); strings.HasSuffix(from, "?from=0") {
		t.Fatalf("the reconnect asked for the whole history again: %s", from)
	}

	b.do("type after the reconnect", typeInto("echo after-$((3+4))"+kb.Enter))
	b.waitJS("the output after the reconnect", bufferText+`.includes("after-7")`)
	text := eval[string](b, bufferText)
	if n := strings.Count(text, "before-5"); n != 1 {
		t.Fatalf("after the reconnect, before-5 shows %d times (history written again):\n%s", n, text)
	}
	if strings.Contains(text, "output was dropped") {
		t.Fatalf("the reconnect says output was dropped:\n%s", text)
	}

	// A paste past the server's 64 KiB a message goes in pieces: the socket stays open
	// and the whole line reaches the shell. The escaped quotes double in JSON.
	b.do("paste a long line", chromedp.Evaluate[chromedp.Void](
		`window.twTerminal.paste(': "' + '\\"'.repeat(50000) + '"; echo pasted-$((5*5))')`))
	b.do("run it", typeInto(kb.Enter)) // a bracketed paste's own newline would not run it
	b.waitJS("the pasted line ran", bufferText+`.includes("pasted-25")`)
	if n := eval[int](b, termSockets+`.length`); n != 2 {
		t.Fatalf("the paste closed the terminal's socket: %d sockets opened", n)
	}
	b.checkConsole()
}

// TestBrowserCommandOutput opens a background command's page: its output, which comes
// from pipes with bare newlines, shows each line from the first column, not as a
// staircase.
func TestBrowserCommandOutput(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	alice := srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	ws, err := srv.App.Builtin.Workspace("conv-e2e-cmd")
	if err != nil {
		t.Fatal(err)
	}
	srv.App.Enable(t, builtin.TerminalToolName) // else any change the router hears ends alice's terminal
	cmd, err := srv.App.Terminals.Start(builtin.TerminalCaller{UserID: alice.ID, UserName: "alice"}, "conv-e2e-cmd", ws,
		"printf 'first line\\nsecond line\\nthird line\\n'", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	lines := `(function () { var b = window.twTerminal.buffer.active, out = [];
		for (var i = 0; i < 3; i++) { out.push(b.getLine(i).translateToString(true)); }
		return out.join("|"); })()`
	b := newBrowser(t)
	b.login(srv, "alice", "alice-password-1")
	b.do("open the command", chromedp.Navigate(srv.URL+"/terminals/"+cmd.ID), chromedp.WaitVisible(chromedp.CSS(`#terminal .xterm-rows`)))
	b.waitJS("its output", lines+`.includes("third line")`)
	if got := eval[string](b, lines); got != "first line|second line|third line" {
		t.Fatalf("the command's lines in the page: %q", got)
	}
	b.checkConsole()
}

// pressKey presses one key in the page as Chrome's own keyboard does (rawKeyDown, then
// keyUp), with modifiers, wherever the focus is: the browser's default action (Tab
// moving the focus) happens unless the page cancels the keydown.
func pressKey(r rune, modifiers int64) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		evs := kb.Encode(r)
		down, up := *evs[0], *evs[len(evs)-1]
		down.Type = input.DispatchKeyEventTypeRawKeyDown
		for _, k := range []input.DispatchKeyEventParams{down, up} {
			k.Modifiers = modifiers
			if _, err := cdp.Call(ctx, t, input.DispatchKeyEvent, k); err != nil {
				return err
			}
		}
		return nil
	})
}

// focusInTerminal is whether the keyboard focus is inside the terminal.
const focusInTerminal = `document.getElementById("terminal").contains(document.activeElement)`

// TestBrowserTerminalTabLeaves: Tab and Shift+Tab take the focus out of a read-only
// terminal (it takes no keys, so they would only trap a keyboard user there); in a
// terminal one types into, Tab goes to the program (completion) and Escape then Tab
// leaves.
func TestBrowserTerminalTabLeaves(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	alice := srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	srv.CreateUser(t, "audrey", auth.RoleAuditor, "audrey-password-1")
	ws, err := srv.App.Builtin.Workspace("conv-e2e-tab")
	if err != nil {
		t.Fatal(err)
	}
	srv.App.Enable(t, builtin.TerminalToolName) // who types into it must be able to call it
	term, _, err := srv.App.Terminals.OpenPTY(builtin.TerminalCaller{UserID: alice.ID, UserName: "alice"}, "conv-e2e-tab", ws)
	if err != nil {
		t.Fatal(err)
	}
	textarea := chromedp.CSS(`#terminal .xterm-helper-textarea`)

	d := newBrowser(t)
	d.login(srv, "audrey", "audrey-password-1")
	d.do("open the terminal as auditor",
		chromedp.Navigate(srv.URL+"/terminals/"+term.ID),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=terminal-readonly]`)),
		chromedp.WaitVisible(chromedp.CSS(`#terminal .xterm-rows`)),
	)
	d.waitJS("the terminal is watched", `document.getElementById("terminal").dataset.state === "watching"`)
	for _, k := range []struct {
		name string
		mods int64
	}{{"Tab", 0}, {"Shift+Tab", 8}} { // CDP's modifier bits: Shift=8
		d.do("focus the read-only terminal", chromedp.Focus(textarea))
		if !eval[bool](d, focusInTerminal) {
			t.Fatal("the read-only terminal did not take the focus")
		}
		d.do("press "+k.name, pressKey('\t', k.mods))
		if eval[bool](d, focusInTerminal) {
			t.Fatalf("%s in a read-only terminal: the focus stays in it (%s)", k.name, eval[string](d, `document.activeElement.outerHTML.slice(0, 200)`))
		}
	}
	d.checkConsole()

	b := newBrowser(t)
	b.login(srv, "alice", "alice-password-1")
	b.do("open the terminal as its owner",
		chromedp.Navigate(srv.URL+"/terminals/"+term.ID),
		chromedp.WaitVisible(chromedp.CSS(`#terminal .xterm-rows`)),
	)
	b.waitJS("the terminal is connected", `document.getElementById("terminal").dataset.state === "connected"`)
	b.do("focus the terminal, press Tab", chromedp.Focus(textarea), pressKey('\t', 0))
	if !eval[bool](b, focusInTerminal) {
		t.Fatal("Tab left a terminal one types into: it belongs to the program")
	}
	b.do("press Escape, then Tab", pressKey('\u001b', 0), pressKey('\t', 0))
	if eval[bool](b, focusInTerminal) {
		t.Fatal("Escape then Tab did not leave the terminal")
	}
	if got := eval[string](b, `document.querySelector("#terminal .xterm-helper-textarea").getAttribute("aria-description") || ""`); !strings.Contains(got, "Escape") {
		t.Errorf("the terminal's input does not tell how to leave it: aria-description %q", got)
	}
	b.checkConsole()
}

// TestBrowserTerminalGoneWhileDisconnected: a terminal closed while its page is
// disconnected is gone when the page comes back: the page says so and stops trying,
// rather than reconnecting forever to a socket that answers 404. A page whose session
// ended meanwhile goes to sign in, and back to the terminal after.
func TestBrowserTerminalGoneWhileDisconnected(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	alice := srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	ws, err := srv.App.Builtin.Workspace("conv-e2e-gone")
	if err != nil {
		t.Fatal(err)
	}
	srv.App.Enable(t, builtin.TerminalToolName) // who types into it must be able to call it
	term, _, err := srv.App.Terminals.OpenPTY(builtin.TerminalCaller{UserID: alice.ID, UserName: "alice"}, "conv-e2e-gone", ws)
	if err != nil {
		t.Fatal(err)
	}
	termSockets := `window.__twSockets.filter(function (s) { return s.url.includes("/terminals/"); })`

	b := newBrowser(t)
	if _, err := chromedp.Call(b.ctx, page.AddScriptToEvaluateOnNewDocument,
		page.AddScriptToEvaluateOnNewDocumentParams{Source: socketLog}); err != nil {
		t.Fatalf("install the socket hold: %v", err)
	}
	b.login(srv, "alice", "alice-password-1")
	b.do("open the terminal",
		chromedp.Navigate(srv.URL+"/terminals/"+term.ID),
		chromedp.WaitVisible(chromedp.CSS(`#terminal .xterm-rows`)),
	)
	b.waitJS("the terminal is connected", `document.getElementById("terminal").dataset.state === "connected"`)
	b.do("disconnect the page", chromedp.Evaluate[chromedp.Void](`window.__twHold = true; `+termSockets+`.forEach(function (s) { s.close(); })`))
	b.waitJS("the page tries to reconnect", `document.getElementById("terminal").dataset.state === "reconnecting"`)
	term.Close() // ends it and drops it from the list: its page and socket answer 404
	if srv.App.Terminals.Get(term.ID) != nil {
		t.Fatal("the closed terminal is still listed")
	}
	b.do("the network comes back", chromedp.Evaluate[chromedp.Void](`window.__twHold = false`))
	b.waitJS("the page says the terminal is gone", `document.getElementById("terminal").dataset.state === "gone"`)

	other, _, err := srv.App.Terminals.OpenPTY(builtin.TerminalCaller{UserID: alice.ID, UserName: "alice"}, "conv-e2e-gone", ws)
	if err != nil {
		t.Fatal(err)
	}
	b.do("open another terminal",
		chromedp.Navigate(srv.URL+"/terminals/"+other.ID),
		chromedp.WaitVisible(chromedp.CSS(`#terminal .xterm-rows`)),
	)
	b.waitJS("the terminal is connected", `document.getElementById("terminal").dataset.state === "connected"`)
	b.do("disconnect the page", chromedp.Evaluate[chromedp.Void](`window.__twHold = true; `+termSockets+`.forEach(function (s) { s.close(); })`))
	b.waitJS("the page tries to reconnect", `document.getElementById("terminal").dataset.state === "reconnecting"`)
	if _, err := chromedp.Call(b.ctx, network.DeleteCookies, network.DeleteCookiesParams{Name: "tw_session", URL: srv.URL}); err != nil {
		t.Fatalf("forget the session cookie: %v", err)
	}
	b.do("the network comes back", chromedp.Evaluate[chromedp.Void](`window.__twHold = false`))
	// A navigation ends a polled script, so the sign-in form is waited for instead.
	wait, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(wait, chromedp.WaitVisible(chromedp.CSS(`#username`))); err != nil {
		t.Fatalf("signed out while disconnected, the page did not go to sign in (%v): it shows %q", err,
			eval[string](b, `location.pathname + " " + document.getElementById("terminal").dataset.state`))
	}
	loc, err := chromedp.Run(b.ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if want := srv.URL + "/login?next=" + url.QueryEscape("/terminals/"+other.ID); loc != want {
		t.Fatalf("signed out while disconnected, the page went to %s, want %s", loc, want)
	}
}
