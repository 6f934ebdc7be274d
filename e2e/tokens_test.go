package e2e

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/toolwarden/toolwarden/app/webtest"
)

// TestBrowserConnectAgent creates a token on /tokens and finds it, with this server's
// URL, in the Claude Code command of the "Connect an agent" panel; the client tabs and
// the copy buttons work from the keyboard.
func TestBrowserConnectAgent(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)

	b.do("open /tokens", chromedp.Navigate(srv.URL+"/tokens"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=connect-config-claude-code]`)))
	if got := eval[string](b, `document.querySelector("[data-testid=connect-config-claude-code]").textContent`); !strings.Contains(got, "Bearer <your token>") {
		t.Fatalf("before a token is created, the command is %q; want the placeholder", got)
	}

	b.do("create a token",
		chromedp.SendKeys(chromedp.ID("token-name"), "claude-code"),
		chromedp.Click(chromedp.CSS(`[data-testid=create-token]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=secret-value]`)),
	)
	token := strings.TrimSpace(eval[string](b, `document.querySelector("[data-testid=secret-value]").textContent`))
	if !strings.HasPrefix(token, "tw_") {
		t.Fatalf("the token shown: %q", token)
	}
	b.do("close the dialog",
		chromedp.Click(chromedp.CSS(`#secret-dialog [data-dialog-close]`)),
		chromedp.WaitNotVisible(chromedp.ID("secret-dialog")),
	)
	want := `claude mcp add --transport http toolwarden ` + srv.URL + `/mcp --header "Authorization: Bearer ` + token + `"`
	if got := eval[string](b, `document.querySelector("[data-testid=connect-config-claude-code]").textContent`); got != want {
		t.Fatalf("the Claude Code command:\n%s\nwant\n%s", got, want)
	}
	if !eval[bool](b, `document.querySelector("[data-testid=connect-config-claude-code]").checkVisibility()`) {
		t.Fatal("the Claude Code command is not visible")
	}

	// The tabs from the keyboard: → selects VS Code, End the last, Home the first again.
	b.do("move to the VS Code tab with the arrow key",
		chromedp.Focus(chromedp.CSS(`[data-testid=connect-tab-claude-code]`)),
		chromedp.KeyEvent(kb.ArrowRight),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=connect-config-vscode]`)),
		chromedp.WaitNotVisible(chromedp.CSS(`[data-testid=connect-config-claude-code]`)),
	)
	if !eval[bool](b, `document.activeElement.dataset.testid === "connect-tab-vscode" && document.activeElement.getAttribute("aria-selected") === "true"`) {
		t.Fatal("after →, the VS Code tab is not focused and selected")
	}
	if got := eval[string](b, `document.querySelector("[data-testid=connect-config-vscode]").textContent`); !strings.Contains(got, `"Authorization": "Bearer `+token+`"`) {
		t.Fatalf("the VS Code configuration lacks the token:\n%s", got)
	}
	b.do("End, then Home",
		chromedp.KeyEvent(kb.End),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=connect-config-json]`)),
		chromedp.KeyEvent(kb.Home),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=connect-config-claude-code]`)),
	)

	// A copy button pressed with the keyboard copies (or, without a clipboard, selects)
	// the command.
	b.do("copy with the keyboard",
		chromedp.Focus(chromedp.CSS(`#connect-claude-code button[data-copy]`)),
		chromedp.KeyEvent(kb.Enter),
	)
	b.waitJS("the copy button reports what it did",
		`(t => t === "Copied" || t.startsWith("Selected"))(document.querySelector("#connect-claude-code button[data-copy]").textContent)`)
	if got := eval[string](b, `document.querySelector("#connect-claude-code button[data-copy]").textContent`); strings.HasPrefix(got, "Selected") {
		if sel := eval[string](b, `String(window.getSelection())`); sel != want {
			t.Fatalf("the selection is %q, want the command", sel)
		}
	}

	b.checkConsole()
}
