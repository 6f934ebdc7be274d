package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/grants"
)

// maxAnswer is the longest answer, as long as the longest question (and the form's maxlength).
const maxAnswer = 10_000

// An answer is bounded like the question: one over maxAnswer characters is
// refused naming response and the limit, from the API and from the form, and the
// question still waits; one of exactly the limit (counted in characters, not bytes)
// answers it.
func TestCollaborationAnswerLength(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	alice := srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	ca := srv.Login(t, "alice", "alice-password-1")
	api := webtest.API{T: t, Srv: srv, C: ca}

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan grants.Collaboration, 1)
	go func() {
		c, err := srv.App.Grants.Ask(ctx, grants.Question{UserID: alice.ID, UserName: "alice", ConversationID: "conv-1", Prompt: "Which file?"})
		if err != nil {
			t.Error(err)
		}
		done <- c
	}()
	var list struct{ Items []grants.Collaboration }
	webtest.WaitFor(t, 10*time.Second, func() bool {
		api.JSON(http.MethodGet, "/api/v1/collaborations?status=pending", nil, http.StatusOK, &list)
		return len(list.Items) == 1
	}, "alice's question")
	id := list.Items[0].ID

	var e apiErr
	status, raw := api.Do(http.MethodPost, "/api/v1/collaborations/"+id+"/respond", map[string]string{"response": strings.Repeat("a", maxAnswer+1)})
	if err := json.Unmarshal(raw, &e); err != nil || status != http.StatusBadRequest || !slices.Contains(e.paths(), "response") ||
		!strings.Contains(e.Error.Message, "10000 characters") {
		t.Fatalf("an answer of %d characters: %d %.300s", maxAnswer+1, status, raw)
	}
	res := srv.PostFormHeaders(t, ca, "/collaborations/"+id+"/respond", url.Values{"decision": {"approve"}, "response": {strings.Repeat("b", maxAnswer+1)}},
		map[string]string{"HX-Request": "true"})
	if frag := body(t, res); res.StatusCode != http.StatusOK || !strings.Contains(frag, "10000 characters") {
		t.Fatalf("an over-long answer from the form: %d %.300s", res.StatusCode, frag)
	}
	api.JSON(http.MethodGet, "/api/v1/collaborations?status=pending", nil, http.StatusOK, &list)
	if len(list.Items) != 1 || list.Items[0].ID != id {
		t.Fatalf("the question no longer waits after refused answers: %+v", list.Items)
	}

	atLimit := strings.Repeat("é", maxAnswer) // 20,000 bytes
	var answered grants.Collaboration
	api.JSON(http.MethodPost, "/api/v1/collaborations/"+id+"/respond", map[string]string{"response": " " + atLimit + " "}, http.StatusOK, &answered)
	if c := <-done; c.Status != grants.StatusAnswered || c.Response != atLimit {
		t.Fatalf("an answer of exactly %d characters: %s, %d characters", maxAnswer, c.Status, len([]rune(c.Response)))
	}
}
