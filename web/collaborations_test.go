package web_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/grants"
)

func body(t *testing.T, res *http.Response) string {
	t.Helper()
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A question waits on every page of the person asked (not on anyone else's), with the
// person's topic followed live; Approve from the page answers it and makes the grant,
// which /grants lists and revokes (audited); a guest has no grants page.
func TestCollaborationPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, nil)
	alice := srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	srv.CreateUser(t, "bob", auth.RoleToolUser, "bob-password-12")
	srv.CreateUser(t, "gus", auth.RoleGuest, "gus-password-123")
	ca := srv.Login(t, "alice", "alice-password-1")
	cb := srv.Login(t, "bob", "bob-password-12")

	done := make(chan grants.Collaboration, 1)
	go func() {
		c, err := srv.App.Grants.Ask(ctx, grants.Question{UserID: alice.ID, UserName: "alice", ConversationID: "conv-7",
			Prompt: "May I write /srv/app.conf?", AuthorizeOperation: "file_operations.create_file", Target: "/srv/app.conf"})
		if err != nil {
			t.Error(err)
		}
		done <- c
	}()
	var page string
	webtest.WaitFor(t, 10*time.Second, func() bool {
		page = body(t, srv.Get(t, ca, "/tools"))
		return strings.Contains(page, "May I write /srv/app.conf?")
	}, "the question on alice's page")
	if !strings.Contains(page, "user:"+alice.ID) || !strings.Contains(page, `data-testid="collaboration-approve"`) {
		t.Fatalf("the page neither follows alice's topic nor offers Approve:\n%s", page)
	}
	if !strings.Contains(page, `id="nav-questions-count" class="nav-count" data-testid="nav-questions-count" data-count="1"`) {
		t.Error("alice's navigation does not count her question")
	}
	if other := body(t, srv.Get(t, cb, "/tools")); strings.Contains(other, "May I write") || strings.Contains(other, "user:"+alice.ID) ||
		!strings.Contains(other, `data-testid="nav-questions-count" data-count="0"`) {
		t.Fatal("bob sees alice's question, or a count of it")
	}
	list, err := srv.App.Grants.Collaborations(ctx, alice.ID, grants.StatusPending)
	if err != nil || len(list) != 1 {
		t.Fatalf("pending: %v %+v", err, list)
	}
	res := srv.PostFormHeaders(t, ca, "/collaborations/"+list[0].ID+"/respond", url.Values{"decision": {"approve"}, "response": {"go on, but carefully"}},
		map[string]string{"HX-Request": "true"})
	if frag := body(t, res); res.StatusCode != http.StatusOK || !strings.Contains(frag, "Approved") {
		t.Fatalf("approve: %d %s", res.StatusCode, frag)
	}
	select {
	case c := <-done:
		// The button approves; the words (no approval word among them) are the answer.
		if c.Status != grants.StatusAnswered || c.GrantID == nil || !c.Approved() || c.Response != "go on, but carefully" {
			t.Fatalf("answer: %+v", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the question still waits")
	}

	page = body(t, srv.Get(t, ca, "/grants"))
	if !strings.Contains(page, "file_operations.create_file") || !strings.Contains(page, "/srv/app.conf") || !strings.Contains(page, "conv-7") {
		t.Fatalf("/grants:\n%s", page)
	}
	if other := body(t, srv.Get(t, cb, "/grants")); strings.Contains(other, "conv-7") {
		t.Fatal("bob sees alice's grant")
	}
	active, _ := srv.App.Grants.Active(ctx, grants.Filter{UserID: alice.ID})
	if len(active) != 1 {
		t.Fatalf("active: %+v", active)
	}
	if res := srv.PostForm(t, cb, "/grants/"+active[0].ID+"/revoke", nil); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("bob revokes: %d", res.StatusCode)
	}
	if active, _ := srv.App.Grants.Active(ctx, grants.Filter{}); len(active) != 1 {
		t.Fatal("bob revoked alice's grant")
	}
	if res := srv.PostForm(t, ca, "/grants/"+active[0].ID+"/revoke", nil); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("revoke: %d", res.StatusCode)
	}
	if active, _ := srv.App.Grants.Active(ctx, grants.Filter{}); len(active) != 0 {
		t.Fatal("the grant is still active")
	}
	var n int
	if err := srv.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action = 'grant.revoke' AND actor_name = 'alice'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("grant.revoke audited: %d %v", n, err)
	}
	if res := srv.Get(t, srv.Login(t, "gus", "gus-password-123"), "/grants"); res.StatusCode != http.StatusForbidden {
		t.Fatalf("a guest's /grants: %d", res.StatusCode)
	}
}
