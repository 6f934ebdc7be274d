package e2e

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/grants"
)

// TestBrowserRoleChangeReloadsPage: an auditor's dashboard follows the audit log; an
// administrator makes them a tool user, who may not follow it. The server closes the
// socket with 1012 as a restart does, and the ws extension reconnected with the same
// topics, the lost one dropped without a word: the page said "Live" over an activity
// list that never updated again. The page now reloads as the new role sees it; one with
// something typed on it (the audit browser's filter) is not reloaded under the person:
// it says it is out of date, with a Reload link the keyboard reaches, and keeps the text.
func TestBrowserRoleChangeReloadsPage(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	const pw = "audrey-password-1234"
	aud := srv.CreateUser(t, "audrey", auth.RoleAuditor, pw)
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	setRole := func(role auth.Role) {
		t.Helper()
		res := srv.PostForm(t, admin, "/users/"+aud.ID+"/role", url.Values{"role": {string(role)}})
		res.Body.Close()
		if res.StatusCode >= 400 {
			t.Fatalf("the administrator's role change answered %d", res.StatusCode)
		}
	}
	live := `document.querySelector("#live-status")?.dataset.state === "open"`

	b := newBrowser(t)
	b.login(srv, "audrey", pw)
	b.waitJS("the dashboard is live", live)
	if !eval[bool](b, `!!document.querySelector("[data-testid=activity-row]")`) {
		t.Fatal("the auditor's dashboard shows no recent activity")
	}
	b.do("mark the page", chromedp.Evaluate[chromedp.Void](`window.__twMark = 1`))
	setRole(auth.RoleToolUser)
	waitAcrossReload(t, b, "the page reloads", `window.__twMark === undefined && document.readyState === "complete"`)
	b.waitJS("the reloaded page is the tool user's: no audit log on it",
		`!!document.querySelector("[data-testid=system-status]") && !document.querySelector("[data-testid=activity-row]")`)
	if eval[bool](b, `!!document.querySelector("[data-role-changed]")`) {
		t.Error("the reloaded page says it is out of date")
	}

	// Something typed (a message to the assistant, in its slide-over): the page stays,
	// says so, and keeps the words.
	// Back to auditor: the tool user's page followed their own questions, which an
	// auditor may not have, so it reloads too, and shows the audit log again.
	b.do("mark the page again", chromedp.Evaluate[chromedp.Void](`window.__twMark = 3`))
	setRole(auth.RoleAuditor)
	waitAcrossReload(t, b, "the page reloads as the auditor's",
		`window.__twMark === undefined && !!document.querySelector("[data-testid=activity-row]")`)
	b.waitJS("the dashboard is live again", live)
	b.do("open the assistant", chromedp.Click(chromedp.CSS(`[data-testid=assistant-open]`)),
		chromedp.WaitVisible(chromedp.ID("assistant-panel-input")))
	b.do("type a message", chromedp.SendKeys(chromedp.ID("assistant-panel-input"), "list the tools"),
		chromedp.Evaluate[chromedp.Void](`window.__twMark = 2`))
	setRole(auth.RoleToolUser)
	b.waitJS("the page says its role changed", `!!document.querySelector("#toasts [data-role-changed][role=alert]")`)
	b.waitJS("the badge says out of date", `document.querySelector("#live-status").dataset.state === "stale"`)
	if got := eval[int](b, `window.__twMark ?? 0`); got != 2 {
		t.Fatal("the page with a message typed was reloaded")
	}
	if got := eval[string](b, `document.getElementById("assistant-panel-input").value`); got != "list the tools" {
		t.Errorf("the assistant's box holds %q, want what was typed", got)
	}
	// The Reload link is reachable by the keyboard, and reloads.
	b.do("focus the link", chromedp.Focus(chromedp.CSS(`[data-testid=role-changed-reload]`)))
	if !eval[bool](b, `document.activeElement?.matches("[data-testid=role-changed-reload]") && document.activeElement.tabIndex >= 0`) {
		t.Fatal("the Reload link takes no focus")
	}
	time.Sleep(time.Second) // a reconnect's refusal (nothing left to follow) leaves it so
	if st := eval[string](b, `document.querySelector("#live-status").dataset.state`); st != "stale" {
		t.Errorf("#live-status is %q after the socket reconnected, want stale", st)
	}
	b.checkConsole()
}

