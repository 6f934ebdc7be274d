package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/builtin"
)

// countBytes, installed after socketLog, counts the binary bytes every socket of the
// page received (window.__twBytes), so a test knows what the page has read.
const countBytes = `(function () {
	var W = window.WebSocket;
	window.__twBytes = 0;
	window.WebSocket = class extends W {
		constructor(url, protocols) {
			super(url, protocols);
			this.addEventListener("message", function (ev) {
				if (typeof ev.data !== "string") {
					window.__twBytes += ev.data.byteLength;
				}
			});
		}
	};
})();`

// TestBrowserTerminalDroppedNoticeAfterOpenSequence: output read before a disconnect
// that ends inside an escape sequence (an OSC title without its terminator, a CSI
// without its final byte) does not swallow the page's notice that output was dropped
// while it was disconnected.
func TestBrowserTerminalDroppedNoticeAfterOpenSequence(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	alice := srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	srv.App.Enable(t, builtin.TerminalToolName) // else any change the router hears ends alice's terminals
	ws, err := srv.App.Builtin.Workspace("conv-dropped")
	if err != nil {
		t.Fatal(err)
	}
	// The whole buffer, wrapped lines joined, so a notice split by the width is whole.
	bufferText := `(function () { var b = window.twTerminal.buffer.active, out = "";
		for (var i = 0; i < b.length; i++) { var l = b.getLine(i);
			out += (i > 0 && !l.isWrapped ? "\n" : "") + l.translateToString(true); }
		return out; })()`
	termSockets := `window.__twSockets.filter(function (s) { return s.url.includes("/terminals/"); })`
	const notice = "[output was dropped while disconnected]"

	b := newBrowser(t)
	for _, src := range []string{socketLog, countBytes} {
		if _, err := chromedp.Call(b.ctx, page.AddScriptToEvaluateOnNewDocument,
			page.AddScriptToEvaluateOnNewDocumentParams{Source: src}); err != nil {
			t.Fatalf("install the socket scripts: %v", err)
		}
	}
	b.login(srv, "alice", "alice-password-1")

	for i, c := range []struct{ name, open string }{
		{"OSC", `\033]0;left open`},
		{"CSI", `\033[`},
	} {
		trigger := filepath.Join(ws, "go-"+c.name)
		// Writes what ends with the open sequence, waits for the trigger, then more than
		// its 1 KiB buffer keeps; the BEL ends an OSC the page may still be in.
		cmd := `printf 'ready-` + c.name + c.open + `'; while [ ! -e go-` + c.name + ` ]; do sleep 0.05; done; ` +
			`head -c 4000 /dev/zero | tr '\0' x; printf '\a\nafter-gap-%d\n' ` + itoa(i) + `; exec sleep 600`
		term, err := srv.App.Terminals.Start(builtin.TerminalCaller{UserID: alice.ID, UserName: "alice"}, "conv-dropped", ws, cmd, 0, 1024)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(term.End)
		var written int64
		webtest.WaitFor(t, 10*time.Second, func() bool {
			out, _, next := term.Output(0)
			written = next
			return strings.Contains(string(out), "ready-"+c.name+"\x1b")
		}, c.name+": the command wrote its first output")

		b.do(c.name+": open the command", chromedp.Navigate(srv.URL+"/terminals/"+term.ID), chromedp.WaitVisible(chromedp.CSS(`#terminal .xterm-rows`)))
		b.waitJS(c.name+": the page read the open sequence", `window.__twBytes === `+itoa(int(written)))
		b.do(c.name+": disconnect the page", chromedp.Evaluate[chromedp.Void](`window.__twHold = true; `+termSockets+`.forEach(function (s) { s.close(); })`))
		b.waitJS(c.name+": the page tries to reconnect", `document.getElementById("terminal").dataset.state === "reconnecting"`)
		if err := os.WriteFile(trigger, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		webtest.WaitFor(t, 10*time.Second, func() bool {
			out, at, _ := term.Output(0)
			return at > written && strings.Contains(string(out), "after-gap-"+itoa(i))
		}, c.name+": the command wrote past its buffer")
		b.do(c.name+": the network comes back", chromedp.Evaluate[chromedp.Void](`window.__twHold = false`))
		b.waitJS(c.name+": the output after the gap", bufferText+`.includes("after-gap-`+itoa(i)+`")`)
		if text := strings.TrimRight(eval[string](b, bufferText), "\n"); !strings.Contains(text, notice) {
			t.Errorf("%s: the page does not say output was dropped:\n%s", c.name, text)
		}
	}
}
