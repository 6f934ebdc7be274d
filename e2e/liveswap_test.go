package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/tools"
)

// TestBrowserLiveUpdatesKeepWhatYouDo: a live update replaces whole parts of a page (a
// card, a page head) while a person is using them. What they were doing survives it:
// a tool ticked for a bulk action stays ticked and counted, a reason being typed keeps
// its text and the focus, an open menu stays open, and a confirmation given in the
// dialog acts on the replaced form (it did nothing at all before).
func TestBrowserLiveUpdatesKeepWhatYouDo(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	ctx := context.Background()
	sv := docsServer(t, srv, registry.ToolDef{Name: "broken", Description: "Has a schema that cannot be used.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"strin"}}}`)})
	tag := func(name string) {
		t.Helper()
		if _, err := srv.Tools.Tag(ctx, audit.System, []string{srv.ToolID(t, "docs__"+name)}, []string{"live"}, false); err != nil {
			t.Fatal(err)
		}
	}

	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)

	// A tick in the tool list survives its card being replaced.
	b.do("open the tool list", chromedp.Navigate(srv.URL+"/tools?q=search"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=tool-cards]`)))
	b.waitJS("the page is live", `document.querySelector("#live-status")?.dataset.state === "open"`)
	const pick = `[data-tool="docs__search_code"] [data-testid=tool-pick]`
	b.do("tick search_code", chromedp.Click(chromedp.CSS(pick)))
	b.waitJS("the bulk bar counts it", `document.getElementById("bulk-count").textContent === "1 tool selected"`)
	b.do("remember the card", chromedp.Evaluate[chromedp.Void](`window.__old = document.querySelector('`+pick+`')`))
	tag("search_code")
	b.waitJS("the card was replaced", `!window.__old.isConnected && !!document.querySelector('`+pick+`')`)
	if !eval[bool](b, `document.querySelector('`+pick+`').checked`) {
		t.Error("the tick was lost when the card was replaced")
	}
	if got := eval[string](b, `document.getElementById("bulk-count").textContent`); got != "1 tool selected" {
		t.Errorf("after the card was replaced the bulk bar reads %q", got)
	}

	// A reason being typed keeps its text and the focus when the page head is replaced.
	brokenID := srv.ToolID(t, "docs__broken")
	reason := `#override-reason-` + brokenID
	b.do("open the blocked tool", chromedp.Navigate(srv.URL+"/tools/"+brokenID),
		chromedp.WaitVisible(chromedp.CSS(reason)))
	b.waitJS("the page is live", `document.querySelector("#live-status")?.dataset.state === "open"`)
	b.do("type a reason", chromedp.SendKeys(chromedp.CSS(reason), "a false positive"))
	b.do("remember the field", chromedp.Evaluate[chromedp.Void](`window.__old = document.querySelector('`+reason+`')`))
	tag("broken")
	b.waitJS("the head was replaced", `!window.__old.isConnected && !!document.querySelector('`+reason+`')`)
	if got := eval[string](b, `document.querySelector('`+reason+`').value`); got != "a false positive" {
		t.Errorf("the reason reads %q after the head was replaced", got)
	}
	if got := eval[string](b, `document.activeElement?.id ?? ""`); got != "override-reason-"+brokenID {
		t.Errorf("the focus moved to %q when the head was replaced", got)
	}
	b.do("type on", chromedp.SendKeys(chromedp.CSS(reason), " in the finding"))
	if got := eval[string](b, `document.querySelector('`+reason+`').value`); got != "a false positive in the finding" {
		t.Errorf("typing on after the update gives %q", got)
	}

	// A refused override comes back with its reason as typed; a live update of the head
	// (whose form is empty for everyone) keeps it, and what is typed after it.
	b.do("make the page's definition stale", chromedp.Evaluate[chromedp.Void](
		`document.querySelector('input[name=definition_hash][form^="tool-override-form-"]').value = "sha256:0000"`))
	b.do("send the override", chromedp.Click(chromedp.CSS(`[data-testid=override-submit]`)))
	b.waitAfterNavigation("the override was refused", `!!document.querySelector('[data-testid=flash].error') && !!document.querySelector('`+reason+`')`)
	if got := eval[string](b, `document.querySelector('`+reason+`').value`); got != "a false positive in the finding" {
		t.Fatalf("the refused page's reason reads %q", got)
	}
	b.waitJS("the page is live", `document.querySelector("#live-status")?.dataset.state === "open"`)
	b.do("go to the reason's end", chromedp.Evaluate[chromedp.Void](`(() => { const r = document.querySelector('`+reason+`'); r.focus(); r.setSelectionRange(r.value.length, r.value.length); })()`))
	b.do("type more", chromedp.SendKeys(chromedp.CSS(reason), "; checked"))
	b.do("remember the refused field", chromedp.Evaluate[chromedp.Void](`window.__old = document.querySelector('`+reason+`')`))
	if _, err := srv.Tools.Tag(ctx, audit.System, []string{brokenID}, []string{"again"}, false); err != nil {
		t.Fatal(err)
	}
	b.waitJS("the refused page's head was replaced", `!window.__old.isConnected && !!document.querySelector('`+reason+`')`)
	if got := eval[string](b, `document.querySelector('`+reason+`').value`); got != "a false positive in the finding; checked" {
		t.Errorf("after a live update the refused reason reads %q", got)
	}

	// A field's typed value is not carried into a replacement whose form's hidden fields
	// differ (a phrase typed to approve one plan must not approve the plan that replaced
	// it), and is when they are the same. The swap is played by hand, as the websocket
	// extension announces it.
	kept := eval[[]string](b, `(() => {
		const play = (hash) => {
			const box = document.createElement("div");
			box.innerHTML = '<form><input type="hidden" name="plan_hash" value="1"><input id="e2e-phrase" type="text"></form>';
			document.body.appendChild(box);
			document.getElementById("e2e-phrase").value = "typed";
			document.body.dispatchEvent(new CustomEvent("htmx:wsBeforeMessage", { bubbles: true }));
			box.innerHTML = '<form><input type="hidden" name="plan_hash" value="' + hash + '"><input id="e2e-phrase" type="text"></form>';
			document.body.dispatchEvent(new CustomEvent("htmx:wsAfterMessage", { bubbles: true }));
			const v = document.getElementById("e2e-phrase").value;
			box.remove();
			return v;
		};
		return [play("1"), play("2")];
	})()`)
	if len(kept) != 2 || kept[0] != "typed" || kept[1] != "" {
		t.Errorf("typed text kept for the same plan and a changed one: %q, want typed and nothing", kept)
	}

	// A confirmation given after the form it asked about was replaced still acts.
	card := `#server-card-` + sv.ID
	b.do("open the servers", chromedp.Navigate(srv.URL+"/servers"), chromedp.WaitVisible(chromedp.CSS(card)))
	b.waitJS("the page is live", `document.querySelector("#live-status")?.dataset.state === "open"`)
	b.do("open the actions menu", chromedp.Click(chromedp.CSS(card+` details.menu > summary`)))
	b.do("ask to delete", chromedp.Click(chromedp.CSS(card+` form[action$="/delete"] button`)))
	b.waitJS("the dialog asks", `document.getElementById("confirm-dialog").open`)
	b.do("remember the card", chromedp.Evaluate[chromedp.Void](`window.__old = document.querySelector('`+card+`')`))
	desc := "Changed while the dialog was open."
	if _, err := srv.Registry.UpdateServer(ctx, audit.System, sv.ID, registry.Patch{Description: &desc}); err != nil {
		t.Fatal(err)
	}
	b.waitJS("the card was replaced", `!window.__old.isConnected && !!document.querySelector('`+card+`')`)
	if !eval[bool](b, `document.querySelector('`+card+` details.menu').open`) {
		t.Error("the actions menu closed when its card was replaced")
	}
	b.do("confirm", chromedp.Click(chromedp.CSS(`#confirm-dialog [data-confirm-ok]`)))
	b.waitAfterNavigation("the server is gone from the list", `!document.querySelector('`+card+`')`)
	if _, err := srv.Registry.GetServer(ctx, sv.ID); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("the confirmed deletion did not happen: %v", err)
	}
}

// TestBrowserDecisionElsewhereIsExplained: a person looking at a plan that waits for
// approval, its DangerZone half typed, sees the controls go when someone else decides,
// and a toast says who decided and why, instead of the controls just vanishing; the
// focus moves to the section's new heading instead of falling to the page.
func TestBrowserDecisionElsewhereIsExplained(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "mt"})
	enabledLiveTools(t, srv, hs, "mt", "write-note")
	bob := srv.CreateUser(t, "bob", auth.RoleAdmin, "bob-password-12345")

	b := newExecBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("plan a high-risk call", chromedp.Navigate(srv.URL+"/executions/new"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=prompt]`)),
		chromedp.SendKeys(chromedp.CSS(`[data-testid=prompt]`), `call mt__write-note text="hello"`),
		chromedp.Click(chromedp.CSS(`[data-testid=submit-prompt]`)))
	b.do("the DangerZone is shown", chromedp.WaitVisible(chromedp.CSS(`[data-testid=danger-zone] [data-testid=danger-input]`)))
	id := b.execLanded(srv)
	b.waitJS("the page is live", `document.querySelector("#live-status")?.dataset.state === "open"`)
	b.do("start typing the phrase", chromedp.SendKeys(chromedp.CSS(`[data-testid=danger-input]`), "mt__"))

	who := executions.Caller{Actor: audit.Actor{Kind: audit.ActorUser, ID: bob.ID, Name: "bob"}, Role: auth.RoleAdmin}
	if _, err := srv.Executions.Reject(context.Background(), who, id, "not during the freeze"); err != nil {
		t.Fatal(err)
	}
	b.waitJS("a toast says who rejected it and why",
		`[...document.querySelectorAll("[data-testid=toast]")].some(t => t.textContent.includes("Rejected by bob: not during the freeze"))`)
	if eval[bool](b, `!!document.querySelector("[data-testid=danger-zone]")`) {
		t.Error("the DangerZone is still offered after the plan was rejected")
	}
	// The focus was in the phrase's field, which went: it lands on the approval
	// section's heading (now "Rejected"), not on the page's body.
	if got := eval[string](b, `document.activeElement.id + " " + document.activeElement.textContent.trim()`); got != "exec-approval-h-"+id+" Rejected" {
		t.Errorf("the focus after the controls went: %q, want the section's heading", got)
	}
}

// TestBrowserConfirmDialogOfADecidedPlan: the confirm dialog of a medium-risk plan is
// open when someone else rejects the plan: the dialog goes with the controls, a toast
// says who decided, and the focus lands on the section's new heading instead of the
// page's body.
func TestBrowserConfirmDialogOfADecidedPlan(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "md"})
	ids := enabledLiveTools(t, srv, hs, "md", "write-note")
	medium := "medium"
	if _, err := srv.Tools.Update(context.Background(), audit.System, ids["write-note"], tools.Patch{Risk: &medium, MayLowerRisk: true, Reason: "a medium-risk plan"}); err != nil {
		t.Fatal(err)
	}
	bob := srv.CreateUser(t, "bob", auth.RoleAdmin, "bob-password-12345")

	b := newExecBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("plan a medium-risk call", chromedp.Navigate(srv.URL+"/executions/new"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=prompt]`)),
		chromedp.SendKeys(chromedp.CSS(`[data-testid=prompt]`), `call md__write-note text="hello"`),
		chromedp.Click(chromedp.CSS(`[data-testid=submit-prompt]`)))
	b.do("the confirm dialog opens", chromedp.WaitVisible(chromedp.CSS(`[data-testid=confirm-open]`)),
		chromedp.Click(chromedp.CSS(`[data-testid=confirm-open]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=confirm-modal] [data-testid=confirm-submit]`)))
	id := b.execLanded(srv)
	b.waitJS("the page is live", `document.querySelector("#live-status")?.dataset.state === "open"`)
	b.do("focus is in the dialog", chromedp.Focus(chromedp.CSS(`[data-testid=confirm-modal] [data-testid=confirm-submit]`)))

	who := executions.Caller{Actor: audit.Actor{Kind: audit.ActorUser, ID: bob.ID, Name: "bob"}, Role: auth.RoleAdmin}
	if _, err := srv.Executions.Reject(context.Background(), who, id, "wrong note"); err != nil {
		t.Fatal(err)
	}
	b.waitJS("a toast says who rejected it",
		`[...document.querySelectorAll("[data-testid=toast]")].some(t => t.textContent.includes("Rejected by bob: wrong note"))`)
	if eval[bool](b, `!!document.querySelector("dialog[open]")`) {
		t.Error("a dialog is still open after the plan was decided elsewhere")
	}
	if got := eval[string](b, `document.activeElement.id + " " + document.activeElement.textContent.trim()`); got != "exec-approval-h-"+id+" Rejected" {
		t.Errorf("the focus after the dialog went: %q, want the section's heading", got)
	}
}
