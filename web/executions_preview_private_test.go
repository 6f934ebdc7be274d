package web_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/risk"
)

// A built-in file write's preview diff holds the requester's file as it was (a
// delete_file of .env: all of it): it is shown to the requester, to auditors and, while
// the plan awaits approval, to whoever may decide it, as the step's result is; others
// read a note naming the file. The decision's live fragment, shared by every open page,
// carries no diff but has each page ask for its preview as its viewer.
func TestExecutionPreviewDiffPrivate(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	srv.App.Enable(t, "builtin__file_operations")
	srv.App.SetRisk(t, "builtin__file_operations", risk.Medium) // waits for alice's confirm
	const secret = "vault=plum-Falcon-58"
	ws, err := srv.App.Builtin.Workspace("conv-diff")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "settings.txt"), []byte(secret+"\nmode=dev\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	srv.CreateUser(t, "bob", auth.RoleToolUser, "bob-password-12")
	srv.CreateUser(t, "carol", auth.RoleAuditor, "carol-password-1")
	alice := svClient{t: t, srv: srv, c: srv.Login(t, "alice", "alice-password-1")}
	bob := svClient{t: t, srv: srv, c: srv.Login(t, "bob", "bob-password-12")}
	carol := svClient{t: t, srv: srv, c: srv.Login(t, "carol", "carol-password-1")}

	body := plan(step("builtin__file_operations.replace_string", map[string]any{"filePath": "settings.txt",
		"oldString": "mode=dev", "newString": "mode=prod"}))
	body["conversation_id"] = "conv-diff"
	var ex apiExec
	alice.json(http.MethodPost, "/api/v1/executions", body, 201, &ex)
	if ex.Status != "awaiting_approval" {
		t.Fatalf("the plan: status %s, want awaiting_approval", ex.Status)
	}
	type viewer struct {
		name string
		c    svClient
		sees bool
	}
	check := func(when string, who viewer, paths ...string) {
		t.Helper()
		for _, path := range paths {
			html := pageHTML(t, who.c, path)
			d, err := goquery.NewDocumentFromReader(strings.NewReader(html))
			if err != nil {
				t.Fatal(err)
			}
			pv := d.Find("#exec-preview-" + ex.ID)
			if pv.Length() != 1 {
				t.Errorf("%s, %s: %s has %d previews, want 1", when, who.name, path, pv.Length())
				continue
			}
			if got := strings.Contains(html, "plum-Falcon"); got != who.sees {
				t.Errorf("%s, %s: %s shows the file's text %v, want %v", when, who.name, path, got, who.sees)
			}
			if got := pv.Find("[data-testid=step-diff]").Length() == 1; got != who.sees {
				t.Errorf("%s, %s: %s shows the diff %v, want %v", when, who.name, path, got, who.sees)
			}
			note := pv.Find("[data-testid=step-diff-withheld]")
			if (note.Length() == 1) == who.sees || !who.sees && !strings.Contains(note.Text(), "settings.txt") {
				t.Errorf("%s, %s: %s says the change is withheld: %q", when, who.name, path, note.Text())
			}
		}
	}
	// Awaiting approval, bob may approve it: he reads what it will change.
	for _, who := range []viewer{{"alice (the requester)", alice, true}, {"bob (who may approve)", bob, true}, {"carol (an auditor)", carol, true}} {
		check("awaiting approval", who, "/executions/"+ex.ID)
	}

	cursor := lastEventID(t, srv)
	alice.json(http.MethodPost, "/api/v1/executions/"+ex.ID+"/confirm", map[string]any{"plan_hash": ex.PlanHash}, 200, nil)
	waitExec(t, alice, ex.ID, "success")
	for _, who := range []viewer{{"alice (the requester)", alice, true}, {"carol (an auditor)", carol, true}, {"bob (another tool user)", bob, false}} {
		check("decided", who, "/executions/"+ex.ID, "/executions/"+ex.ID+"/results?preview=1")
	}

	// The decision's fragment is one for every page: no diff, and one loader asking for
	// the preview (with the results) as the page's viewer.
	conn := wsDial(t, srv, bob.c, []string{"execution:" + ex.ID}, cursor)
	decided := wsUntil(t, conn, "the preview sent again", func(doc *goquery.Document) bool {
		if html, _ := doc.Html(); strings.Contains(html, "plum-Falcon") {
			t.Errorf("a live fragment shows the file's text: %.400s", html)
		}
		return doc.Find("[data-testid=action-preview]").Length() > 0
	})
	if decided.Find("[data-testid=step-diff]").Length() != 0 || decided.Find("[data-testid=step-diff-withheld]").Length() != 1 {
		t.Error("the decision's live fragment shows the diff, or no note in its place")
	}
	loaders := decided.Find("#exec-results-loader-" + ex.ID)
	if loaders.Length() != 1 {
		t.Fatalf("the decision's live fragment has %d results loaders, want 1", loaders.Length())
	}
	if got := loaders.AttrOr("hx-select-oob", ""); !strings.Contains(got, "#exec-preview-"+ex.ID) || loaders.AttrOr("hx-get", "") != "/executions/"+ex.ID+"/results?preview=1" {
		t.Errorf("the loader asks for %q, selecting %q: not the preview as the viewer", loaders.AttrOr("hx-get", ""), got)
	}
}

// The panels a page asks for after a live update that withheld only results leave the
// preview out: every later step's event would re-send every diff of the plan.
func TestResultsRouteLeavesPreviewOut(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	srv.App.Enable(t, "builtin__memory_operations")
	srv.App.SetRisk(t, "builtin__memory_operations", risk.Low)
	admin := svClient{t: t, srv: srv, c: srv.Login(t, "admin", webtest.AdminPassword)}
	var ex apiExec
	admin.json(http.MethodPost, "/api/v1/executions", plan(step("builtin__memory_operations.list", map[string]any{})), 201, &ex)
	waitExec(t, admin, ex.ID, "success")
	d := page(t, srv.Get(t, admin.c, "/executions/"+ex.ID+"/results"))
	if d.Find("#exec-preview-"+ex.ID).Length() != 0 || d.Find("#exec-results-"+ex.ID).Length() != 1 {
		t.Error("the results route without ?preview=1 sends the preview, or no results")
	}
	if page(t, srv.Get(t, admin.c, "/executions/"+ex.ID+"/results?preview=1")).Find("#exec-preview-"+ex.ID).Length() != 1 {
		t.Error("the results route with ?preview=1 sends no preview")
	}
}
