package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/builtin"
)

// The terminal tool disabled while its owner's page is open: the socket reconnects
// read-only and the page says so and takes no more keys, without a reload.
func TestBrowserTerminalTurnsReadOnly(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Builtin: true, SessionRecheck: 200 * time.Millisecond})
	alice := srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	ws, err := srv.App.Builtin.Workspace("conv-e2e-ro")
	if err != nil {
		t.Fatal(err)
	}
	tg := srv.App.Enable(t, builtin.TerminalToolName)
	term, _, err := srv.App.Terminals.OpenPTY(builtin.TerminalCaller{UserID: alice.ID, UserName: "alice"}, "conv-e2e-ro", ws)
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t)
	b.login(srv, "alice", "alice-password-1")
	b.do("open the terminal", chromedp.Navigate(srv.URL+"/terminals/"+term.ID), chromedp.WaitVisible(chromedp.CSS(`#terminal .xterm-rows`)))
	b.waitJS("the terminal is connected", `document.getElementById("terminal").dataset.state === "connected"`)
	if _, err := srv.App.Tools.SetEnabled(context.Background(), audit.System, []string{tg.ID}, false, "test", true); err != nil {
		t.Fatal(err)
	}
	b.waitJS("the page turns read-only", `document.getElementById("terminal").dataset.readonly === "true" &&
		!!document.querySelector("[data-testid=terminal-readonly]")`)
	b.checkConsole()
}
