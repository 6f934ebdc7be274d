package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/builtin"
)

// terminalSocketCounter counts the terminal sockets the page opens.
const terminalSocketCounter = `(function () {
	var W = window.WebSocket;
	window.__termSockets = 0;
	window.WebSocket = class extends W {
		constructor(url, protocols) {
			super(url, protocols);
			if (String(url).indexOf("/terminals/") >= 0) window.__termSockets++;
		}
	};
})();`

// TestBrowserTerminalQuickCloseBacksOff: a terminal socket the server accepts and then
// closes at once (its re-check of the session cannot read the database: 1013) is asked
// again less and less often, not every 500 ms for as long as the page stays open.
// The re-check alone fails: a row-level security policy on sessions raises an error for
// the CurrentRole query, which the application's role (not the owner) is subject to.
func TestBrowserTerminalQuickCloseBacksOff(t *testing.T) {
	t.Setenv(apptest.AppRoleEnv, "1") // the App connects as db.AppRole, under row-level security
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	alice := srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	ws, err := srv.App.Builtin.Workspace("conv-backoff")
	if err != nil {
		t.Fatal(err)
	}
	srv.App.Enable(t, builtin.TerminalToolName)
	term, _, err := srv.App.Terminals.OpenPTY(builtin.TerminalCaller{UserID: alice.ID, UserName: "alice"}, "conv-backoff", ws)
	if err != nil {
		t.Fatal(err)
	}

	b := newBrowser(t)
	if _, err := chromedp.Call(b.ctx, page.AddScriptToEvaluateOnNewDocument,
		page.AddScriptToEvaluateOnNewDocumentParams{Source: terminalSocketCounter}); err != nil {
		t.Fatalf("install the socket counter: %v", err)
	}
	b.login(srv, "alice", "alice-password-1")

	ctx := context.Background()
	owner, err := pgx.Connect(ctx, srv.App.DBURL)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close(ctx)
	if _, err := owner.Exec(ctx, `
		CREATE FUNCTION e2e_fail_current_role() RETURNS boolean LANGUAGE plpgsql AS $$
		BEGIN
			IF current_query() LIKE '%auth.CurrentRole.session%' THEN
				RAISE EXCEPTION 'e2e: the database does not answer the re-check';
			END IF;
			RETURN true;
		END $$;
		CREATE POLICY e2e_fail_current_role ON sessions USING (e2e_fail_current_role()) WITH CHECK (true);
		ALTER TABLE sessions ENABLE ROW LEVEL SECURITY;`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = owner.Exec(context.Background(), `ALTER TABLE sessions DISABLE ROW LEVEL SECURITY;
			DROP POLICY IF EXISTS e2e_fail_current_role ON sessions; DROP FUNCTION IF EXISTS e2e_fail_current_role()`)
	})

	b.do("open the terminal", chromedp.Navigate(srv.URL+"/terminals/"+term.ID), chromedp.WaitVisible(chromedp.CSS(`#terminal .xterm-rows`)))
	b.waitJS("the first socket was opened", `window.__termSockets >= 1`)
	start := time.Now()
	const watch = 6 * time.Second
	time.Sleep(watch)
	n := eval[int](b, `window.__termSockets`)
	// Waits of 0.5, 1, 2 and 4 s: four or five sockets in 6 s. Every 500 ms, it was a dozen.
	if n > 6 {
		t.Errorf("the page opened %d terminal sockets in %v while each was closed at once, want at most 6", n, time.Since(start).Round(time.Second))
	}
	if got := eval[string](b, `document.getElementById("terminal").dataset.state`); got != "reconnecting" && got != "connected" {
		t.Errorf("the terminal's state is %q, want reconnecting", got)
	}
	// The policy lifted, the next attempt connects.
	if _, err := owner.Exec(ctx, `ALTER TABLE sessions DISABLE ROW LEVEL SECURITY`); err != nil {
		t.Fatal(err)
	}
	b.waitJS("the terminal connects again", `document.getElementById("terminal").dataset.state === "connected"`)
	time.Sleep(time.Second)
	if got := eval[string](b, `document.getElementById("terminal").dataset.state`); got != "connected" {
		t.Errorf("a second after the database answered again the terminal is %q, want connected", got)
	}
	b.checkConsole()
}
