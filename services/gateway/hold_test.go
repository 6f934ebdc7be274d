package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/gateway"
)

// holdEnv is a server with an untrusted server "ut" (its echo is MEDIUM) and a trusted
// "mt" (its write-note is HIGH), a tool user tina who calls, and the admin who decides.
type holdEnv struct {
	srv   *webtest.Server
	tina  auth.User
	token string
	admin executions.Caller
	// asTina is tina as a caller of the executions service (a plan of a page or the API).
	asTina executions.Caller
}

func newHoldEnv(t *testing.T, opts *gateway.Options) *holdEnv {
	t.Helper()
	srv := webtest.Start(t, &webtest.Options{Gateway: opts})
	srv.LiveServer(t, "mt", true, "echo", "write-note")
	srv.LiveServer(t, "ut", false, "echo")
	tina := srv.CreateUser(t, "tina", auth.RoleToolUser, password)
	var adminID string
	if err := srv.Pool.QueryRow(context.Background(), `SELECT id FROM users WHERE username = 'admin'`).Scan(&adminID); err != nil {
		t.Fatal(err)
	}
	return &holdEnv{srv: srv, tina: tina, token: srv.Token(t, "tina"),
		admin:  executions.Caller{Actor: audit.Actor{Kind: audit.ActorUser, ID: adminID, Name: "admin"}, Role: auth.RoleAdmin},
		asTina: executions.Caller{Actor: audit.Actor{Kind: audit.ActorUser, ID: tina.ID, Name: "tina"}, Role: auth.RoleToolUser}}
}

// client connects as tina at era, collecting progress messages.
func (e *holdEnv) client(t *testing.T, era string) (*mcp.ClientSession, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var progress []string
	c := mcp.NewClient(&mcp.Implementation{Name: "hold-test", Version: "2.1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, r.Params.Message)
			mu.Unlock()
		}})
	tr := &mcp.StreamableClientTransport{Endpoint: e.srv.URL + "/mcp", HTTPClient: &http.Client{Transport: bearer{e.token}}}
	cs, err := c.Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: era})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(progress)
	}
}

type callOutcome struct {
	res *mcp.CallToolResult
	err error
}

// call starts a tools/call and returns where its outcome arrives.
func call(ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any, progress string) <-chan callOutcome {
	return callIn(ctx, cs, name, args, progress, "")
}

// callIn is call in the agent conversation conv (its _meta.conversation_id), unless "".
func callIn(ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any, progress, conv string) <-chan callOutcome {
	out := make(chan callOutcome, 1)
	p := &mcp.CallToolParams{Name: name, Arguments: args}
	if conv != "" {
		p.Meta = mcp.Meta{"conversation_id": conv}
	}
	if progress != "" {
		p.SetProgressToken(progress)
	}
	go func() {
		res, err := cs.CallTool(ctx, p)
		out <- callOutcome{res, err}
	}()
	return out
}

func wait(t *testing.T, ch <-chan callOutcome) *mcp.CallToolResult {
	t.Helper()
	select {
	case o := <-ch:
		if o.err != nil {
			t.Fatalf("call: %v", o.err)
		}
		return o.res
	case <-time.After(30 * time.Second):
		t.Fatal("the call did not come back")
	}
	return nil
}

// pending waits for tina's execution of tool awaiting approval.
func (e *holdEnv) pending(t *testing.T, tool string) *executions.Execution {
	t.Helper()
	return e.awaitingOf(t, e.tina.ID, tool)
}

