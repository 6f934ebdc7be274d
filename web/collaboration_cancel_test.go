package web_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/grants"
)

// Cancelling a plan whose step waits for a person's answer (user_collaboration) stops
// the step: the question is withdrawn and can no longer be answered (its grant is never
// made), the execution stays cancelled with the step interrupted, and the worker it held
// is free: with one worker, another plan then runs.
func TestCancelStopsCollaborationStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, &webtest.Options{Builtin: true, Executions: &executions.Options{Workers: 1}})
	srv.App.Enable(t, "builtin__user_collaboration")
	srv.App.Enable(t, "builtin__think")
	srv.CreateUser(t, "alice", auth.RoleToolUser, collabPassword)
	e := &collabEnv{srv: srv}
	e.c = srv.Login(t, "alice", collabPassword)
	e.api = svClient{t: t, srv: srv, c: e.c}

	body := plan(step("builtin__user_collaboration", map[string]any{"prompt": "May I create /srv/app.conf?",
		"authorize_operation": "file_operations.create_file", "target": "/srv/app.conf"}))
	body["conversation_id"] = "conv-cancel"
	var ex apiExec
	e.api.json(http.MethodPost, "/api/v1/executions", body, 201, &ex)
	q := e.pending(t)
	if q.ExecutionID != ex.ID {
		t.Fatalf("the question: %+v (execution %s)", q, ex.ID)
	}
	e.api.json(http.MethodPost, "/api/v1/executions/"+ex.ID+"/cancel", map[string]string{"reason": "changed my mind"}, 200, nil)

	var list struct{ Items []grants.Collaboration }
	webtest.WaitFor(t, 20*time.Second, func() bool {
		e.api.json(http.MethodGet, "/api/v1/collaborations?status=cancelled", nil, 200, &list)
		return len(list.Items) == 1 && list.Items[0].ID == q.ID
	}, "the question of the cancelled plan withdrawn")
	if status, out := e.api.do(http.MethodPost, "/api/v1/collaborations/"+q.ID+"/respond", map[string]string{"response": "yes"}); status != http.StatusConflict {
		t.Fatalf("answering the withdrawn question: %d %s, want 409", status, out)
	}
	if ok, err := srv.App.Grants.Allow(ctx, "conv-cancel", "create_file", "/srv/app.conf"); err != nil || ok {
		t.Fatalf("a grant for the cancelled plan's conversation: %v %v", ok, err)
	}
	webtest.WaitFor(t, 20*time.Second, func() bool {
		e.api.json(http.MethodGet, "/api/v1/executions/"+ex.ID, nil, 200, &ex)
		return len(ex.Steps) == 1 && ex.Steps[0].Status != "running"
	}, "the step's end")
	if ex.Status != "cancelled" || ex.Steps[0].Status != "interrupted" {
		t.Fatalf("after the cancel: the execution is %s, its step %s (want cancelled, interrupted)", ex.Status, ex.Steps[0].Status)
	}

	// The one worker is free again.
	var next apiExec
	e.api.json(http.MethodPost, "/api/v1/executions", plan(step("builtin__think", map[string]any{"thought": "next"})), 201, &next)
	waitExec(t, e.api, next.ID, "success")
}

