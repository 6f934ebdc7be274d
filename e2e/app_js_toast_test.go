package e2e

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a-h/templ"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/views"
)

// TestBrowserActionToastsStay: a toast that asks for an action (an approval's Review
// link) or says something failed stays until dismissed, with a × button, instead of
// going after six seconds whether it was read or not; an informative one still goes.
// Kept ones do not pile up: past three, the oldest go. One the viewer's role hides is
// not kept.
func TestBrowserActionToastsStay(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("open the tools", chromedp.Navigate(srv.URL+"/tools"), chromedp.WaitReady("main"))

	// As a websocket message brings them: into #toasts, then htmx:wsAfterMessage.
	type toast struct {
		id string
		c  templ.Component
	}
	arrive := func(what string, parts ...toast) {
		t.Helper()
		js := `const box = document.getElementById("toasts");`
		for _, p := range parts {
			id, c := p.id, p.c
			var buf bytes.Buffer
			if err := c.Render(context.Background(), &buf); err != nil {
				t.Fatal(err)
			}
			frag := buf.String()
			inner := strings.TrimSpace(frag[strings.Index(frag, ">")+1 : strings.LastIndex(frag, "</div>")])
			js += `box.insertAdjacentHTML("beforeend", ` + strconv.Quote(inner) + `); box.lastElementChild.id = ` + strconv.Quote(id) + `;`
		}
		b.do(what, chromedp.Evaluate[chromedp.Void](`(() => {`+js+`
			document.body.dispatchEvent(new CustomEvent("htmx:wsAfterMessage", {bubbles: true}));
		})()`))
	}
	approval := func(n int) templ.Component {
		return views.LiveApprovalToast(views.ExecutionListRow{ID: "00000000-0000-4000-8000-00000000000" + strconv.Itoa(n),
			Title: "Deploy " + strconv.Itoa(n), Requester: "agent"})
	}
	arrive("an error, an approval and an info toast arrive",
		toast{"error-toast", views.LiveToast("error", "docs lost its connection: EOF")},
		toast{"approval-toast", approval(1)},
		toast{"info-toast", views.LiveToast("info", "bob signed in")})
	// The page's own error toast, twice: said once.
	b.do("a request fails twice", chromedp.Evaluate[chromedp.Void](`for (let i = 0; i < 2; i++)
		document.body.dispatchEvent(new CustomEvent("htmx:sendError", {bubbles: true, detail: {}}));`))

	time.Sleep(7 * time.Second) // past the six seconds an informative toast stays
	present := func(id string) bool { return eval[bool](b, `!!document.getElementById(`+strconv.Quote(id)+`)`) }
	if present("info-toast") {
		t.Error("the informative toast is still shown after 7 s; it should go by itself")
	}
	for _, id := range []string{"error-toast", "approval-toast"} {
		if !present(id) {
			t.Errorf("%s went by itself after 7 s; it must stay until dismissed", id)
		} else if !eval[bool](b, `!!document.querySelector("#`+id+` [data-toast-dismiss]")`) {
			t.Errorf("%s has no dismiss button", id)
		}
	}
	if n := eval[int](b, `[...document.querySelectorAll("#toasts .toast")].filter(t => t.textContent.includes("No connection to the server")).length`); n != 1 {
		t.Errorf("%d toasts say there is no connection after two failures; want 1 kept", n)
	}

	// Three more approvals: only the newest three kept toasts stay.
	arrive("three more approvals arrive",
		toast{"approval-2", approval(2)}, toast{"approval-3", approval(3)}, toast{"approval-4", approval(4)})
	if got := eval[string](b, `[...document.querySelectorAll("#toasts > .toast")].map(t => t.id || "?").join(" ")`); got != "approval-2 approval-3 approval-4" {
		t.Errorf("the toasts kept after six that stay: %q; want the newest three (approval-2 approval-3 approval-4)", got)
	}

	// Dismissed from the keyboard, the focus goes to the next toast's ×.
	b.do("dismiss the first with the keyboard", chromedp.Focus(chromedp.CSS(`#approval-2 [data-toast-dismiss]`)),
		chromedp.KeyEvent(kb.Enter))
	b.waitJS("the toast is gone", `!document.getElementById("approval-2")`)
	if !eval[bool](b, `document.activeElement === document.querySelector("#approval-3 [data-toast-dismiss]")`) {
		t.Error("after a dismissal the focus is not on the next toast's dismiss button")
	}

	// An approval toast is hidden from a role that may not approve: not kept.
	b.do("the role no longer approves", chromedp.Evaluate[chromedp.Void](
		`document.body.dataset.perms = document.body.dataset.perms.replace("execution.approve", "")`))
	arrive("an approval the viewer may not see", toast{"approval-5", approval(5)})
	if got := eval[string](b, `document.getElementById("approval-5").dataset.scheduled || ""`); got != "1" {
		t.Errorf("a hidden approval toast is not set to go (data-scheduled=%q): hidden toasts would pile up", got)
	}
	b.checkConsole()
}