// A MEDIUM call waits in the request until a person confirms it, and returns the real
// result; a HIGH call rejected in the browser's place returns the reviewer's reason.
// The execution says it came from an MCP client, named. In both protocol eras.
func TestApprovalInsideTheCall(t *testing.T) {
	t.Parallel()
	e := newHoldEnv(t, nil)
	ctx := context.Background()
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			cs, progress := e.client(t, era)
			// A conversation id the execution cannot keep is refused before anyone is asked.
			if res := wait(t, callIn(ctx, cs, "ut__echo", map[string]any{"message": "x"}, "", strings.Repeat("c", 201))); !res.IsError ||
				!strings.Contains(text(res), "_meta.conversation_id: is longer than 200 characters") {
				t.Fatalf("a 201-character conversation id: got %+v %q", res, text(res))
			}
			// The step runs in the call's conversation (the built-in tools' workspace and
			// grants are the conversation's).
			out := callIn(ctx, cs, "ut__echo", map[string]any{"message": "held " + era}, "p-"+era, "conv-"+era)
			ex := e.pending(t, "ut__echo")
			if ex.Source != executions.SourceMCP || ex.Client != "hold-test 2.1" || ex.Risk != "medium" || ex.RequesterName != "tina" ||
				ex.ConversationID != "conv-"+era {
				t.Fatalf("the execution: source %q client %q risk %q requester %q conversation %q", ex.Source, ex.Client, ex.Risk,
					ex.RequesterName, ex.ConversationID)
			}
			webtest.WaitFor(t, 10*time.Second, func() bool { return len(progress()) > 0 }, "no progress while waiting")
			if msg := progress()[0]; !strings.Contains(msg, "Waiting for a person to approve") {
				t.Fatalf("progress while waiting: %q", msg)
			}
			select {
			case o := <-out:
				t.Fatalf("the call answered before anyone decided: %+v %v", o.res, o.err)
			default:
			}
			if _, err := e.srv.Executions.Confirm(ctx, e.admin, ex.ID, "", ""); err != nil {
				t.Fatal(err)
			}
			res := wait(t, out)
			if res.IsError || text(res) != "Echo: held "+era {
				t.Fatalf("the approved call: got %+v %q, want the real result", res, text(res))
			}

			out = call(ctx, cs, "mt__write-note", map[string]any{"text": "friday"}, "")
			ex = e.pending(t, "mt__write-note")
			if ex.Risk != "high" {
				t.Fatalf("write-note's risk: %s", ex.Risk)
			}
			if _, err := e.srv.Executions.Reject(ctx, e.admin, ex.ID, "not on a friday"); err != nil {
				t.Fatal(err)
			}
			res = wait(t, out)
			if !res.IsError || text(res) != "Rejected by admin: not on a friday" {
				t.Fatalf("the rejected call: got %+v %q", res, text(res))
			}

			// Nobody decides before its approval time runs out.
			out = call(ctx, cs, "ut__echo", map[string]any{"message": "too late"}, "")
			ex = e.pending(t, "ut__echo")
			if _, err := e.srv.Pool.Exec(ctx, `UPDATE executions SET expires_at = now() - interval '1 second' WHERE id = $1`, ex.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := e.srv.Executions.ExpireDue(ctx); err != nil {
				t.Fatal(err)
			}
			if res := wait(t, out); !res.IsError || !strings.Contains(text(res), "Not run: nobody approved") {
				t.Fatalf("the expired call: got %+v %q", res, text(res))
			}
		})
	}
}

// A caller whose role may not ask for approval (an auditor a rule lets use one tool) is
// told the call needs approval; no execution is made for the approvers to decide on.
func TestNoHeldCallWithoutExecutionCreate(t *testing.T) {
	t.Parallel()
	e := newHoldEnv(t, nil)
	ctx := context.Background()
	audra := e.srv.CreateUser(t, "audra", auth.RoleAuditor, password)
	target, err := e.srv.Tools.Target(ctx, "ut__echo")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.srv.Tools.SetPermission(ctx, e.admin.Actor, target.ID, "audra", new(true)); err != nil {
		t.Fatal(err)
	}
	token := e.srv.Token(t, "audra")
	for _, era := range eras {
		cs := mustConnect(t, e.srv, token, era)
		res := wait(t, call(ctx, cs, "ut__echo", map[string]any{"message": "held?"}, ""))
		if !res.IsError || !strings.Contains(strings.ToLower(text(res)), "approval") {
			t.Fatalf("%s: got %+v %q, want a result saying the call needs approval", era, res, text(res))
		}
	}
	if n := e.srv.App.Count(t, `SELECT count(*) FROM executions WHERE requested_by = $1`, audra.ID); n != 0 {
		t.Errorf("%d executions asked for by the auditor, want none", n)
	}
}

