package e2e

import (
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/builtin"
)

// TestBrowserTerminalTrueColor: a program's 24-bit colour (SGR 38;2) shows in the
// page, under its CSP (style-src 'self': xterm.js colours such a cell through its style
// attribute), with no CSP violation.
func TestBrowserTerminalTrueColor(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	alice := srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	ws, err := srv.App.Builtin.Workspace("conv-e2e-color")
	if err != nil {
		t.Fatal(err)
	}
	srv.App.Enable(t, builtin.TerminalToolName) // who types into it must be able to call it
	term, _, err := srv.App.Terminals.OpenPTY(builtin.TerminalCaller{UserID: alice.ID, UserName: "alice"}, "conv-e2e-color", ws)
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t)
	b.login(srv, "alice", "alice-password-1")
	b.do("open the terminal", chromedp.Navigate(srv.URL+"/terminals/"+term.ID),
		chromedp.WaitVisible(chromedp.CSS(`#terminal .xterm-rows`)))
	b.waitJS("the terminal is connected", `document.getElementById("terminal").dataset.state === "connected"`)
	// \033 rather than \e: the PTY's shell may be dash, whose printf lacks \e.
	b.do("print in truecolor red", typeInto(`printf '\033[38;2;255;0;0mtwred\033[0m\n'`+kb.Enter))
	cell := `[...document.querySelectorAll("#terminal .xterm-rows span")].find(s => s.textContent === "twred")`
	b.waitJS("the coloured word is shown", "!!"+cell)
	if got := eval[string](b, `getComputedStyle(`+cell+`).color`); got != "rgb(255, 0, 0)" {
		t.Errorf("the truecolor cell's colour is %q, want rgb(255, 0, 0) (style attribute %q)", got,
			eval[string](b, cell+`.getAttribute("style") || ""`))
	}
	b.checkConsole()
}
