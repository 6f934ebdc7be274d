package e2e

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db"
)

// TestBrowserAuditVerifyKeepsFocusAndLiveRegions: "Verify now" pressed from the keyboard
// keeps the focus on the button (a "Checking…" one while the check runs) and gives it
// back when the check ends, and the live regions that announce the chain's status and
// the new entries stay the same elements while their content changes: a screen reader
// announces changes inside a region it knows, not a region swapped in whole.
func TestBrowserAuditVerifyKeepsFocusAndLiveRegions(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("open the audit log", chromedp.Navigate(srv.URL+"/audit"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=audit-table]`)))
	b.waitJS(`#live-status is open`, `document.querySelector("#live-status")?.dataset.state === "open"`)

	// The "N new entries" banner: its live region survives a new count.
	appendEntry := func(id string) {
		t.Helper()
		if err := db.WithTx(context.Background(), srv.Pool, func(tx pgx.Tx) error {
			_, err := audit.AppendBatch(context.Background(), tx, []audit.Entry{{Actor: audit.System, Action: "test.focus", TargetType: "test", TargetID: id}})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	bannerSays := func(text string) string {
		return `(document.querySelector("[data-testid=audit-new-button]")?.textContent || "").replace(/\s+/g, " ").includes("` + text + `") &&
			!document.querySelector("[data-testid=audit-new].htmx-added")`
	}
	appendEntry("one")
	b.waitJS("the banner says 1 new entry", bannerSays("1 new entry"))
	b.do("mark the banner's live region", chromedp.Evaluate[chromedp.Void](`document.getElementById("audit-new").closest("[aria-live]").twMark = "banner"`))
	appendEntry("two")
	b.waitJS("the banner says 2 new entries", bannerSays("2 new entries"))
	if got := eval[string](b, `document.getElementById("audit-new").closest("[aria-live]")?.twMark || "replaced"`); got != "banner" {
		t.Errorf("the banner's live region after a new count: %s, want the same element", got)
	}

	// Hold the check at its start (the lock a check takes to claim its turn), so the
	// page polls it while it runs.
	tx, err := srv.Pool.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(context.Background(), `SELECT pg_advisory_xact_lock(hashtextextended('toolwarden.audit_verify', 0))`); err != nil {
		t.Fatal(err)
	}
	b.do("press Enter on Verify now",
		chromedp.Focus(chromedp.ID("audit-verify")),
		chromedp.KeyEvent(kb.Enter),
	)
	b.waitJS("the check runs", `document.querySelector("[data-testid=audit-chain]")?.dataset.state === "running"`)
	b.do("mark the status's live region and the polled element", chromedp.Evaluate[chromedp.Void](
		`document.querySelector("[data-testid=chain-status]").closest("[aria-live]").twMark = "chain";
		document.querySelector("[data-testid=audit-chain]").twPolled = false`))
	b.waitJS("a poll while the check runs", `(e => e && e.twPolled === undefined && e.dataset.state === "running" && !e.classList.contains("htmx-settling"))(document.querySelector("[data-testid=audit-chain]"))`)
	if got := eval[string](b, `document.querySelector("[data-testid=chain-status]").closest("[aria-live]")?.twMark || "replaced"`); got != "chain" {
		t.Errorf("the chain status's live region after a poll: %s, want the same element", got)
	}
	if got := eval[string](b, `document.activeElement.id || document.activeElement.tagName`); got != "audit-verify" {
		t.Errorf("while the check runs the focus is on %s, want the button #audit-verify", got)
	}

	if err := tx.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.waitJS("the chain is verified", `document.querySelector("[data-testid=audit-chain]")?.dataset.state === "ok" &&
		!document.querySelector("[data-testid=audit-chain]").classList.contains("htmx-settling")`)
	if got := eval[string](b, `(document.activeElement.id || document.activeElement.tagName) + ": " + document.activeElement.innerText.trim().slice(0, 40)`); got != "audit-verify: Verify now" {
		t.Errorf("when the check ended the focus is on %q, want the button #audit-verify, Verify now", got)
	}
	if got := eval[string](b, `document.querySelector("[data-testid=chain-status]").closest("[aria-live]")?.twMark || "replaced"`); got != "chain" {
		t.Errorf("the chain status's live region when the check ended: %s, want the same element", got)
	}
	b.checkConsole()
}
