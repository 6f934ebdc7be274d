package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/grants"
)

// TestBrowserGrantExpiryOnServerClock: the grants page ends a grant when it expires by
// the server's clock (the page says the server's time, data-server-now), not by the
// browser's: with the browser's clock ten minutes ahead, a grant with five minutes left
// used to end at once.
func TestBrowserGrantExpiryOnServerClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	alice := srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	by := audit.Actor{Kind: audit.ActorUser, ID: alice.ID, Name: "alice"}

	b := newBrowser(t)
	const ahead = 10 * time.Minute
	if _, err := chromedp.Call(b.ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
		Source: `(() => { const now = Date.now; Date.now = () => now() + ` + itoa(int(ahead/time.Millisecond)) + `; })();`}); err != nil {
		t.Fatalf("put the browser's clock ahead: %v", err)
	}
	b.login(srv, "alice", "alice-password-1")

	long, err := srv.App.Grants.Create(ctx, grants.Spec{ConversationID: "conv-clock", Operation: "file_operations.create_file", By: by})
	if err != nil {
		t.Fatal(err)
	}
	short, err := srv.App.Grants.Create(ctx, grants.Spec{ConversationID: "conv-clock", Operation: "file_operations.rename_file",
		TTL: 6 * time.Second, By: by})
	if err != nil {
		t.Fatal(err)
	}
	b.do("open the grants", chromedp.Navigate(srv.URL+"/grants"), chromedp.WaitReady(chromedp.CSS(`[data-testid=grants-table]`)))
	if got := eval[string](b, `document.getElementById("grant-rows").dataset.serverNow ?? ""`); got == "" {
		t.Fatal("the grants page does not say the server's time (data-server-now)")
	}
	if !eval[bool](b, `!!document.getElementById("grant-`+short.ID+`")`) {
		t.Fatal("the short grant is not listed as active when the page opens")
	}
	// Two ticks of the page's expiry timer (once a second).
	time.Sleep(2500 * time.Millisecond)
	if !eval[bool](b, `!!document.getElementById("grant-`+long.ID+`")`) {
		t.Fatalf("the grant with minutes left ended by the browser's clock; the page lists: %s",
			strings.Join(strings.Fields(eval[string](b, `document.body.innerText`)), " "))
	}
	b.waitJS("the short grant expires", `!document.getElementById("grant-`+short.ID+`") && !!document.getElementById("grant-ended-`+short.ID+`")`)
	if !eval[bool](b, `!!document.getElementById("grant-`+long.ID+`")`) {
		t.Error("the grant with minutes left ended with the short one")
	}
	// The expired row leaves the list a day later, by the server's clock too.
	leaves := time.UnixMilli(int64(eval[float64](b, `Number(document.getElementById("grant-ended-`+short.ID+`").dataset.leavesAt)`)))
	if d := time.Until(leaves); d < 24*time.Hour-time.Minute || d > 24*time.Hour+time.Minute {
		t.Errorf("the expired grant's row leaves in %s, want a day by the server's clock", d)
	}
	b.checkConsole()
}
