package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/toolwarden/toolwarden/app/webtest"
)

// TestBrowserAuditVerifyAnnouncesOnce: while the chain check runs, the page polls it
// every second, and the count of entries checked changes outside the status's live
// region; the region says "Checking the chain…" once (nothing in it changes while the
// check runs: content swapped in again is read again), then the result.
func TestBrowserAuditVerifyAnnouncesOnce(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("open the audit log", chromedp.Navigate(srv.URL+"/audit"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=audit-table]`)))

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
	b.do("press Verify now", chromedp.Click(chromedp.ID("audit-verify")))
	b.waitJS("the check runs", `document.querySelector("[data-testid=audit-chain]")?.dataset.state === "running" &&
		!document.querySelector("[data-testid=audit-chain]").classList.contains("htmx-settling")`)
	region := `document.getElementById("audit-chain-status")`
	if got := eval[string](b, region+`.textContent.replace(/\s+/g, " ").trim()`); got != "Checking the chain…" {
		t.Errorf("the live region says %q while the check runs, want Checking the chain…", got)
	}
	b.do("watch the live region", chromedp.Evaluate[chromedp.Void](`window.__chainChanges = 0;
		new MutationObserver(function (ms) { window.__chainChanges += ms.length; }).observe(`+region+`, { subtree: true, childList: true, characterData: true, attributes: true });`))
	for i := 0; i < 2; i++ {
		b.do("mark the polled box", chromedp.Evaluate[chromedp.Void](`document.querySelector("[data-testid=audit-chain]").twPolled = false`))
		b.waitJS("a poll while the check runs", `(e => e && e.twPolled === undefined && e.dataset.state === "running" && !e.classList.contains("htmx-settling"))(document.querySelector("[data-testid=audit-chain]"))`)
	}
	if n := eval[int](b, `window.__chainChanges`); n != 0 {
		t.Errorf("the status's live region changed %d times in two polls while the check ran, want not at all", n)
	}
	// The count is shown, out of every live region.
	if got := eval[string](b, `(e => e ? e.textContent.replace(/\s+/g, " ").trim() + (e.closest("[aria-live], [role=status], [role=log], [role=alert]") ? " (live)" : "") : "none")(document.querySelector("[data-testid=chain-progress]"))`); !strings.HasSuffix(got, " entries") {
		t.Errorf("while the check runs the count reads %q, want N of M entries, outside any live region", got)
	}

	if err := tx.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.waitJS("the chain is verified", `document.querySelector("[data-testid=audit-chain]")?.dataset.state === "ok"`)
	if got := eval[string](b, region+`.textContent`); !strings.Contains(got, "Verified through entry") {
		t.Errorf("when the check ended the live region says %q, want the result", got)
	}
	if n := eval[int](b, `window.__chainChanges`); n == 0 {
		t.Error("the live region did not change when the check ended")
	}
	if n := eval[int](b, `document.querySelectorAll("[data-testid=chain-progress]").length`); n != 0 {
		t.Errorf("%d counts still shown once the check ended", n)
	}
	b.checkConsole()
}
