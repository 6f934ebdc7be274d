package builtin_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/builtin"
	"github.com/toolwarden/toolwarden/services/grants"
	"github.com/toolwarden/toolwarden/services/router"
)

type collabItem struct {
	ID                 string `json:"id"`
	Prompt             string `json:"prompt"`
	ConversationID     string `json:"conversation_id"`
	AuthorizeOperation string `json:"authorize_operation"`
	Status             string `json:"status"`
}

// waitPending waits for one question to be pending for the API's caller.
func waitPending(t *testing.T, api webtest.API) collabItem {
	t.Helper()
	var list struct{ Items []collabItem }
	webtest.WaitFor(t, 10*time.Second, func() bool {
		api.JSON(http.MethodGet, "/api/v1/collaborations?status=pending", nil, http.StatusOK, &list)
		return len(list.Items) == 1
	}, "a pending question")
	return list.Items[0]
}

// user_collaboration blocks the router call until the person answers with their
// browser session; an API token cannot answer (403). With authorize_operation, the
// approving answer makes a grant the next Allow passes; a one-time grant's second use
// is refused and audited. Another person cannot answer; a rejection declines.
func TestUserCollaboration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	srv.App.Enable(t, "builtin__user_collaboration")
	alice := srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	srv.CreateUser(t, "bob", auth.RoleToolUser, "bob-password-12")
	session := webtest.API{T: t, Srv: srv, C: srv.Login(t, "alice", "alice-password-1")}
	token := webtest.API{T: t, Srv: srv, Bearer: srv.Token(t, "alice")}
	bob := webtest.API{T: t, Srv: srv, C: srv.Login(t, "bob", "bob-password-12")}

	call := func(ctx context.Context, args string) chan *router.Result {
		out := make(chan *router.Result, 1)
		go func() {
			res, err := srv.Router.Call(ctx, router.Call{Tool: "builtin__user_collaboration", Arguments: json.RawMessage(args),
				Actor: audit.Actor{Kind: audit.ActorUser, ID: alice.ID, Name: "alice"}, Role: auth.RoleToolUser,
				Source: router.SourceAPI, ConversationID: "conv-1"})
			if err != nil && ctx.Err() == nil {
				t.Error(err)
			}
			out <- res
		}()
		return out
	}

	done := call(ctx, `{"prompt":"May I create /etc/app.conf?","authorize_operation":"file_operations.create_file","target":"/etc/app.conf","one_time_use":true}`)
	q := waitPending(t, token) // a token may list
	if q.Prompt != "May I create /etc/app.conf?" || q.ConversationID != "conv-1" || q.AuthorizeOperation != "file_operations.create_file" {
		t.Fatalf("question: %+v", q)
	}
	select {
	case res := <-done:
		t.Fatalf("the call did not wait: %+v", res)
	case <-time.After(200 * time.Millisecond):
	}
	if status, body := token.Do(http.MethodPost, "/api/v1/collaborations/"+q.ID+"/respond", map[string]string{"response": "yes"}); status != http.StatusForbidden {
		t.Fatalf("a token answers: %d %s", status, body)
	}
	bob.Error(http.MethodPost, "/api/v1/collaborations/"+q.ID+"/respond", map[string]string{"response": "yes"}, http.StatusNotFound, "not_found")
	var answered struct {
		Status  string  `json:"status"`
		GrantID *string `json:"grant_id"`
	}
	session.JSON(http.MethodPost, "/api/v1/collaborations/"+q.ID+"/respond", map[string]string{"response": "Yes, proceed"}, http.StatusOK, &answered)
	if answered.Status != "answered" || answered.GrantID == nil {
		t.Fatalf("answered: %+v", answered)
	}
	var res *router.Result
	select {
	case res = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the call still waits after the answer")
	}
	if res.IsError || !strings.Contains(router.TextOf(res.Content), "User response: Yes, proceed") {
		t.Fatalf("result: %+v", res)
	}
	session.Error(http.MethodPost, "/api/v1/collaborations/"+q.ID+"/respond", map[string]string{"response": "no"}, http.StatusConflict, "not_pending")

	g := srv.App.Grants
	if ok, err := g.Allow(ctx, "conv-1", "create_file", "/etc/app.conf"); err != nil || !ok {
		t.Fatalf("the grant: %v %v", ok, err)
	}
	if ok, err := g.Allow(ctx, "conv-1", "create_file", "/etc/app.conf"); err != nil || ok {
		t.Fatalf("the one-time grant's second use: %v %v", ok, err)
	}
	var denied int
	if err := srv.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action = 'grant.reuse' AND result = 'denied'`).Scan(&denied); err != nil || denied != 1 {
		t.Fatalf("grant.reuse audited: %d %v", denied, err)
	}

	// A rejection declines; no grant.
	done = call(ctx, `{"prompt":"Delete it?","authorize_operation":"file_operations.delete_file"}`)
	q = waitPending(t, session)
	answered.GrantID = nil
	session.JSON(http.MethodPost, "/api/v1/collaborations/"+q.ID+"/respond", map[string]string{"response": "no, stop"}, http.StatusOK, &answered)
	res = <-done
	if answered.Status != "declined" || answered.GrantID != nil || !strings.Contains(router.TextOf(res.Content), "declined") {
		t.Fatalf("declined: %+v %+v", answered, res)
	}

	// The caller gives up: cancelled.
	cctx, cancel := context.WithCancel(ctx)
	done = call(cctx, `{"prompt":"Still there?"}`)
	q = waitPending(t, session)
	cancel()
	<-done
	var list struct{ Items []collabItem }
	webtest.WaitFor(t, 10*time.Second, func() bool {
		session.JSON(http.MethodGet, "/api/v1/collaborations?status=cancelled", nil, http.StatusOK, &list)
		return len(list.Items) == 1 && list.Items[0].ID == q.ID
	}, "the question cancelled")
}

// The grant an approving answer makes lasts 300 s on the app's clock: allowed at 299 s,
// refused at 301 s.
func TestAnsweredGrantExpires(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var mu sync.Mutex
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	srv := webtest.Start(t, &webtest.Options{Builtin: true, Grants: &grants.Options{Now: clock}})
	srv.App.Enable(t, "builtin__user_collaboration")
	alice := srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	session := webtest.API{T: t, Srv: srv, C: srv.Login(t, "alice", "alice-password-1")}
	done := make(chan error, 1)
	go func() {
		_, err := srv.Router.Call(ctx, router.Call{Tool: "builtin__user_collaboration",
			Arguments: json.RawMessage(`{"prompt":"May I?","authorize_operation":"builtin__terminal_operations.run_command"}`),
			Actor:     audit.Actor{Kind: audit.ActorUser, ID: alice.ID, Name: "alice"}, Role: auth.RoleToolUser,
			Source: router.SourceAPI, ConversationID: "conv-2"})
		done <- err
	}()
	q := waitPending(t, session)
	session.JSON(http.MethodPost, "/api/v1/collaborations/"+q.ID+"/respond", map[string]string{"response": "ok"}, http.StatusOK, nil)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	advance(299 * time.Second)
	if ok, err := srv.App.Grants.Allow(ctx, "conv-2", "run_command", "ls"); err != nil || !ok {
		t.Fatalf("at 299 s: %v %v", ok, err)
	}
	if ok, _ := srv.App.Grants.Allow(ctx, "conv-2", "terminal_operations.run_command", "ls"); !ok {
		t.Fatal("a multi-use grant allowed only once")
	}
	if ok, _ := srv.App.Grants.Allow(ctx, "conv-1", "run_command", "ls"); ok {
		t.Fatal("another conversation was allowed")
	}
	advance(2 * time.Second)
	if ok, err := srv.App.Grants.Allow(ctx, "conv-2", "run_command", "ls"); err != nil || ok {
		t.Fatalf("at 301 s: %v %v", ok, err)
	}
}

// The tool tells the model how long a question waits: as long as grants keeps it.
func TestUserCollaborationSaysHowLongItWaits(t *testing.T) {
	t.Parallel()
	d := builtin.UserCollaboration(nil).Description
	if grants.Unanswered != 24*time.Hour || !strings.Contains(d, "up to a day") {
		t.Fatalf("questions wait %s; the tool says %q", grants.Unanswered, d)
	}
}

// A question whose session to the built-in server ends (a failed health check, a
// person's Reconnect) is cancelled, and the call ends with the error: it is not asked
// again behind the person's back.
func TestUserCollaborationNotAskedTwice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	target := srv.App.Enable(t, "builtin__user_collaboration")
	alice := srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	session := webtest.API{T: t, Srv: srv, C: srv.Login(t, "alice", "alice-password-1")}
	done := make(chan error, 1)
	go func() {
		_, err := srv.Router.Call(ctx, router.Call{Tool: "builtin__user_collaboration", Arguments: json.RawMessage(`{"prompt":"Still there?"}`),
			Actor: audit.Actor{Kind: audit.ActorUser, ID: alice.ID, Name: "alice"}, Role: auth.RoleToolUser,
			Source: router.SourceAPI, ConversationID: "conv-1"})
		done <- err
	}()
	q := waitPending(t, session)
	if err := srv.MCP.Reconnect(ctx, target.ServerID); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		var re *router.Error
		if !errors.As(err, &re) || re.Code != router.CodeUpstream {
			t.Fatalf("the call ended with %v, not the session's end", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call still waits: the question was asked again")
	}
	var list struct{ Items []collabItem }
	session.JSON(http.MethodGet, "/api/v1/collaborations", nil, http.StatusOK, &list)
	if len(list.Items) != 1 || list.Items[0].ID != q.ID || list.Items[0].Status != "cancelled" {
		t.Fatalf("questions: %+v", list.Items)
	}
}