// When nobody decides before the hold ends, the call answers that it waits, naming the
// execution; toolwarden__await_execution waits again and returns the real result.
// toolwarden__list_pending lists the caller's waiting calls. Another user cannot await
// someone else's execution, nor learn that it exists.
func TestPendingAndAwait(t *testing.T) {
	t.Parallel()
	e := newHoldEnv(t, &gateway.Options{Hold: 1500 * time.Millisecond, MaxWaiting: 2})
	ctx := context.Background()
	e.srv.CreateUser(t, "otto", auth.RoleToolUser, password)
	otto := mustConnect(t, e.srv, e.srv.Token(t, "otto"), eras[0])

	// An agent in a loop cannot bury the approvers: past MaxWaiting calls of its user
	// waiting, the next is refused and creates nothing.
	for i := range 3 {
		p := &mcp.CallToolParams{Name: "ut__echo", Arguments: map[string]any{"message": "loop"}, Meta: mcp.Meta{gateway.HoldMeta: 0.1}}
		res, err := otto.CallTool(ctx, p)
		if err != nil || !res.IsError {
			t.Fatalf("otto's call %d: %v %+v", i, err, res)
		}
		if refused := strings.Contains(text(res), "2 of your calls already wait"); refused != (i == 2) {
			t.Fatalf("otto's call %d: %q", i, text(res))
		}
	}
	if n := e.srv.App.Count(t, `SELECT count(*) FROM executions WHERE requester_name = 'otto'`); n != 2 {
		t.Fatalf("otto's executions: %d, want 2", n)
	}
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			cs, _ := e.client(t, era)
			res := wait(t, call(ctx, cs, "ut__echo", map[string]any{"message": "later " + era}, ""))
			var p gateway.Pending
			if b, _ := json.Marshal(res.StructuredContent); !res.IsError || json.Unmarshal(b, &p) != nil ||
				p.Status != "awaiting_approval" || p.ExecutionID == "" || !strings.HasPrefix(p.ApproveURL, e.srv.URL+"/executions/") {
				t.Fatalf("an undecided call: got %+v %s", res, b)
			}
			if !strings.Contains(text(res), gateway.AwaitTool) || !strings.Contains(text(res), p.ExecutionID) {
				t.Fatalf("the pending text does not say how to wait on: %q", text(res))
			}

			listed := wait(t, call(ctx, cs, gateway.PendingTool, nil, ""))
			if listed.IsError || !strings.Contains(text(listed), p.ExecutionID) {
				t.Fatalf("list_pending: %+v %q", listed, text(listed))
			}
			theirs := wait(t, call(ctx, otto, gateway.PendingTool, nil, ""))
			if strings.Contains(text(theirs), p.ExecutionID) {
				t.Fatal("another user's list_pending shows tina's execution")
			}
			stranger := wait(t, call(ctx, otto, gateway.AwaitTool, map[string]any{"execution_id": p.ExecutionID}, ""))
			unknown := wait(t, call(ctx, otto, gateway.AwaitTool, map[string]any{"execution_id": "6f1b1f0e-0000-4000-8000-000000000000"}, ""))
			if !stranger.IsError || strings.ReplaceAll(text(stranger), p.ExecutionID, "X") !=
				strings.ReplaceAll(text(unknown), "6f1b1f0e-0000-4000-8000-000000000000", "X") {
				t.Fatalf("another user awaiting tina's execution: got %q, want what an unknown id gets (%q)", text(stranger), text(unknown))
			}

			// Waiting again, past one more hold, then approved.
			again := wait(t, call(ctx, cs, gateway.AwaitTool, map[string]any{"execution_id": p.ExecutionID}, ""))
			if !again.IsError || !strings.Contains(text(again), "Waiting for approval") {
				t.Fatalf("await before a decision: %+v %q", again, text(again))
			}
			out := call(ctx, cs, gateway.AwaitTool, map[string]any{"execution_id": p.ExecutionID}, "")
			time.Sleep(200 * time.Millisecond)
			if _, err := e.srv.Executions.Confirm(ctx, e.admin, p.ExecutionID, "", ""); err != nil {
				t.Fatal(err)
			}
			if res := wait(t, out); res.IsError || text(res) != "Echo: later "+era {
				t.Fatalf("await after the approval: got %+v %q", res, text(res))
			}
			// Awaiting a decided execution answers at once, again.
			if res := wait(t, call(ctx, cs, gateway.AwaitTool, map[string]any{"execution_id": p.ExecutionID}, "")); text(res) != "Echo: later "+era {
				t.Fatalf("await after the run: %q", text(res))
			}
		})
	}
}

