package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/grants"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/tools"
)

// user_collaboration blocks whatever calls it until the person asked answers: a plan's
// step, a test-panel run, a call whose tool timeout is far shorter than the wait.

const collabPassword = "collab-block-password-1"

// collabEnv is a server with the built-in tools, user_collaboration enabled, and alice,
// the person asked (her browser session answers).
type collabEnv struct {
	srv   *webtest.Server
	alice auth.User
	c     *http.Client
	api   svClient
}

func collabStart(t *testing.T) *collabEnv {
	t.Helper()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	srv.App.Enable(t, "builtin__user_collaboration")
	alice := srv.CreateUser(t, "alice", auth.RoleToolUser, collabPassword)
	c := srv.Login(t, "alice", collabPassword)
	return &collabEnv{srv: srv, alice: alice, c: c, api: svClient{t: t, srv: srv, c: c}}
}

// pending waits for alice's one pending question.
func (e *collabEnv) pending(t *testing.T) grants.Collaboration {
	t.Helper()
	var list struct{ Items []grants.Collaboration }
	webtest.WaitFor(t, 15*time.Second, func() bool {
		e.api.json(http.MethodGet, "/api/v1/collaborations?status=pending", nil, 200, &list)
		return len(list.Items) == 1
	}, "alice's question")
	return list.Items[0]
}

// stillPending checks, after a while, that question id still waits.
func (e *collabEnv) stillPending(t *testing.T, id string, after time.Duration) {
	t.Helper()
	time.Sleep(after)
	var list struct{ Items []grants.Collaboration }
	e.api.json(http.MethodGet, "/api/v1/collaborations?status=pending", nil, 200, &list)
	if len(list.Items) != 1 || list.Items[0].ID != id {
		t.Fatalf("after %s the question no longer waits: %+v", after, list.Items)
	}
}

func (e *collabEnv) answer(t *testing.T, id, response string) {
	t.Helper()
	e.api.json(http.MethodPost, "/api/v1/collaborations/"+id+"/respond", map[string]string{"response": response}, 200, nil)
}

// A plan step that asks alice waits, its execution executing and the step running,
// until she answers; then the plan finishes with her answer as the step's result.
func TestCollaborationBlocksPlanStep(t *testing.T) {
	t.Parallel()
	e := collabStart(t)
	body := plan(step("builtin__user_collaboration", map[string]any{"prompt": "Deploy to staging now?"}))
	body["conversation_id"] = "conv-plan"
	var ex apiExec
	e.api.json(http.MethodPost, "/api/v1/executions", body, 201, &ex)
	q := e.pending(t)
	if q.ExecutionID != ex.ID || q.Prompt != "Deploy to staging now?" || q.ConversationID != "conv-plan" {
		t.Fatalf("the question: %+v (execution %s)", q, ex.ID)
	}
	e.stillPending(t, q.ID, 500*time.Millisecond)
	e.api.json(http.MethodGet, "/api/v1/executions/"+ex.ID, nil, 200, &ex)
	if len(ex.Steps) != 1 || ex.Status != "executing" || ex.Steps[0].Status != "running" {
		t.Fatalf("while the question waits: the execution is %s, its steps %d (want executing, one running)", ex.Status, len(ex.Steps))
	}
	e.answer(t, q.ID, "Yes, go ahead")
	ex = waitExec(t, e.api, ex.ID, "success")
	if ex.Steps[0].Status != "succeeded" || !strings.Contains(string(ex.Steps[0].Result), "User response: Yes, go ahead") {
		t.Fatalf("the step: %s %s", ex.Steps[0].Status, ex.Steps[0].Result)
	}
}

// A test-panel run of user_collaboration shows its running panel while the question
// waits, and its result, with the answer, once alice answered.
func TestCollaborationBlocksTestPanelRun(t *testing.T) {
	t.Parallel()
	e := collabStart(t)
	id := toolID(t, e.srv, "builtin__user_collaboration")
	ws := testPost(t, e.srv, e.c, id, url.Values{"mode": {"form"}, "_action": {"run"}, "arg/prompt": {"Which region?"}})
	poll := ws.Find(`[data-testid="test-running"]`).AttrOr("hx-get", "")
	if poll == "" {
		t.Fatalf("no running panel: %s", ws.Find("#test-workspace").Text())
	}
	q := e.pending(t)
	if q.Prompt != "Which region?" || q.Source != router.SourceTestPanel {
		t.Fatalf("the question: %+v", q)
	}
	e.stillPending(t, q.ID, 500*time.Millisecond)
	if d := page(t, hxGet(t, e.srv, e.c, poll)); d.Find(`[data-testid="test-running"]`).Length() != 1 {
		t.Fatalf("the run ended before the answer: %s", d.Text())
	}
	e.answer(t, q.ID, "eu-west-1")
	var out string
	webtest.WaitFor(t, 15*time.Second, func() bool {
		d := page(t, hxGet(t, e.srv, e.c, poll))
		if d.Find(`[data-testid="test-running"]`).Length() == 1 {
			return false
		}
		if st := d.Find(`[data-testid="test-result"]`).AttrOr("data-status", ""); st != "success" {
			t.Fatalf("the run ended %q: %s", st, d.Text())
		}
		out = d.Find(`[data-testid="output-0"]`).Text()
		return true
	}, "the run's result")
	if !strings.Contains(out, "User response: eu-west-1") {
		t.Fatalf("the run's output: %q", out)
	}
}

// user_collaboration is not cut off by its tool's timeout (router.Blocking): with a
// 100 ms timeout the question waits ten times as long and the call then returns the
// answer, instead of timing out and cancelling the question.
func TestCollaborationOutlastsToolTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := collabStart(t)
	short := tools.MinTimeoutMS
	if _, err := e.srv.Tools.Update(ctx, audit.System, toolID(t, e.srv, "builtin__user_collaboration"),
		tools.Patch{TimeoutMS: &short, Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		res *router.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := e.srv.Router.Call(ctx, router.Call{Tool: "builtin__user_collaboration", Arguments: json.RawMessage(`{"prompt":"Still with me?"}`),
			Actor: audit.Actor{Kind: audit.ActorUser, ID: e.alice.ID, Name: "alice"}, Role: auth.RoleToolUser,
			Source: router.SourceAPI, ConversationID: "conv-timeout"})
		done <- outcome{res, err}
	}()
	q := e.pending(t)
	e.stillPending(t, q.ID, 10*time.Duration(short)*time.Millisecond)
	select {
	case o := <-done:
		t.Fatalf("the call ended before the answer: %+v %v", o.res, o.err)
	default:
	}
	e.answer(t, q.ID, "yes")
	select {
	case o := <-done:
		if o.err != nil || o.res.IsError || !strings.Contains(router.TextOf(o.res.Content), "User response: yes") {
			t.Fatalf("the call: %+v %v", o.res, o.err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the call still waits after the answer")
	}
}
