package e2e

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db"
)

// TestBrowserAuditor walks the audit browser as an auditor, from the keyboard where a
// person would: filter, see new entries arrive live, open an entry, follow its request
// id, export the filtered set, verify the chain, and read it on a phone.
func TestBrowserAuditor(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	const pw = "auditor-browser-pass-1"
	srv.CreateUser(t, "carol", auth.RoleAuditor, pw)
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	newToken := func(name string) {
		res := srv.PostForm(t, admin, "/tokens", url.Values{"name": {name}})
		res.Body.Close()
		if res.StatusCode >= 400 {
			t.Fatalf("create token %s: %d", name, res.StatusCode)
		}
	}
	newToken("first")
	newToken("second")
	// Three tools to tag at once: a bulk action writes one entry per tool in one request.
	srv.LiveServer(t, "notes", false)
	var tagged []string
	for _, name := range []string{"notes__echo", "notes__add", "notes__sleep"} {
		tagged = append(tagged, srv.App.Settled(t, name).ID)
	}
	bulkTag := func(tag string) {
		res := srv.PostForm(t, admin, "/tools/bulk", url.Values{"action": {"tag"}, "tags": {tag}, "id": tagged})
		res.Body.Close()
		if res.StatusCode >= 400 {
			t.Fatalf("tag the tools %s: %d", tag, res.StatusCode)
		}
	}

	b := newBrowser(t)
	b.login(srv, "carol", pw)
	b.do("open the audit log from the navigation",
		chromedp.Focus(chromedp.CSS(`#app-nav a[href="/audit"]`)),
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=audit-table]`)),
	)

	// Filter from the keyboard: type an action and press Enter in the field.
	b.do("filter on token.create",
		chromedp.SendKeys(chromedp.ID("audit-action"), "token.create"),
		chromedp.KeyEvent(kb.Enter),
	)
	b.waitAfterNavigation("the URL carries the filter", `location.search.includes("action=token.create")`)
	b.waitJS("two rows", `document.querySelectorAll("[data-testid=audit-row]").length === 2`)
	b.waitJS(`#live-status is open`, `document.querySelector("#live-status")?.dataset.state === "open"`)

	// A matching entry written elsewhere shows as "1 new entry"; an entry that does not
	// match (a sign-in) does not count. The banner's button loads it.
	srv.Login(t, "admin", webtest.AdminPassword)
	newToken("third")
	// htmx wires a swapped-in banner's button up when the swap settles (20 ms later,
	// when it takes the banner's htmx-added class away): a key pressed before that is lost.
	b.waitJS("the banner says 1 new entry",
		`(document.querySelector("[data-testid=audit-new-button]")?.textContent || "").replace(/\s+/g, " ").includes("1 new entry") &&
		!document.querySelector("[data-testid=audit-new].htmx-added")`)
	b.do("show the new entry",
		chromedp.Focus(chromedp.CSS(`[data-testid=audit-new-button]`)),
		chromedp.KeyEvent(kb.Enter),
	)
	b.waitJS("three rows, the banner gone", `document.querySelectorAll("[data-testid=audit-row]").length === 3 && !document.querySelector("[data-testid=audit-new-button]")`)

	// Open the newest entry of a bulk action, then every entry of its request: the three
	// of that action, not the three of the same action on the same tools before it.
	bulkTag("first-batch")
	bulkTag("second-batch")
	var request string
	if err := srv.Pool.QueryRow(context.Background(), `SELECT request_id FROM audit_log WHERE action = 'tool.configure'
		ORDER BY id DESC LIMIT 1`).Scan(&request); err != nil || request == "" {
		t.Fatalf("the second bulk action's request id: %q, %v", request, err)
	}
	want := requestEntries(t, srv, request)
	if len(want) != 3 {
		t.Fatalf("the second bulk action wrote %d entries (%v) in its request, want one per tool", len(want), want)
	}
	b.do("list the tools' changes", chromedp.Navigate(srv.URL+"/audit?action=tool.configure"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=audit-table]`)))
	b.waitJS("six rows, two requests", `document.querySelectorAll("[data-testid=audit-row]").length === 6`)
	b.do("open the newest entry", chromedp.Click(chromedp.CSS(`[data-testid=audit-row] [data-testid=audit-entry-link]`)))
	b.waitAfterNavigation("the entry's page", `document.querySelector("[data-testid=entry-hash]") !== null`)
	if h := eval[string](b, `document.querySelector("[data-testid=entry-hash]").textContent`); len(h) != 64 {
		t.Fatalf("the entry's hash: %q", h)
	}
	if got := eval[string](b, `document.querySelector("[data-testid=entry-actor]").textContent`); !strings.Contains(got, "admin") {
		t.Fatalf("the entry's actor: %q", got)
	}
	b.do("follow the request id", chromedp.Click(chromedp.CSS(`[data-testid=entry-request]`)))
	b.waitAfterNavigation("the list is the request's", `location.search.includes("request_id=") && document.querySelector("#audit-request") !== null`)
	if got := eval[string](b, `[...document.querySelectorAll("[data-testid=audit-row]")].map(r => r.dataset.auditId).sort((x, y) => x - y).join(",")`); got != strings.Join(want, ",") {
		t.Fatalf("entries listed for the request: %s, want its entries %s and nothing else", got, strings.Join(want, ","))
	}

	// Export what the filter selects, through the page's link (the browser's session).
	b.do("back to the token entries", chromedp.Navigate(srv.URL+"/audit?action=token.create"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=export-csv]`)))
	csv := fetchText(b, `document.querySelector("[data-testid=export-csv]").href`)
	lines := strings.Split(strings.TrimSpace(csv), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "id,at,") || !strings.Contains(lines[1], "token.create") {
		t.Fatalf("the CSV export: %q", csv)
	}
	jsonl := fetchText(b, `document.querySelector("[data-testid=export-jsonl]").href`)
	if n := len(strings.Split(strings.TrimSpace(jsonl), "\n")); n != 3 {
		t.Fatalf("the JSON Lines export has %d lines, want 3", n)
	}

	// Verify: the check runs in the background and the status says how far it holds.
	b.do("verify the chain",
		chromedp.Focus(chromedp.CSS(`[data-testid=verify]`)),
		chromedp.KeyEvent(kb.Enter),
	)
	b.waitJS("the chain is verified", `document.querySelector("[data-testid=audit-chain]")?.dataset.state === "ok"`)
	if got := eval[string](b, `document.querySelector("[data-testid=chain-status]").textContent`); !strings.Contains(got, "Verified through entry") {
		t.Fatalf("the chain's status: %q", got)
	}

	// Save the filters as a view.
	b.do("save a view",
		chromedp.SendKeys(chromedp.ID("audit-view-name"), "Tokens"),
		chromedp.KeyEvent(kb.Enter),
	)
	b.waitAfterNavigation("the saved view is listed", `document.querySelector("[data-testid=saved-view] a")?.textContent === "Tokens"`)

	// On a phone the page fits: the table scrolls inside its box, the page does not.
	b.do("emulate a phone", chromedp.EmulateViewport(390, 844, chromedp.EmulatePortrait),
		chromedp.Navigate(srv.URL+"/audit"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=audit-table]`)))
	if eval[bool](b, `document.documentElement.scrollWidth > window.innerWidth + 1`) {
		t.Fatalf("the audit page scrolls sideways on a phone: %d > %d; too wide: %s", eval[int](b, `document.documentElement.scrollWidth`), eval[int](b, `window.innerWidth`),
			eval[string](b, `[...document.querySelectorAll("body *")].filter(e => e.getBoundingClientRect().right > window.innerWidth + 1).slice(0, 8).map(e => e.tagName + "." + e.className + "#" + e.id + ":" + Math.round(e.getBoundingClientRect().right)).join(" ")`))
	}
	b.checkConsole()
}

// requestEntries are the ids of the audit entries written in request, in order.
func requestEntries(t *testing.T, srv *webtest.Server, request string) []string {
	t.Helper()
	rows, err := srv.Pool.Query(context.Background(), `SELECT id::text FROM audit_log WHERE request_id = $1 ORDER BY id`, request)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// waitAfterNavigation polls expr until it is true, across the navigation an action
// started (an evaluation while the tab navigates fails, and is tried again).
func (b *browser) waitAfterNavigation(what, expr string) {
	b.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 2*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.readyState === "complete" && !!(`+expr+`)`))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("waiting until %s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// fetchText fetches the URL urlExpr evaluates to from the page (with its session) and
// returns the body.
func fetchText(b *browser, urlExpr string) string {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`fetch(`+urlExpr+`).then(r => r.text())`, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("fetch %s: %v", urlExpr, err)
	}
	return v
}