// A client that gives up on a held call cancels its execution, as long as nobody
// decided on it: audited as cancelled by the client.
func TestClientCancellationCancels(t *testing.T) {
	t.Parallel()
	e := newHoldEnv(t, nil)
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			cs, _ := e.client(t, era)
			ctx, cancel := context.WithCancel(context.Background())
			out := call(ctx, cs, "ut__echo", map[string]any{"message": "never " + era}, "")
			ex := e.pending(t, "ut__echo")
			cancel()
			<-out
			webtest.WaitFor(t, 10*time.Second, func() bool {
				cur, err := e.srv.Executions.Get(context.Background(), ex.ID)
				return err == nil && cur.Status == executions.Cancelled && cur.Reason == "cancelled by the client" && cur.DecidedBy == "tina"
			}, "the abandoned execution was not cancelled by the client")
			if n := e.srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'execution.cancel' AND target_id = $1
				AND actor_id = $2`, ex.ID, e.tina.ID); n != 1 {
				t.Fatalf("audit rows of the cancellation: %d", n)
			}
		})
	}
}

// Connected clients hear notifications/tools/list_changed when their tools change,
// and tools/list pages through a long list in a stable order.
func TestListChangedAndPages(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Gateway: &gateway.Options{PageSize: 2}})
	srv.LiveServer(t, "mt", true, "echo", "add")
	token := srv.Token(t, "admin")
	changed := make(chan struct{}, 10)
	c := mcp.NewClient(&mcp.Implementation{Name: "list-test", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} }})
	tr := &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: &http.Client{Transport: bearer{token}}}
	cs, err := c.Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: eras[0]})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	// A 2026-07-28 client hears it on the subscriptions/listen request its SDK opens.
	changed26 := make(chan struct{}, 10)
	c26 := mcp.NewClient(&mcp.Implementation{Name: "list-test", Version: "2026"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed26 <- struct{}{} }})
	cs26, err := c26.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{token}}}, &mcp.ClientSessionOptions{ProtocolVersion: eras[1]})
	if err != nil {
		t.Fatal(err)
	}
	defer cs26.Close()
	if !cs.InitializeResult().Capabilities.Tools.ListChanged {
		t.Fatal("the gateway does not declare tools.listChanged")
	}
	var all []string
	pages := 0
	for tl, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, tl.Name)
	}
	var cursor string
	for {
		res, err := cs.ListTools(context.Background(), &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(res.Tools) > 2 {
			t.Fatalf("a page of %d tools; the page size is 2", len(res.Tools))
		}
		if cursor = res.NextCursor; cursor == "" {
			break
		}
	}
	if want := []string{"mt__add", "mt__echo", gateway.AwaitTool, gateway.PendingTool}; !slices.Equal(all, want) || pages != 2 {
		t.Fatalf("paged list: %v in %d pages, want %v in 2", all, pages, want)
	}
	if _, err := cs.ListTools(context.Background(), &mcp.ListToolsParams{Cursor: "!!"}); err == nil {
		t.Fatal("a bad cursor was accepted")
	}

	srv.App.Enable(t, "mt__sleep")
	for era, ch := range map[string]chan struct{}{eras[0]: changed, eras[1]: changed26} {
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no list_changed after a tool was enabled", era)
		}
	}
	var after []string
	for tl, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		after = append(after, tl.Name)
	}
	if !slices.Contains(after, "mt__sleep") {
		t.Fatalf("after the change the list is %v", after)
	}
}

// elicitingClient connects as tina at era, declaring URL-mode elicitation: each URL it
// is asked to open goes to urls, and each completed elicitation to complete.
func (e *holdEnv) elicitingClient(t *testing.T, era string, mrtr bool) (cs *mcp.ClientSession, urls, complete chan string) {
	t.Helper()
	urls, complete = make(chan string, 10), make(chan string, 10)
	opts := &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			urls <- r.Params.URL
			return &mcp.ElicitResult{Action: "accept"}, nil
		},
		ElicitationCompleteHandler: func(_ context.Context, r *mcp.ElicitationCompleteNotificationRequest) {
			complete <- r.Params.ElicitationID
		},
	}
	if !mrtr {
		opts.MultiRoundTrip = &mcp.MultiRoundTripOptions{Disabled: true}
	}
	tr := &mcp.StreamableClientTransport{Endpoint: e.srv.URL + "/mcp", HTTPClient: &http.Client{Transport: bearer{e.token}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "elicit-test", Version: "1"}, opts).Connect(context.Background(), tr,
		&mcp.ClientSessionOptions{ProtocolVersion: era})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs, urls, complete
}

func recv(t *testing.T, what string, ch <-chan string) string {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(15 * time.Second):
		t.Fatalf("no %s", what)
	}
	return ""
}

// A stateful client that can open URLs is sent the approval page while its call is
// held, and told when the elicitation is complete; the call returns the result.
func TestURLElicitationWhileHeld(t *testing.T) {
	t.Parallel()
	e := newHoldEnv(t, nil)
	ctx := context.Background()
	cs, urls, complete := e.elicitingClient(t, eras[0], true)
	out := call(ctx, cs, "ut__echo", map[string]any{"message": "opened"}, "")
	ex := e.pending(t, "ut__echo")
	if u := recv(t, "URL elicitation", urls); u != e.srv.URL+"/executions/"+ex.ID {
		t.Fatalf("the elicitation's URL is %q, want the execution's page", u)
	}
	if _, err := e.srv.Executions.Confirm(ctx, e.admin, ex.ID, "", ""); err != nil {
		t.Fatal(err)
	}
	if res := wait(t, out); res.IsError || text(res) != "Echo: opened" {
		t.Fatalf("the approved call: %+v %q", res, text(res))
	}
	if id := recv(t, "elicitation/complete", complete); id != ex.ID {
		t.Fatalf("elicitation/complete for %q, want %q", id, ex.ID)
	}
}

// A 2026-07-28 client that can open URLs gets input_required at once: the approval
// page and a signed requestState. The SDK's own retry loop opens the page and calls
// again; the retry is held and returns the result. A requestState works once, for
// its user and its call only; used again, it answers as a wait on its execution.
func TestInputRequiredRetry(t *testing.T) {
	t.Parallel()
	e := newHoldEnv(t, nil)
	ctx := context.Background()

	// The SDK's automatic loop.
	cs, urls, _ := e.elicitingClient(t, eras[1], true)
	out := call(ctx, cs, "ut__echo", map[string]any{"message": "retried"}, "")
	u := recv(t, "URL elicitation", urls)
	id := u[strings.LastIndex(u, "/")+1:]
	if !strings.HasPrefix(u, e.srv.URL+"/executions/") {
		t.Fatalf("the elicitation's URL is %q", u)
	}
	if _, err := e.srv.Executions.Confirm(ctx, e.admin, id, "", ""); err != nil {
		t.Fatal(err)
	}
	if res := wait(t, out); res.IsError || text(res) != "Echo: retried" {
		t.Fatalf("the retried call: %+v %q", res, text(res))
	}

	// By hand: the state is bound and single-use.
	manual, _, _ := e.elicitingClient(t, eras[1], false)
	args := map[string]any{"message": "by hand"}
	res, err := manual.CallTool(ctx, &mcp.CallToolParams{Name: "ut__echo", Arguments: args})
	if err != nil || !res.NeedsInput() || res.RequestState == "" || res.InputRequests[approvalID] == nil {
		t.Fatalf("first call: %v %+v", err, res)
	}
	state := res.RequestState
	ep, _ := res.InputRequests[approvalID].(*mcp.ElicitParams)
	if ep == nil || ep.Mode != "url" || strings.Contains(ep.URL, e.token) {
		t.Fatalf("the input request: %+v", res.InputRequests[approvalID])
	}
	id = ep.URL[strings.LastIndex(ep.URL, "/")+1:]
	refused := func(label string, cs *mcp.ClientSession, p *mcp.CallToolParams) {
		t.Helper()
		r, err := cs.CallTool(ctx, p)
		if err != nil || !r.IsError || !strings.Contains(text(r), "requestState") {
			t.Fatalf("%s: got %v %+v %q, want the state refused", label, err, r, text(r))
		}
	}
	refused("other arguments", manual, &mcp.CallToolParams{Name: "ut__echo", Arguments: map[string]any{"message": "else"}, RequestState: state})
	refused("a forged state", manual, &mcp.CallToolParams{Name: "ut__echo", Arguments: args, RequestState: state[:len(state)-2] + "AA"})
	e.srv.CreateUser(t, "otto", auth.RoleToolUser, password)
	otto := mustConnect(t, e.srv, e.srv.Token(t, "otto"), eras[1])
	refused("another user", otto, &mcp.CallToolParams{Name: "ut__echo", Arguments: args, RequestState: state})
	if _, err := e.srv.Executions.Confirm(ctx, e.admin, id, "", ""); err != nil {
		t.Fatal(err)
	}
	r, err := manual.CallTool(ctx, &mcp.CallToolParams{Name: "ut__echo", Arguments: args, RequestState: state,
		InputResponses: mcp.InputResponseMap{approvalID: &mcp.ElicitResult{Action: "accept"}}})
	if err != nil || r.IsError || text(r) != "Echo: by hand" {
		t.Fatalf("the retry: %v %+v %q", err, r, text(r))
	}
	// Used already, the state is not honoured again but answers as a wait on its
	// execution would: the call's result, not an invitation to call again.
	r, err = manual.CallTool(ctx, &mcp.CallToolParams{Name: "ut__echo", Arguments: args, RequestState: state})
	if err != nil || r.IsError || text(r) != "Echo: by hand" {
		t.Fatalf("the same state again: %v %+v %q, want the execution's result", err, r, text(r))
	}
}

const approvalID = "approval"

// A gateway without keys hands out no requestState and cannot check one: a call that
// comes with one anyway is held like any other (Options.Keys), not failed.
func TestRequestStateWithoutKeys(t *testing.T) {
	t.Parallel()
	e := newHoldEnv(t, nil)
	g := gateway.New(e.srv.Router, e.srv.Auth, &gateway.Options{Executions: e.srv.Executions, Bus: e.srv.Bus,
		Hold: 300 * time.Millisecond})
	hs := httptest.NewServer(g)
	t.Cleanup(func() { g.Close(); hs.Close() })
	tr := &mcp.StreamableClientTransport{Endpoint: hs.URL, HTTPClient: &http.Client{Transport: bearer{e.token}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "keyless-test", Version: "1"}, nil).Connect(context.Background(), tr,
		&mcp.ClientSessionOptions{ProtocolVersion: eras[1]})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "ut__echo", Arguments: map[string]any{"message": "keyless"},
		RequestState: "e30.AAAA"})
	if err != nil || !res.IsError || !strings.Contains(text(res), "Waiting for approval") {
		t.Fatalf("a call with a requestState to a keyless gateway: %v %+v, want it held and then pending", err, res)
	}
	e.pending(t, "ut__echo")
}

// A held call cancelled while its step runs gets that step's result when it finishes,
// said to be cancelled late (the tool did run), not "the call did not run". A plan made
// through the API is not a call to wait for: list_pending leaves it out and
// await_execution sends the agent to its page, so giving up cannot withdraw it.
func TestCancelWhileTheCallRuns(t *testing.T) {
	t.Parallel()
	e := newHoldEnv(t, nil)
	e.srv.LiveServer(t, "st", false, "sleep")
	ctx := context.Background()
	cs, _ := e.client(t, eras[len(eras)-1])
	out := call(ctx, cs, "st__sleep", map[string]any{"ms": 2500}, "")
	ex := e.pending(t, "st__sleep")
	if _, err := e.srv.Executions.Confirm(ctx, e.admin, ex.ID, "", ""); err != nil {
		t.Fatal(err)
	}
	webtest.WaitFor(t, 10*time.Second, func() bool {
		st, err := e.srv.Executions.Steps(ctx, ex.ID)
		return err == nil && len(st) > 0 && st[0].Status == executions.StepRunning
	}, "the step never started")
	if _, err := e.srv.Executions.Cancel(ctx, e.admin, ex.ID, ""); err != nil {
		t.Fatal(err)
	}
	res := wait(t, out)
	if res.IsError || !strings.Contains(text(res), "Cancelled by admin after the call had started") || !strings.Contains(text(res), "slept") {
		t.Fatalf("a call cancelled while it ran: %+v %q", res, text(res))
	}

	plan, err := e.srv.Executions.Create(ctx, e.asTina, executions.Input{Plan: &executions.Request{
		Steps: []executions.RequestStep{{Tool: "ut__echo", Arguments: json.RawMessage(`{"message":"a plan"}`)}}}})
	if err != nil || plan.Status != executions.AwaitingApproval {
		t.Fatalf("tina's plan: %v %v", plan, err)
	}
	if listed := wait(t, call(ctx, cs, gateway.PendingTool, nil, "")); strings.Contains(text(listed), plan.ID) {
		t.Fatalf("list_pending shows a plan made through the API: %q", text(listed))
	}
	awaited := wait(t, call(ctx, cs, gateway.AwaitTool, map[string]any{"execution_id": plan.ID}, ""))
	if !awaited.IsError || !strings.Contains(text(awaited), "was not asked for by a call through MCP") {
		t.Fatalf("await of a plan made through the API: %q", text(awaited))
	}
}

// toolwarden__list_pending finds the caller's waiting MCP calls however many plans of
// the pages or the API wait beside them: it read the 200 newest of every source and
// kept the MCP ones.
func TestListPendingPastOtherPlans(t *testing.T) {
	t.Parallel()
	e := newHoldEnv(t, &gateway.Options{Hold: 100 * time.Millisecond})
	ctx := context.Background()
	cs, _ := e.client(t, eras[0])
	res := wait(t, call(ctx, cs, "ut__echo", map[string]any{"message": "first"}, ""))
	var p gateway.Pending
	if b, _ := json.Marshal(res.StructuredContent); json.Unmarshal(b, &p) != nil || p.ExecutionID == "" {
		t.Fatalf("the held call: %+v", res)
	}
	for i := range 201 {
		if _, err := e.srv.Executions.Create(ctx, e.asTina, executions.Input{Plan: &executions.Request{Steps: []executions.RequestStep{
			{Tool: "ut__echo", Arguments: json.RawMessage(fmt.Sprintf(`{"message":"plan %d"}`, i))}}}}); err != nil {
			t.Fatal(err)
		}
	}
	listed := wait(t, call(ctx, cs, gateway.PendingTool, nil, ""))
	if listed.IsError || !strings.Contains(text(listed), p.ExecutionID) {
		t.Fatalf("list_pending with 201 newer plans of the API: %q, want it to name %s", text(listed), p.ExecutionID)
	}
}

// callHeld is call with the hold asked for in _meta (seconds).
func callHeld(ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any, hold float64) <-chan callOutcome {
	out := make(chan callOutcome, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args, Meta: mcp.Meta{gateway.HoldMeta: hold}})
		out <- callOutcome{res, err}
	}()
	return out
}

// An execution held by two requests (the call, and an await of it from a second
// client of the same person) is withdrawn only when both give up: the await given up
// leaves the call waiting, and its approval returns the result; when the last one goes,
// the execution is cancelled.
func TestAwaitGivenUpBesideAHeldCall(t *testing.T) {
	t.Parallel()
	e := newHoldEnv(t, nil)
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			ctx := context.Background()
			first, _ := e.client(t, era)
			second, _ := e.client(t, era)
			message := "held twice " + era
			out := call(ctx, first, "ut__echo", map[string]any{"message": message}, "")
			ex := e.pending(t, "ut__echo")

			actx, cancel := context.WithCancel(ctx)
			awaited := call(actx, second, gateway.AwaitTool, map[string]any{"execution_id": ex.ID}, "")
			time.Sleep(300 * time.Millisecond) // the await is held
			cancel()
			<-awaited
			// Were the await's giving up to withdraw the execution, it would within
			// milliseconds; it must still await approval well after.
			deadline := time.Now().Add(2 * time.Second)
			for time.Now().Before(deadline) {
				cur, err := e.srv.Executions.Get(ctx, ex.ID)
				if err != nil {
					t.Fatal(err)
				}
				if cur.Status != executions.AwaitingApproval {
					t.Fatalf("after the await was given up the execution is %s (%s), want still awaiting approval", cur.Status, cur.Reason)
				}
				time.Sleep(100 * time.Millisecond)
			}
			if _, err := e.srv.Executions.Confirm(ctx, e.admin, ex.ID, "", ""); err != nil {
				t.Fatal(err)
			}
			if res := wait(t, out); res.IsError || text(res) != "Echo: "+message {
				t.Fatalf("the held call: %+v %q", res, text(res))
			}

			// Both given up: the last one withdraws it.
			message = "given up twice " + era
			cctx, cancelCall := context.WithCancel(ctx)
			out = call(cctx, first, "ut__echo", map[string]any{"message": message}, "")
			again := e.pending(t, "ut__echo") // the first has run
			actx, cancel = context.WithCancel(ctx)
			awaited = call(actx, second, gateway.AwaitTool, map[string]any{"execution_id": again.ID}, "")
			time.Sleep(300 * time.Millisecond)
			cancel()
			cancelCall()
			<-awaited
			<-out
			webtest.WaitFor(t, 10*time.Second, func() bool {
				cur, err := e.srv.Executions.Get(ctx, again.ID)
				return err == nil && cur.Status == executions.Cancelled && cur.Reason == "cancelled by the client"
			}, "the execution both holds gave up was not cancelled")
		})
	}
}

// A stateful session's client that answered the approval link is not asked again when
// the agent waits again with toolwarden__await_execution; once a person decides, the
// wait that returns the result tells it the elicitation is complete.
func TestURLElicitationAskedOncePerSession(t *testing.T) {
	t.Parallel()
	e := newHoldEnv(t, nil)
	ctx := context.Background()
	cs, urls, complete := e.elicitingClient(t, eras[0], false)
	res := wait(t, callHeld(ctx, cs, "ut__echo", map[string]any{"message": "asked once"}, 0.5))
	ex := e.pending(t, "ut__echo")
	if !res.IsError || !strings.Contains(text(res), gateway.AwaitTool) {
		t.Fatalf("the first hold's end: %+v %q", res, text(res))
	}
	if u := recv(t, "URL elicitation", urls); u != e.srv.URL+"/executions/"+ex.ID {
		t.Fatalf("the elicitation's URL is %q", u)
	}
	for range 2 {
		if res := wait(t, callHeld(ctx, cs, gateway.AwaitTool, map[string]any{"execution_id": ex.ID}, 0.5)); !res.IsError {
			t.Fatalf("an await before the decision: %q", text(res))
		}
	}
	time.Sleep(300 * time.Millisecond)
	select {
	case u := <-urls:
		t.Fatalf("asked again to open %q after the client answered", u)
	default:
	}
	out := call(ctx, cs, gateway.AwaitTool, map[string]any{"execution_id": ex.ID}, "")
	time.Sleep(200 * time.Millisecond)
	if _, err := e.srv.Executions.Confirm(ctx, e.admin, ex.ID, "", ""); err != nil {
		t.Fatal(err)
	}
	if res := wait(t, out); res.IsError || text(res) != "Echo: asked once" {
		t.Fatalf("the approved call: %+v %q", res, text(res))
	}
	if id := recv(t, "elicitation/complete", complete); id != ex.ID {
		t.Fatalf("elicitation/complete for %q, want %q", id, ex.ID)
	}

	// Another session of the same person is asked: the answer was that client's.
	other, urls2, _ := e.elicitingClient(t, eras[0], false)
	wait(t, callHeld(ctx, other, "ut__echo", map[string]any{"message": "other session"}, 0.5))
	next := e.pending(t, "ut__echo")
	recv(t, "URL elicitation of the second session", urls2)
	wait(t, callHeld(ctx, cs, gateway.AwaitTool, map[string]any{"execution_id": next.ID}, 0.5))
	if u := recv(t, "URL elicitation of the first session's await", urls); !strings.HasSuffix(u, next.ID) {
		t.Fatalf("the first session's await asked to open %q", u)
	}
}