// At most two steps of one person's plans wait for an answer at once, each holding a
// worker; a third waits, pending, and asks once one of them is answered.
func TestBlockingStepsPerPersonLimited(t *testing.T) {
	t.Parallel()
	e := collabStart(t)
	ids := map[string]bool{}
	for _, p := range []string{"First?", "Second?", "Third?"} {
		var ex apiExec
		e.api.json(http.MethodPost, "/api/v1/executions", plan(step("builtin__user_collaboration", map[string]any{"prompt": p})), 201, &ex)
		ids[ex.ID] = true
	}
	pending := func() []grants.Collaboration {
		var list struct{ Items []grants.Collaboration }
		e.api.json(http.MethodGet, "/api/v1/collaborations?status=pending", nil, 200, &list)
		return list.Items
	}
	webtest.WaitFor(t, 20*time.Second, func() bool { return len(pending()) >= 2 }, "two questions")
	time.Sleep(time.Second)
	asked := pending()
	if len(asked) != 2 {
		t.Fatalf("questions waiting at once from one person's plans: %d, want 2", len(asked))
	}
	waiting := ""
	for id := range ids {
		if id != asked[0].ExecutionID && id != asked[1].ExecutionID {
			waiting = id
		}
	}
	var ex apiExec
	e.api.json(http.MethodGet, "/api/v1/executions/"+waiting, nil, 200, &ex)
	if ex.Status != "executing" || len(ex.Steps) != 1 || ex.Steps[0].Status != "pending" {
		t.Fatalf("the third plan: %s, its step %+v (want executing, pending)", ex.Status, ex.Steps)
	}
	e.answer(t, asked[0].ID, "yes")
	webtest.WaitFor(t, 30*time.Second, func() bool {
		for _, q := range pending() {
			if q.ExecutionID == waiting {
				return true
			}
		}
		return false
	}, "the third plan's question once the first was answered")
	waitExec(t, e.api, asked[0].ExecutionID, "success")
	// The steps still waiting end with their plans, so the server stops at once.
	for id := range ids {
		if id != asked[0].ExecutionID {
			e.api.json(http.MethodPost, "/api/v1/executions/"+id+"/cancel", nil, 200, nil)
			waitExec(t, e.api, id, "cancelled")
		}
	}
	webtest.WaitFor(t, 20*time.Second, func() bool { return len(pending()) == 0 }, "the cancelled plans' questions withdrawn")
}

// Steps waiting for an answer hold at most half of a server's workers, whoever asked:
// with two workers, bob's question waits (his step pending) while alice's is open, a
// plan of another step still runs, and bob's is asked once alice's is answered.
func TestBlockingStepsHoldHalfTheWorkers(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Builtin: true, Executions: &executions.Options{Workers: 2}})
	srv.App.Enable(t, "builtin__user_collaboration")
	srv.App.Enable(t, "builtin__think")
	env := func(name string) *collabEnv {
		srv.CreateUser(t, name, auth.RoleToolUser, collabPassword)
		e := &collabEnv{srv: srv, c: srv.Login(t, name, collabPassword)}
		e.api = svClient{t: t, srv: srv, c: e.c}
		return e
	}
	alice, bob := env("alice"), env("bob")
	var first, second apiExec
	alice.api.json(http.MethodPost, "/api/v1/executions", plan(step("builtin__user_collaboration", map[string]any{"prompt": "Alice's?"})), 201, &first)
	q := alice.pending(t)
	bob.api.json(http.MethodPost, "/api/v1/executions", plan(step("builtin__user_collaboration", map[string]any{"prompt": "Bob's?"})), 201, &second)

	// The other worker runs a plan of another step meanwhile.
	var next apiExec
	bob.api.json(http.MethodPost, "/api/v1/executions", plan(step("builtin__think", map[string]any{"thought": "meanwhile"})), 201, &next)
	waitExec(t, bob.api, next.ID, "success")
	var list struct{ Items []grants.Collaboration }
	bob.api.json(http.MethodGet, "/api/v1/collaborations?status=pending", nil, 200, &list)
	if len(list.Items) != 0 {
		t.Fatalf("bob's question asked while alice's holds half the workers: %+v", list.Items)
	}
	var ex apiExec
	bob.api.json(http.MethodGet, "/api/v1/executions/"+second.ID, nil, 200, &ex)
	if ex.Status != "executing" || len(ex.Steps) != 1 || ex.Steps[0].Status != "pending" {
		t.Fatalf("bob's plan: %s, its step %+v (want executing, pending)", ex.Status, ex.Steps)
	}

	alice.answer(t, q.ID, "yes")
	waitExec(t, alice.api, first.ID, "success")
	bq := bob.pending(t)
	if bq.ExecutionID != second.ID {
		t.Fatalf("bob's question: %+v, want his plan's", bq)
	}
	bob.api.json(http.MethodPost, "/api/v1/executions/"+second.ID+"/cancel", nil, 200, nil)
	waitExec(t, bob.api, second.ID, "cancelled")
}
