package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/builtin"
	"github.com/toolwarden/toolwarden/services/grants"
)

// /terminals and /grants follow what happens without a reload: a terminal an agent
// opens appears, its end shows, and it leaves the list when closed; a grant given
// appears, a use is counted, and a revoked one goes. Another person's do not show.
func TestBrowserLiveLists(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	alice := srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	bob := srv.CreateUser(t, "bob", auth.RoleToolUser, "bob-password-12")
	ws, err := srv.App.Builtin.Workspace("conv-live")
	if err != nil {
		t.Fatal(err)
	}

	b := newBrowser(t)
	b.login(srv, "alice", "alice-password-1")
	b.do("open the terminals", chromedp.Navigate(srv.URL+"/terminals"))
	b.waitJS("the page is live", `document.querySelector("[data-live-label]")?.textContent === "Live"`)
	b.waitJS("no terminals yet", `!!document.querySelector("[data-testid=no-terminals]")?.checkVisibility()`)
	// Bob's terminal does not show on alice's page; hers does.
	srv.App.Enable(t, builtin.TerminalToolName) // else any change the router hears ends their terminals
	bobs, err := srv.App.Terminals.Start(builtin.TerminalCaller{UserID: bob.ID, UserName: "bob"}, "conv-bob", ws, "sleep 30", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer bobs.Close()
	term, _, err := srv.App.Terminals.OpenPTY(builtin.TerminalCaller{UserID: alice.ID, UserName: "alice"}, "conv-live", ws)
	if err != nil {
		t.Fatal(err)
	}
	row := `document.querySelector("[data-terminal-id='` + term.ID + `']")`
	b.waitJS("alice's terminal appears", row+`?.querySelector("[data-testid=terminal-state]")?.textContent === "running"`)
	if eval[bool](b, `!!document.querySelector("[data-terminal-id='`+bobs.ID+`']")`) {
		t.Fatal("alice's page lists bob's terminal")
	}
	if err := term.Input(builtin.TerminalCaller{UserID: alice.ID, UserName: "alice"}, "exit\n"); err != nil {
		t.Fatal(err)
	}
	b.waitJS("its end shows", row+`?.querySelector("[data-testid=terminal-state]")?.textContent === "ended"`)
	term.Close()
	b.waitJS("it leaves the list", `!`+row+` && !!document.querySelector("[data-testid=no-terminals]")?.checkVisibility()`)

	b.do("open the grants", chromedp.Navigate(srv.URL+"/grants"))
	b.waitJS("the page is live", `document.querySelector("[data-live-label]")?.textContent === "Live"`)
	g, err := srv.App.Grants.Create(ctx, grants.Spec{ConversationID: "conv-live", Operation: "file_operations.create_file",
		By: audit.Actor{Kind: audit.ActorUser, ID: alice.ID, Name: "alice"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.App.Grants.Create(ctx, grants.Spec{ConversationID: "conv-bob", Operation: "file_operations.create_file",
		By: audit.Actor{Kind: audit.ActorUser, ID: bob.ID, Name: "bob"}}); err != nil {
		t.Fatal(err)
	}
	grow := `document.getElementById("grant-` + g.ID + `")`
	b.waitJS("the grant appears", grow+`?.textContent.includes("0 uses so far")`)
	if ok, err := srv.App.Grants.Allow(ctx, "conv-live", "file_operations.create_file", "/x"); err != nil || !ok {
		t.Fatalf("use the grant: %v %v", ok, err)
	}
	b.waitJS("its use is counted", grow+`?.textContent.includes("1 use so far")`)
	if n := eval[int](b, `document.querySelectorAll("[data-testid=grant-row]").length`); n != 1 {
		t.Fatalf("alice's page lists %d grants, want her one", n)
	}
	if _, err := srv.App.Grants.Revoke(ctx, audit.Actor{Kind: audit.ActorUser, ID: alice.ID, Name: "alice"}, g.ID, true); err != nil {
		t.Fatal(err)
	}
	b.waitJS("the revoked grant goes", `!`+grow+` && !!document.querySelector("[data-testid=no-grants]")?.checkVisibility()`)
	ended := func(id string) string { return `document.getElementById("grant-ended-` + id + `")?.textContent` }
	b.waitJS("and shows as ended", ended(g.ID)+`?.includes("revoked")`)

	// A one-time grant used, and one that expires, end under the same list.
	once, err := srv.App.Grants.Create(ctx, grants.Spec{ConversationID: "conv-live", Operation: "file_operations.delete_file",
		OneTime: true, By: audit.Actor{Kind: audit.ActorUser, ID: alice.ID, Name: "alice"}})
	if err != nil {
		t.Fatal(err)
	}
	short, err := srv.App.Grants.Create(ctx, grants.Spec{ConversationID: "conv-live", Operation: "file_operations.rename_file",
		TTL: 3 * time.Second, By: audit.Actor{Kind: audit.ActorUser, ID: alice.ID, Name: "alice"}})
	if err != nil {
		t.Fatal(err)
	}
	b.waitJS("both appear", `!!document.getElementById("grant-`+once.ID+`") && !!document.getElementById("grant-`+short.ID+`")`)
	if ok, err := srv.App.Grants.Allow(ctx, "conv-live", "file_operations.delete_file", "/x"); err != nil || !ok {
		t.Fatalf("use the one-time grant: %v %v", ok, err)
	}
	b.waitJS("the used grant ends", `!document.getElementById("grant-`+once.ID+`") && `+ended(once.ID)+`?.includes("used")`)
	b.waitJS("the short grant expires", `!document.getElementById("grant-`+short.ID+`") && `+ended(short.ID)+`?.includes("expired")`)
	if n := eval[int](b, `document.querySelectorAll("#grant-ended-rows > tr").length`); n != 3 {
		t.Fatalf("ended grants listed: %d, want 3", n)
	}
	if first := eval[string](b, `document.querySelector("#grant-ended-rows > tr").id`); first != "grant-ended-"+short.ID {
		t.Fatalf("the latest to end is not first: %s", first)
	}
	// A reload shows the same three, from the server.
	b.do("reload", chromedp.Reload())
	b.waitJS("ended after a reload", `document.querySelectorAll("#grant-ended-rows > tr").length === 3 && `+ended(short.ID)+`?.includes("expired")`)
	if n := eval[int](b, `document.querySelectorAll("#grant-ended-rows td:last-child form, #grant-ended-rows button").length`); n != 0 {
		t.Fatalf("an ended grant offers %d actions", n)
	}
	// A row leaves the list a day after its grant ended, on a page left open.
	leaves := eval[float64](b, `Number(document.getElementById("grant-ended-`+once.ID+`").dataset.leavesAt)`)
	if d := time.Until(time.UnixMilli(int64(leaves))); d < 23*time.Hour || d > 25*time.Hour {
		t.Fatalf("the used grant's row leaves in %s, want a day", d)
	}
	b.do("a day passes for that row", chromedp.Evaluate[chromedp.Void](`document.getElementById("grant-ended-`+once.ID+`").dataset.leavesAt = "1"`))
	b.waitJS("it leaves", `!document.getElementById("grant-ended-`+once.ID+`") && document.querySelectorAll("#grant-ended-rows > tr").length === 2`)
	b.checkConsole()
}
