package handlers_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
)

// An answer from the live prompt with no words brings the card back, the question
// still answerable, saying why at the box; the same words to another's question, or to
// one answered, say that instead of what was wrong with the words.
func TestCollaborationRefusedAnswerForm(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, nil)
	alice := srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	srv.CreateUser(t, "bob", auth.RoleToolUser, "bob-password-12")
	ca, cb := srv.Login(t, "alice", "alice-password-1"), srv.Login(t, "bob", "bob-password-12")
	var waiting, answered string
	if err := srv.Pool.QueryRow(ctx, `INSERT INTO collaborations (user_id, conversation_id, prompt) VALUES ($1, 'c', 'Which file?') RETURNING id`,
		alice.ID).Scan(&waiting); err != nil {
		t.Fatal(err)
	}
	if err := srv.Pool.QueryRow(ctx, `INSERT INTO collaborations (user_id, conversation_id, prompt, status) VALUES ($1, 'c', 'Done?', 'answered') RETURNING id`,
		alice.ID).Scan(&answered); err != nil {
		t.Fatal(err)
	}
	respond := func(c *http.Client, id string) (int, string) {
		t.Helper()
		res := srv.PostFormHeaders(t, c, "/collaborations/"+id+"/respond", url.Values{"response": {"   "}}, map[string]string{"HX-Request": "true"})
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}

	if status, frag := respond(ca, waiting); status != http.StatusOK || !strings.Contains(frag, `data-testid="collaboration"`) ||
		!strings.Contains(frag, "Which file?") || !strings.Contains(frag, "Say something") || strings.Contains(frag, "collaboration-answered") {
		t.Fatalf("no words to alice's question: %d %s", status, frag)
	}
	if status, frag := respond(cb, waiting); status == http.StatusOK && !strings.Contains(frag, "collaboration-answered") ||
		strings.Contains(frag, "Which file?") || strings.Contains(frag, "Say something") {
		t.Fatalf("no words from bob to alice's question: %d %s", status, frag)
	}
	// Said in place of the card, as another's question is: not a 409 only a toast would say.
	if status, frag := respond(ca, answered); status != http.StatusOK || !strings.Contains(frag, "collaboration-answered") ||
		!strings.Contains(frag, "no longer waiting for an answer") || strings.Contains(frag, "Say something") {
		t.Fatalf("no words to an answered question: %d %.300s", status, frag)
	}
}
