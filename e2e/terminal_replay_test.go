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

// A terminal page shows what was written before it came without answering the queries
// in it: an agent's printf of "what terminal is this" and "where is the cursor", then
// cat -v, got the page's answers typed into cat (^[[?1;2c^[[1;1R) when its owner
// opened the page, as if she had typed them.
func TestBrowserTerminalBacklogNotAnswered(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	alice := srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	ws, err := srv.App.Builtin.Workspace("conv-replay")
	if err != nil {
		t.Fatal(err)
	}
	srv.App.Enable(t, builtin.TerminalToolName)
	who := builtin.TerminalCaller{UserID: alice.ID, UserName: "alice"}
	term, _, err := srv.App.Terminals.OpenPTY(who, "conv-replay", ws)
	if err != nil {
		t.Fatal(err)
	}
	if err := term.Input(who, `printf '\033[c\033[6n'; cat -v`+"\n"); err != nil {
		t.Fatal(err)
	}
	webtest.WaitFor(t, 10*time.Second, func() bool {
		out, _, _ := term.Output(0)
		return strings.Contains(string(out), "\x1b[6n")
	}, "the queries were not written")

	b := newBrowser(t)
	b.login(srv, "alice", "alice-password-1")
	b.do("open the terminal", chromedp.Navigate(srv.URL+"/terminals/"+term.ID), chromedp.WaitVisible(chromedp.CSS(`#terminal .xterm-rows`)))
	b.waitJS("the terminal is connected", `document.getElementById("terminal").dataset.state === "connected"`)
	b.do("type a line into cat", typeInto("typed-by-alice"+kb.Enter))
	var out string
	webtest.WaitFor(t, 10*time.Second, func() bool {
		o, _, _ := term.Output(0)
		out = string(o)
		return strings.Count(out, "typed-by-alice") >= 2 // the echo, then cat's line
	}, "cat did not print the typed line")
	if strings.Contains(out, "^[[") {
		t.Errorf("the page answered the backlog's queries into the program: %q", out[strings.Index(out, "cat -v"):])
	}
}

// typeDuringBacklog, installed before the page loads, presses keys in the terminal right
// after the page has begun to write the backlog (the first binary message), before
// xterm.js has parsed it: as a person typing while a long backlog is written.
const typeDuringBacklog = `(function () {
	var WS = window.WebSocket, done = false;
	var setter = Object.getOwnPropertyDescriptor(WS.prototype, "onmessage").set;
	function Wrapped(url, protocols) {
		var ws = protocols === undefined ? new WS(url) : new WS(url, protocols);
		Object.defineProperty(ws, "onmessage", { set: function (h) {
			setter.call(ws, function (ev) {
				h(ev);
				if (typeof ev.data === "string" || done) return;
				done = true;
				var ta = document.querySelector("#terminal .xterm-helper-textarea");
				for (var c of "typed-early\r") {
					var enter = c === "\r";
					ta.dispatchEvent(new KeyboardEvent("keydown", { bubbles: true, cancelable: true,
						key: enter ? "Enter" : c, keyCode: enter ? 13 : c === "-" ? 189 : c.toUpperCase().charCodeAt(0) }));
				}
			});
		} });
		return ws;
	}
	Wrapped.prototype = WS.prototype;
	["CONNECTING", "OPEN", "CLOSING", "CLOSED"].forEach(function (k) { Wrapped[k] = WS[k]; });
	window.WebSocket = Wrapped;
})();`

// Keys typed while the page writes the backlog reach the program: only xterm.js's own
// answers to the backlog's queries are held back (the backlog asks where the cursor is,
// which must still not be answered).
func TestBrowserTerminalKeysDuringBacklog(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	alice := srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	ws, err := srv.App.Builtin.Workspace("conv-keys")
	if err != nil {
		t.Fatal(err)
	}
	srv.App.Enable(t, builtin.TerminalToolName)
	who := builtin.TerminalCaller{UserID: alice.ID, UserName: "alice"}
	term, _, err := srv.App.Terminals.OpenPTY(who, "conv-keys", ws)
	if err != nil {
		t.Fatal(err)
	}
	if err := term.Input(who, `printf '\033[6n'; echo backlog-end; cat -v`+"\n"); err != nil {
		t.Fatal(err)
	}
	webtest.WaitFor(t, 10*time.Second, func() bool {
		out, _, _ := term.Output(0)
		return strings.Contains(string(out), "backlog-end\r\n")
	}, "the backlog was not written")

	b := newBrowser(t)
	if _, err := chromedp.Call(b.ctx, page.AddScriptToEvaluateOnNewDocument,
		page.AddScriptToEvaluateOnNewDocumentParams{Source: typeDuringBacklog}); err != nil {
		t.Fatalf("install the typist: %v", err)
	}
	b.login(srv, "alice", "alice-password-1")
	b.do("open the terminal", chromedp.Navigate(srv.URL+"/terminals/"+term.ID), chromedp.WaitVisible(chromedp.CSS(`#terminal .xterm-rows`)))
	var out string
	webtest.WaitFor(t, 20*time.Second, func() bool {
		o, _, _ := term.Output(0)
		out = string(o)
		return strings.Count(out, "typed-early") >= 2 // the echo, then cat's line
	}, "the keys typed while the backlog was written never reached cat")
	if strings.Contains(out, "^[[") {
		t.Errorf("the page answered the backlog's query into the program: %q", out[strings.Index(out, "cat -v"):])
	}
}