// TestBrowserQuestionEndedElsewhereKeepsFocus: a person typing an answer to a question
// that is answered elsewhere (another tab) lost the card, and the focus fell to <body>
// with nothing said. The focus now goes to the next question, or to the main column
// when none is left, and the page says why.
func TestBrowserQuestionEndedElsewhereKeepsFocus(t *testing.T) {
	t.Parallel()
	srv, cs := collaborationAgent(t)
	elsewhere := srv.Login(t, "admin", webtest.AdminPassword)
	answer := func(id string) {
		t.Helper()
		res := srv.PostForm(t, elsewhere, "/collaborations/"+id+"/respond", url.Values{"response": {"no"}})
		res.Body.Close()
		if res.StatusCode >= 400 {
			t.Fatalf("the answer from elsewhere got %d", res.StatusCode)
		}
	}

	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("open the tools", chromedp.Navigate(srv.URL+"/tools"))
	b.waitJS("the page is live", `document.querySelector("#live-status")?.dataset.state === "open"`)
	first := mcpCall(context.Background(), cs, "builtin__user_collaboration", map[string]any{"prompt": "First?"}, 0)
	b.waitJS("the first question appears", `document.querySelectorAll("[data-testid=collaboration]").length === 1`)
	second := mcpCall(context.Background(), cs, "builtin__user_collaboration", map[string]any{"prompt": "Second?"}, 0)
	b.waitJS("the second question appears", `document.querySelectorAll("[data-testid=collaboration]").length === 2`)
	ids := eval[[]string](b, `[...document.querySelectorAll("[data-testid=collaboration]")].map(c => c.dataset.collaborationId)`)

	// Each question is answered before anything is checked: a question left waiting
	// holds the agent's call, and the server's shutdown with it.
	said := `document.getElementById("announce").textContent === "This question was answered or withdrawn elsewhere."`
	b.do("type an answer to the first", chromedp.SendKeys(chromedp.ID("collab-answer-"+ids[0]), "let me think"))
	answer(ids[0])
	mcpWait(t, "the first question", first)
	b.waitJS("the first card goes", `!document.getElementById("collab-`+ids[0]+`")`)
	if !becomes(b, said) {
		t.Errorf("the page did not say why the question went (#announce: %q)", eval[string](b, `document.getElementById("announce").textContent`))
	}
	if got := eval[string](b, `document.activeElement?.id ?? ""`); got != "collab-p-"+ids[1] {
		t.Errorf("the focus is on %q, want the next question (collab-p-%s)", got, ids[1])
	}

	b.do("type an answer to the second", chromedp.SendKeys(chromedp.ID("collab-answer-"+ids[1]), "hmm"))
	answer(ids[1])
	mcpWait(t, "the second question", second)
	b.waitJS("the second card goes", `!document.getElementById("collab-`+ids[1]+`")`)
	if !becomes(b, said) {
		t.Errorf("the page did not say why the last question went (#announce: %q)", eval[string](b, `document.getElementById("announce").textContent`))
	}
	if got := eval[string](b, `document.activeElement?.id ?? ""`); got != "main" {
		t.Errorf("the focus is on %q, want the main column (no question is left)", got)
	}
	b.checkConsole()
}

// TestBrowserExpiredGrantKeepsFocus: a keyboard user on an active grant's Revoke when
// the grant expires lost the button with the row's actions, the focus falling to
// <body>. It goes to the next grant's Revoke, and the page says the grant expired.
func TestBrowserExpiredGrantKeepsFocus(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	alice := srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	by := audit.Actor{Kind: audit.ActorUser, ID: alice.ID, Name: "alice"}
	b := newBrowser(t)
	b.login(srv, "alice", "alice-password-1")
	short, err := srv.App.Grants.Create(ctx, grants.Spec{ConversationID: "conv-focus", Operation: "file_operations.rename_file",
		TTL: 8 * time.Second, By: by})
	if err != nil {
		t.Fatal(err)
	}
	long, err := srv.App.Grants.Create(ctx, grants.Spec{ConversationID: "conv-focus", Operation: "file_operations.create_file", By: by})
	if err != nil {
		t.Fatal(err)
	}
	b.do("open the grants", chromedp.Navigate(srv.URL+"/grants"), chromedp.WaitReady(chromedp.ID("grant-"+short.ID)))
	b.do("focus the short grant's Revoke", chromedp.Focus(chromedp.CSS(`#grant-`+short.ID+` [data-testid=revoke-grant]`)))
	b.waitJS("the short grant expires", `!!document.getElementById("grant-ended-`+short.ID+`")`)
	b.waitJS("the page says so", `document.getElementById("announce").textContent.startsWith("This grant expired")`)
	if !eval[bool](b, `document.activeElement === document.querySelector("#grant-`+long.ID+` [data-testid=revoke-grant]")`) {
		t.Errorf("the focus is on %s, want the other grant's Revoke", eval[string](b, `document.activeElement?.outerHTML.slice(0, 200) ?? "nothing"`))
	}
	b.checkConsole()
}

// waitAcrossReload is waitJS for a page that reloads meanwhile: a poll the navigation
// interrupts is asked again in the new document.
func waitAcrossReload(t *testing.T, b *browser, what, expr string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](expr))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			if err == nil {
				t.Fatalf("waiting until %s: it did not happen within 20 s", what)
			}
			t.Fatalf("waiting until %s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// becomes reports whether expr turns truthy in the page within a few seconds.
func becomes(b *browser, expr string) bool {
	_, err := chromedp.Run(b.ctx, chromedp.Poll[bool](expr,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(5*time.Second)))
	return err == nil
}
