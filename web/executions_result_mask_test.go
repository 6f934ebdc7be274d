package web_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/gorilla/websocket"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/risk"
)

// An upstream tool's step result is shown whole to the execution's requester only (in
// person or through their token): everyone else who may view the execution, auditors
// too, reads it with what looks like a credential masked, as on the tool's Logs tab. A
// tool that answered with a token showed it to every tool user.
func TestExecutionStepResultMaskedForOthers(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	liveServer(t, srv, "mt", true, "fail")
	srv.App.SetRisk(t, "mt__fail", risk.Low)
	const token = "ghp_Z7c3Kq9Wm2Xv5Bn8Lp4Rt6Yh1Df0Gs3Ja9Uu"
	srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	srv.CreateUser(t, "bob", auth.RoleToolUser, "bob-password-12")
	srv.CreateUser(t, "carol", auth.RoleAuditor, "carol-password-1")
	alice := svClient{t: t, srv: srv, c: srv.Login(t, "alice", "alice-password-1")}
	aliceToken := svClient{t: t, srv: srv, bearer: srv.Token(t, "alice")}
	bob := svClient{t: t, srv: srv, c: srv.Login(t, "bob", "bob-password-12")}
	carol := svClient{t: t, srv: srv, c: srv.Login(t, "carol", "carol-password-1")}

	cursor := lastEventID(t, srv)
	var ex apiExec
	alice.json(http.MethodPost, "/api/v1/executions", plan(step("mt__fail", map[string]any{"message": "bad credentials " + token})), 201, &ex)
	waitExec(t, alice, ex.ID, "failed")
	// bob's page, open since before it ran, is sent its events again.
	conn := wsDial(t, srv, bob.c, []string{"execution:" + ex.ID}, cursor)

	apiResult := func(c svClient) string {
		var out struct {
			Steps []struct {
				Result json.RawMessage `json:"result"`
			} `json:"steps"`
		}
		c.json(http.MethodGet, "/api/v1/executions/"+ex.ID, nil, 200, &out)
		if len(out.Steps) != 1 {
			t.Fatalf("the API shows %d steps, want 1", len(out.Steps))
		}
		return string(out.Steps[0].Result)
	}
	for _, who := range []struct {
		name string
		c    svClient
		sees bool
	}{{"alice (the requester)", alice, true}, {"alice's token", aliceToken, true},
		{"carol (an auditor)", carol, false}, {"bob (another tool user)", bob, false}} {
		got := apiResult(who.c)
		if strings.Contains(got, token) != who.sees || !strings.Contains(got, "bad credentials") {
			t.Errorf("%s: the API's step result is %s, want the token shown %v", who.name, got, who.sees)
		}
		if who.c.c == nil {
			continue // a token has no pages
		}
		doc := page(t, srv.Get(t, who.c.c, "/executions/"+ex.ID))
		out := doc.Find("[data-testid=step-result] [data-testid=output-0]").Text()
		if strings.Contains(out, token) != who.sees || !strings.Contains(out, "bad credentials") {
			t.Errorf("%s: the page's step result reads %q, want the token shown %v", who.name, out, who.sees)
		}
		if html := pageHTML(t, who.c, "/executions/"+ex.ID); strings.Contains(html, token) != who.sees {
			t.Errorf("%s: the page holds the token %v, want %v", who.name, !who.sees, who.sees)
		}
		if html := pageHTML(t, who.c, "/executions/"+ex.ID+"/results"); strings.Contains(html, token) != who.sees ||
			!strings.Contains(html, "bad credentials") {
			t.Errorf("%s: the results panel holds the token %v, want %v", who.name, !who.sees, who.sees)
		}
	}

	// The live fragments are rendered once for everyone: they carry the result masked
	// or not at all, and a loader that has each page ask for it as its viewer.
	liveAsksForResults(t, conn, ex.ID, "failed", token)
}

// liveAsksForResults reads execution id's live fragments from conn until it ends as
// status: none may hold secret, and one at least must carry the loader that has the page
// ask for its results as its viewer.
func liveAsksForResults(t *testing.T, conn *websocket.Conn, id, status, secret string) {
	t.Helper()
	var loaders int
	wsUntil(t, conn, "the execution's end", func(doc *goquery.Document) bool {
		html, _ := doc.Html()
		if strings.Contains(html, secret) {
			t.Errorf("a live fragment shows %q: %.400s", secret, html)
		}
		if l := doc.Find("[data-testid=results-loader]"); l.Length() == 1 {
			loaders++
			if got, _ := l.Attr("hx-get"); got != "/executions/"+id+"/results" {
				t.Errorf("the loader asks for %q", got)
			}
		}
		return doc.Find("[data-testid=log-line][data-kind='execution."+status+"']").Length() == 1
	})
	if loaders == 0 {
		t.Error("no live fragment asked for the results as its viewer")
	}
}
