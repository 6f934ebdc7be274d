package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db"
)

// TestBrowserAuditShowKeepsFocusAndCounting: "… new entries · show" pressed from the
// keyboard leaves the focus on the newest entry of the list it loaded (not on the
// page's body) and the banner's live region the same element; and a count the banner
// asked for while the list was being loaded again does not stop the counting: it used
// to mark the banner busy until an answer that, its banner replaced, never reached the
// document.
func TestBrowserAuditShowKeepsFocusAndCounting(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	b := newBrowser(t)

	// The banner's questions go through the test, which holds them while hold is set.
	var (
		mu     sync.Mutex
		hold   bool
		held   []fetch.RequestID
		paused = chromedp.Events(b.ctx, fetch.RequestPaused)
	)
	if _, err := chromedp.Call(b.ctx, fetch.Enable, fetch.EnableParams{
		Patterns: []*fetch.RequestPattern{{URLPattern: "*/audit/new?*"}}}); err != nil {
		t.Fatalf("intercept the banner's questions: %v", err)
	}
	go func() {
		for ev, err := range paused {
			if err != nil {
				return
			}
			mu.Lock()
			if hold {
				held = append(held, ev.RequestID)
				mu.Unlock()
				continue
			}
			mu.Unlock()
			_, _ = chromedp.Call(b.ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
		}
	}()
	heldCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(held)
	}

	b.login(srv, "admin", webtest.AdminPassword)
	b.do("open the audit log", chromedp.Navigate(srv.URL+"/audit"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=audit-table]`)))
	b.waitJS(`#live-status is open`, `document.querySelector("#live-status")?.dataset.state === "open"`)
	appendEntry := func(id string) int64 {
		t.Helper()
		var got int64
		if err := db.WithTx(context.Background(), srv.Pool, func(tx pgx.Tx) error {
			if _, err := audit.AppendBatch(context.Background(), tx, []audit.Entry{{Actor: audit.System, Action: "test.banner", TargetType: "test", TargetID: id}}); err != nil {
				return err
			}
			return tx.QueryRow(context.Background(), `SELECT max(id) FROM audit_log`).Scan(&got)
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	// htmx wires a swapped-in banner's button up when the swap settles.
	bannerSays := func(text string) string {
		return `(document.querySelector("[data-testid=audit-new-button]")?.textContent || "").replace(/\s+/g, " ").includes("` + text + `") &&
			!document.querySelector("[data-testid=audit-new].htmx-added")`
	}

	appendEntry("one")
	b.waitJS("the banner says 1 new entry", bannerSays("1 new entry"))
	b.do("mark the banner's live region", chromedp.Evaluate[chromedp.Void](`document.getElementById("audit-new").closest("[aria-live]").twMark = "banner"`))

	// A second entry: the banner's question about it is held on its way.
	mu.Lock()
	hold = true
	mu.Unlock()
	newest := appendEntry("two")
	webtest.WaitFor(t, 20*time.Second, func() bool { return heldCount() > 0 }, "the banner asked about the second entry")

	// Show, from the keyboard, while that question is on its way.
	b.do("show the new entries",
		chromedp.Focus(chromedp.ID("audit-new-button")),
		chromedp.KeyEvent(kb.Enter),
	)
	b.waitJS("the list shows the second entry, the banner has no count",
		`document.querySelector("#audit-results [data-testid=audit-row]")?.dataset.auditId === "`+i64s(newest)+`" &&
		!document.querySelector("[data-testid=audit-new-button]") && !document.querySelector(".htmx-settling, .htmx-added")`)
	if got := eval[string](b, `(a => a === document.body ? "body" : (a.dataset.testid || a.id || a.tagName) + " " + (a.closest("[data-audit-id]")?.dataset.auditId || ""))(document.activeElement)`); got != "audit-entry-link "+i64s(newest) {
		t.Errorf("after show the focus is on %q, want the newest entry's link (audit-entry-link %d)", got, newest)
	}
	if got := eval[string](b, `document.getElementById("audit-new").closest("[aria-live]")?.twMark || "replaced"`); got != "banner" {
		t.Errorf("the banner's live region after show: %s, want the same element", got)
	}

	// The held question's answer arrives, for a banner no longer shown; a new entry is
	// counted again.
	mu.Lock()
	hold = false
	ids := held
	held = nil
	mu.Unlock()
	for _, id := range ids {
		_, _ = chromedp.Call(b.ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: id})
	}
	appendEntry("three")
	b.waitJS("the banner counts the third entry", bannerSays("1 new entry"))
	if got := eval[string](b, `document.querySelector("[data-testid=audit-new-button]").textContent.replace(/\s+/g, " ").trim()`); !strings.HasPrefix(got, "1 new entry") {
		t.Errorf("the banner after the third entry: %q, want 1 new entry", got)
	}
	b.checkConsole()
}

func i64s(n int64) string { return itoa(int(n)) }
