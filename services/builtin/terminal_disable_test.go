package builtin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/builtin"
	"github.com/toolwarden/toolwarden/services/router"
)

// callResult is what a router call that runs in the background answered.
type callResult struct {
	res *router.Result
	err error
}

// Disabling a person (PATCH /api/v1/users/:id) ends what they left running: their PTY
// session, their background command and the foreground command their call waits on
// end, each recorded and audited as ended by the system because the account was
// disabled. Another person's terminal keeps running.
func TestDisablingAUserEndsTheirTerminals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := lowTerminals(t)
	carol := srv.CreateUser(t, "carol", auth.RoleToolUser, "carol-password-1")
	callAs := func(ctx context.Context, who audit.Actor, role auth.Role, conv, args string) (*router.Result, error) {
		return srv.Router.Call(ctx, router.Call{Tool: terminalTool, Arguments: json.RawMessage(args), Actor: who, Role: role,
			Source: router.SourceAPI, ConversationID: conv})
	}
	asCarol := audit.Actor{Kind: audit.ActorUser, ID: carol.ID, Name: "carol"}
	session := func(conv, args string) string {
		t.Helper()
		res, err := callAs(ctx, asCarol, auth.RoleToolUser, conv, args)
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", args, err, res)
		}
		var out struct{ SessionID string }
		if err := json.Unmarshal(res.StructuredContent, &out); err != nil || out.SessionID == "" {
			t.Fatalf("%s answers %s", args, res.StructuredContent)
		}
		return out.SessionID
	}
	pty := session("conv-carol", `{"operation":"create_session"}`)
	bg := session("conv-carol", `{"operation":"run_command","command":"sleep 600","background":true,"timeout":3600}`)
	foreground := make(chan callResult, 1)
	go func() {
		res, err := callAs(ctx, asCarol, auth.RoleToolUser, "conv-carol-fg", `{"operation":"run_command","command":"echo waiting; sleep 600","timeout":3600}`)
		foreground <- callResult{res, err}
	}()
	ts := srv.App.Terminals
	var fg string
	webtest.WaitFor(t, 10*time.Second, func() bool {
		for _, term := range ts.List() {
			if term.ConversationID == "conv-carol-fg" {
				data, _, _ := term.Output(0)
				if strings.Contains(string(data), "waiting") {
					fg = term.ID
					return true
				}
			}
		}
		return false
	}, "the foreground command runs")
	admin := audit.Actor{Kind: audit.ActorUser, Name: "admin"}
	res, err := callAs(ctx, admin, auth.RoleAdmin, "conv-admin", `{"operation":"run_command","command":"sleep 600","background":true,"timeout":3600}`)
	if err != nil || res.IsError {
		t.Fatalf("the administrator's command: %v %+v", err, res)
	}
	var other struct{ SessionID string }
	_ = json.Unmarshal(res.StructuredContent, &other)

	api := webtest.API{T: t, Srv: srv, C: srv.Login(t, "admin", webtest.AdminPassword)}
	api.JSON(http.MethodPatch, "/api/v1/users/"+carol.ID, map[string]any{"disabled": true}, http.StatusOK, nil)

	ended := []string{pty, bg, fg}
	webtest.WaitFor(t, 20*time.Second, func() bool {
		for _, id := range ended {
			if term := ts.Get(id); term != nil && !term.Exited() {
				return false
			}
		}
		return true
	}, "carol's terminals end")
	select {
	case r := <-foreground:
		if r.err != nil || !strings.Contains(router.TextOf(r.res.Content), "waiting") {
			t.Fatalf("the foreground call's result: %v %+v", r.err, r.res)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the foreground call still waits after carol was disabled")
	}
	webtest.WaitFor(t, 20*time.Second, func() bool {
		return srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'terminal.end' AND actor_kind = 'system'
			AND target_type = 'terminal' AND target_id = ANY($1) AND payload->>'reason' = 'the owner''s account was disabled'
			AND payload->>'owner_id' = $2`, ended, carol.ID) == len(ended)
	}, "each end audited as the system's, because the account was disabled")
	if n := srv.App.Count(t, `SELECT count(*) FROM terminals WHERE id = ANY($1) AND ended_reason = 'owner_disabled'`, ended); n != len(ended) {
		t.Fatalf("%d of %d terminals recorded as ended for the disabled owner", n, len(ended))
	}
	if term := ts.Get(other.SessionID); term == nil || term.Exited() {
		t.Fatalf("the administrator's command ended with carol's: %v", term)
	}
	if n := srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'terminal.end' AND target_id = $1`, other.SessionID); n != 0 {
		t.Fatalf("the administrator's command audited as ended: %d", n)
	}
}

// Disabling a person cancels the questions waiting for their answer (audited as the
// system's): the agent's call blocked in user_collaboration returns, and the question
// cannot be answered once the account is enabled again.
func TestDisablingAUserCancelsTheirQuestions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	srv.App.Enable(t, "builtin__user_collaboration")
	dave := srv.CreateUser(t, "dave", auth.RoleToolUser, "dave-password-12")
	token := webtest.API{T: t, Srv: srv, Bearer: srv.Token(t, "dave")}
	done := make(chan callResult, 1)
	go func() {
		res, err := srv.Router.Call(ctx, router.Call{Tool: "builtin__user_collaboration", Arguments: json.RawMessage(`{"prompt":"May I deploy?"}`),
			Actor: audit.Actor{Kind: audit.ActorUser, ID: dave.ID, Name: "dave"}, Role: auth.RoleToolUser,
			Source: router.SourceAPI, ConversationID: "conv-dave"})
		done <- callResult{res, err}
	}()
	q := waitPending(t, token)

	admin := webtest.API{T: t, Srv: srv, C: srv.Login(t, "admin", webtest.AdminPassword)}
	admin.JSON(http.MethodPatch, "/api/v1/users/"+dave.ID, map[string]any{"disabled": true}, http.StatusOK, nil)
	select {
	case r := <-done:
		if r.err != nil || !r.res.IsError || !strings.Contains(string(r.res.StructuredContent), `"status":"cancelled"`) {
			t.Fatalf("the blocked call's result: %v %+v", r.err, r.res)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the call blocked in user_collaboration still waits after dave was disabled")
	}
	if n := srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'collaboration.cancel' AND actor_kind = 'system'
		AND target_id = $1 AND payload->>'reason' = 'the person asked was disabled'`, q.ID); n != 1 {
		t.Fatalf("the cancellation audited %d times as the system's, want once", n)
	}

	admin.JSON(http.MethodPatch, "/api/v1/users/"+dave.ID, map[string]any{"disabled": false}, http.StatusOK, nil)
	session := webtest.API{T: t, Srv: srv, C: srv.Login(t, "dave", "dave-password-12")}
	session.Error(http.MethodPost, "/api/v1/collaborations/"+q.ID+"/respond", map[string]string{"response": "yes"}, http.StatusConflict, "not_pending")
}

// A disabled person's terminals are refused on every start (one under way as they were
// disabled included: Terminals.EndOwnedBy), and allowed again once the account is
// enabled again.
func TestDisabledUserTerminalsAllowedOnceEnabled(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	erin := srv.CreateUser(t, "erin", auth.RoleToolUser, "erin-password-12")
	ws, err := srv.App.Builtin.Workspace("conv-erin")
	if err != nil {
		t.Fatal(err)
	}
	who := builtin.TerminalCaller{UserID: erin.ID, UserName: "erin"}
	start := func() error {
		term, err := srv.App.Terminals.Start(who, "conv-erin", ws, "true", time.Minute, 0)
		if err == nil {
			<-term.Done()
		}
		return err
	}
	if err := start(); err != nil {
		t.Fatal(err)
	}
	admin := webtest.API{T: t, Srv: srv, C: srv.Login(t, "admin", webtest.AdminPassword)}
	admin.JSON(http.MethodPatch, "/api/v1/users/"+erin.ID, map[string]any{"disabled": true}, http.StatusOK, nil)
	webtest.WaitFor(t, 10*time.Second, func() bool { return start() != nil }, "erin's terminals refused")
	admin.JSON(http.MethodPatch, "/api/v1/users/"+erin.ID, map[string]any{"disabled": false}, http.StatusOK, nil)
	webtest.WaitFor(t, 10*time.Second, func() bool { return start() == nil }, "erin's terminals allowed again")
}