// TestBrowserAuditNewBannerUnderSteadyActivity: while entries keep arriving (one every
// 150 ms, so a batch reaches the page every 250 ms), the "N new entries" banner shows.
// It asked the server 300 ms after the last batch, a wait each batch started again, so
// with steady activity it never asked at all.
func TestBrowserAuditNewBannerUnderSteadyActivity(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("open the audit log", chromedp.Navigate(srv.URL+"/audit"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=audit-table]`)))
	b.waitJS(`#live-status is open`, `document.querySelector("#live-status")?.dataset.state === "open"`)

	// Entries every 150 ms, at most appends of them (6 s), until the banner showed.
	const appends = 40
	appendEntry := func(n int) error {
		return db.WithTx(context.Background(), srv.Pool, func(tx pgx.Tx) error {
			_, err := audit.AppendBatch(context.Background(), tx, []audit.Entry{{Actor: audit.System, Action: "test.steady",
				TargetType: "test", TargetID: "steady-" + itoa(n)}})
			return err
		})
	}
	stop := make(chan struct{})
	done := make(chan int)
	go func() {
		n := 0
		defer func() { done <- n }()
		tick := time.NewTicker(150 * time.Millisecond)
		defer tick.Stop()
		for ; n < appends; n++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if err := appendEntry(n); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	b.waitJS("the banner shows new entries", `!!document.querySelector("[data-testid=audit-new-button]")`)
	close(stop)
	n := <-done
	if n >= appends {
		t.Fatalf("the banner showed only after the activity stopped (%d entries, one every 150 ms)", n)
	}
	// Entries after the banner showed are counted too, the last of them included: the
	// banner asks again for what came while it was asking, once its answer is in.
	for range 2 {
		if err := appendEntry(n); err != nil {
			t.Fatal(err)
		}
		n++
	}
	b.waitJS("the banner counts all "+itoa(n)+" entries",
		`(document.querySelector("[data-testid=audit-new-button]")?.textContent || "").replace(/\s+/g, " ").trim().startsWith("`+itoa(n)+` new entr")`)
	b.checkConsole()
}
