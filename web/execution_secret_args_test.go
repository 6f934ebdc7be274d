package web_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/tools"
)

// A send_input step of a plan (its input is writeOnly: a password at a hidden prompt)
// shows ******** instead of its text on the execution page (the preview's arguments and
// its undo's) and in the API's steps, while the terminal still gets the real text.
func TestExecutionMasksSecretStepArguments(t *testing.T) {
	t.Parallel()
	srv, admin, sid := secretArgsSetup(t)
	send := func(input string) map[string]any {
		return step(secretArgsTool, map[string]any{"operation": "send_input", "sessionId": sid, "input": input + "\n"})
	}
	body := map[string]any{"plan": map[string]any{"steps": []any{send(secretTyped)}, "rollback": []any{send(secretUndoTyped)}},
		"conversation_id": "conv-mask"}
	var ex apiExec
	admin.json(http.MethodPost, "/api/v1/executions", body, 201, &ex)
	ex = waitExec(t, admin, ex.ID, "success")

	// The run typed the real text: the terminal's own record of it says so.
	webtest.WaitFor(t, 10*time.Second, func() bool {
		return testkit.Count(t, srv.Pool, `SELECT count(*) FROM audit_log WHERE action = 'terminal.input' AND target_id = $1
			AND payload->>'input' LIKE $2`, sid, "%"+secretTyped+"%") == 1
	}, "the typed line's terminal.input entry")

	// The API: the same shape, the input masked.
	if len(ex.Steps) != 1 {
		t.Fatalf("steps: %+v", ex.Steps)
	}
	var args map[string]string
	if err := json.Unmarshal(ex.Steps[0].Arguments, &args); err != nil {
		t.Fatalf("the step's arguments %s: %v", ex.Steps[0].Arguments, err)
	}
	if args["input"] != "********" || args["operation"] != "send_input" {
		t.Errorf("the API's step arguments: %s", ex.Steps[0].Arguments)
	}
	noSecret(t, admin, "/api/v1/executions/"+ex.ID)

	// The page: the preview's arguments and its undo's.
	d := noSecret(t, admin, "/executions/"+ex.ID)
	st := d.Find(`[data-testid=action-preview] [data-testid=preview-step]`)
	if got := st.Find(`[data-testid=step-arguments]`).Text(); !strings.Contains(got, `"input": "********"`) || !strings.Contains(got, `"operation": "send_input"`) {
		t.Errorf("the preview's arguments: %s", got)
	}
	if got := st.Find(`[data-testid=step-undo]`).Text(); !strings.Contains(got, "********") {
		t.Errorf("the preview's undo: %s", got)
	}
}

// A failed execution's rollback plan (its page's panel and GET …/rollback) masks a
// send_input undo step's text too, but to a person who may roll it back, who reads the
// plan they decide whole, on the page too. The live fragment every open page shares
// masks it and has each page ask for its panels as its viewer.
func TestExecutionRollbackPlanMasksSecretArguments(t *testing.T) {
	t.Parallel()
	srv, admin, sid := secretArgsSetup(t)
	send := func(input string) map[string]any {
		return step(secretArgsTool, map[string]any{"operation": "send_input", "sessionId": sid, "input": input + "\n"})
	}
	// The second step reads a session that does not exist: the tool answers an error.
	fail := step(secretArgsTool, map[string]any{"operation": "get_output", "sessionId": "term-nosuch"})
	body := map[string]any{"plan": map[string]any{"steps": []any{send(secretTyped), fail}, "rollback": []any{send(secretUndoTyped)}},
		"conversation_id": "conv-mask"}
	cursor := lastEventID(t, srv)
	var ex apiExec
	admin.json(http.MethodPost, "/api/v1/executions", body, 201, &ex)
	waitExec(t, admin, ex.ID, "failed")

	var rp struct {
		Steps []struct {
			Tool      string            `json:"tool"`
			Arguments map[string]string `json:"arguments"`
		} `json:"steps"`
	}
	admin.json(http.MethodGet, "/api/v1/executions/"+ex.ID+"/rollback", nil, 200, &rp)
	if len(rp.Steps) != 1 || rp.Steps[0].Arguments["input"] != secretUndoTyped+"\n" {
		t.Errorf("the rollback plan's steps, to who may roll back: %+v, want the text whole", rp.Steps)
	}
	srv.CreateUser(t, "audra", auth.RoleAuditor, "auditor-password-1")
	audra := svClient{t: t, srv: srv, c: srv.Login(t, "audra", "auditor-password-1")}
	audra.json(http.MethodGet, "/api/v1/executions/"+ex.ID+"/rollback", nil, 200, &rp)
	if len(rp.Steps) != 1 || rp.Steps[0].Arguments["input"] != "********" || rp.Steps[0].Arguments["operation"] != "send_input" {
		t.Errorf("the rollback plan's steps, to an auditor: %+v", rp.Steps)
	}
	noSecret(t, audra, "/api/v1/executions/"+ex.ID+"/rollback")
	for _, path := range []string{"/executions/" + ex.ID, "/executions/" + ex.ID + "/results"} {
		if got := noSecret(t, audra, path).Find(panelArgs).Text(); !strings.Contains(got, `"input": "********"`) {
			t.Errorf("%s: the rollback panel's arguments, to an auditor: %q", path, got)
		}
		if got := noSecret(t, admin, path, secretTyped).Find(panelArgs).Text(); !strings.Contains(got, secretUndoTyped) {
			t.Errorf("%s: the rollback panel's arguments, to who may roll back: %q, want the text whole", path, got)
		}
	}
	conn := wsDial(t, srv, admin.c, []string{"execution:" + ex.ID}, cursor)
	last := wsUntil(t, conn, "the execution's failure", func(doc *goquery.Document) bool {
		html, _ := doc.Html()
		if strings.Contains(html, secretUndoTyped) || strings.Contains(html, secretTyped) {
			t.Errorf("a live fragment shows a secret: %.300s", html)
		}
		return doc.Find("[data-testid=log-line][data-kind='execution.failed']").Length() == 1
	})
	if last.Find("[data-testid=results-loader]").Length() != 1 || last.Find("[data-testid=rollback-panel]").Length() != 0 {
		t.Error("the failure's live fragment does not ask for the rollback panel as its viewer")
	}
}

// panelArgs finds the arguments of the rollback panel's plan steps.
const panelArgs = `[data-testid=rollback-panel] [data-testid=rollback-plan-step] [data-testid=step-arguments]`

const (
	secretArgsTool  = "builtin__terminal_operations"
	secretTyped     = "tulip-Otter-Pw93"
	secretUndoTyped = "maple-Heron-Pw71"
)

// secretArgsSetup starts a server whose terminal tool is LOW (plans of it run at once),
// with a terminal session of conversation conv-mask; it returns the admin's client and
// the session's id.
func secretArgsSetup(t *testing.T) (*webtest.Server, svClient, string) {
	t.Helper()
	ctx := context.Background()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	tg := srv.App.Enable(t, secretArgsTool)
	low := "low"
	if _, err := srv.App.Tools.Update(ctx, audit.System, tg.ID, tools.Patch{Risk: &low, MayLowerRisk: true, Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	webtest.WaitFor(t, 10*time.Second, func() bool {
		d, err := srv.Router.RiskOf(ctx, secretArgsTool, json.RawMessage(`{"operation":"get_output","sessionId":"x"}`))
		return err == nil && d.Level == risk.Low
	}, "the tool's LOW risk in the router")
	res, err := srv.Router.Call(ctx, router.Call{Tool: secretArgsTool, Arguments: json.RawMessage(`{"operation":"create_session"}`),
		Actor: audit.Actor{Kind: audit.ActorUser, Name: "admin"}, Role: auth.RoleAdmin, Source: router.SourceAPI, ConversationID: "conv-mask"})
	if err != nil || res.IsError {
		t.Fatalf("create_session: %v %+v", err, res)
	}
	var cs struct{ SessionID string }
	_ = json.Unmarshal(res.StructuredContent, &cs)
	return srv, svClient{t: t, srv: srv, c: srv.Login(t, "admin", webtest.AdminPassword)}, cs.SessionID
}

// noSecret GETs path (a page or the API) and fails when it holds any of secrets, by
// default either typed text.
func noSecret(t *testing.T, c svClient, path string, secrets ...string) *goquery.Document {
	t.Helper()
	r := c.srv.Get(t, c.c, path)
	body, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if r.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, r.StatusCode, body)
	}
	if len(secrets) == 0 {
		secrets = []string{secretTyped, secretUndoTyped}
	}
	for _, secret := range secrets {
		if strings.Contains(string(body), secret) {
			t.Errorf("GET %s shows %q", path, secret)
		}
	}
	d, err := goquery.NewDocumentFromReader(strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// A person deciding an execution that awaits approval reads its steps whole, send_input's
// text too: approving what one cannot read is no decision. Someone who may not decide it
// (an auditor), and everyone once it is decided, still sees it masked.
func TestExecutionAwaitingApprovalRevealsSecretArguments(t *testing.T) {
	t.Parallel()
	srv, admin, sid := secretArgsSetup(t)
	ctx := context.Background()
	tg := srv.App.Settled(t, secretArgsTool)
	medium := "medium"
	if _, err := srv.App.Tools.Update(ctx, audit.System, tg.ID, tools.Patch{Risk: &medium, Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	webtest.WaitFor(t, 10*time.Second, func() bool {
		d, err := srv.Router.RiskOf(ctx, secretArgsTool, json.RawMessage(`{"operation":"get_output","sessionId":"x"}`))
		return err == nil && d.Level == risk.Medium
	}, "the tool's MEDIUM risk in the router")
	body := map[string]any{"plan": map[string]any{"steps": []any{step(secretArgsTool,
		map[string]any{"operation": "send_input", "sessionId": sid, "input": secretTyped + "\n"})}}, "conversation_id": "conv-mask"}
	var ex apiExec
	admin.json(http.MethodPost, "/api/v1/executions", body, 201, &ex)
	if ex.Status != "awaiting_approval" {
		t.Fatalf("a MEDIUM plan: status %s, want awaiting_approval", ex.Status)
	}
	r := srv.Get(t, admin.c, "/executions/"+ex.ID)
	d := page(t, r)
	if got := d.Find(`[data-testid=action-preview] [data-testid=preview-step] [data-testid=step-arguments]`).Text(); !strings.Contains(got, secretTyped) {
		t.Errorf("the deciding person's preview: %s, want the text that would be typed", got)
	}
	var got apiExec
	admin.json(http.MethodGet, "/api/v1/executions/"+ex.ID, nil, 200, &got)
	if len(got.Steps) != 1 || !strings.Contains(string(got.Steps[0].Arguments), secretTyped) {
		t.Errorf("the deciding person's API steps: %+v, want the text that would be typed", got.Steps)
	}
	srv.CreateUser(t, "audra", auth.RoleAuditor, "auditor-password-1")
	audra := svClient{t: t, srv: srv, c: srv.Login(t, "audra", "auditor-password-1")}
	noSecret(t, audra, "/executions/"+ex.ID)
	noSecret(t, audra, "/api/v1/executions/"+ex.ID)

	// Decided and run, it is masked for the person who decided it too: the open page's
	// preview is sent again masked, and a new one shows it masked.
	conn := wsDial(t, srv, admin.c, []string{"execution:" + ex.ID}, lastEventID(t, srv))
	admin.json(http.MethodPost, "/api/v1/executions/"+ex.ID+"/confirm", map[string]any{"plan_hash": ex.PlanHash}, 200, nil)
	live := wsUntil(t, conn, "the preview sent again", func(d *goquery.Document) bool {
		return d.Find(`[data-testid=action-preview]`).Length() > 0
	})
	if got := live.Find(`[data-testid=action-preview] [data-testid=step-arguments]`).Text(); strings.Contains(got, secretTyped) ||
		!strings.Contains(got, `"input": "********"`) {
		t.Errorf("the open page's preview after the decision: %s, want the text masked", got)
	}
	waitExec(t, admin, ex.ID, "success")
	noSecret(t, admin, "/executions/"+ex.ID)
}

// A step argument whose name says it is secret (api_key), or whose value looks like a
// credential, is masked on the execution page and in the API for anyone who is not
// deciding it, though the tool's schema marks nothing secret: as the call's records are.
func TestExecutionMasksSecretNamedArguments(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "kv"})
	hs.Server().SetTool(mcptest.ToolSpec{Name: "login", Description: "Logs in to the test service.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"api_key":{"type":"string"},"note":{"type":"string"}}}`)})
	srv.RegisterServer(t, registry.Spec{Name: "kv", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true}, "login")
	const key, token = "plain-Otter-Key93", "ghp_R4nd0mT0k3nV4lu3Th4tL00ksR34l1234567"
	admin := svClient{t: t, srv: srv, c: srv.Login(t, "admin", webtest.AdminPassword)}
	var ex apiExec
	admin.json(http.MethodPost, "/api/v1/executions", map[string]any{"plan": map[string]any{"steps": []any{
		step("kv__login", map[string]any{"api_key": key, "note": token})}}}, 201, &ex)
	if ex.Status != "awaiting_approval" {
		t.Fatalf("the plan: status %s, want awaiting_approval (nobody has decided it)", ex.Status)
	}
	srv.CreateUser(t, "audra", auth.RoleAuditor, "auditor-password-1")
	audra := svClient{t: t, srv: srv, c: srv.Login(t, "audra", "auditor-password-1")}
	noSecret(t, audra, "/executions/"+ex.ID, key, token)
	noSecret(t, audra, "/api/v1/executions/"+ex.ID, key, token)
}

// The rollback plan of a failed execution of a remote tool, one of whose undo steps
// carries a credential-shaped value: the live fragment shared by every open page masks
// it and asks each page for its panels as its viewer, which shows it whole to a person
// who may roll it back (there is no built-in result to withhold here).
func TestExecutionRollbackPanelLivePerViewer(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	liveServer(t, srv, "mt", true, "echo", "fail")
	srv.App.SetRisk(t, "mt__echo", risk.Low)
	srv.App.SetRisk(t, "mt__fail", risk.Low)
	admin := svClient{t: t, srv: srv, c: srv.Login(t, "admin", webtest.AdminPassword)}
	const token = "ghp_Q8d2Lm4Zt7Xw1Vb9Kc3Nf6Hj0Rp5Sy2Ua8Ee"
	cursor := lastEventID(t, srv)
	var ex apiExec
	admin.json(http.MethodPost, "/api/v1/executions", map[string]any{"plan": map[string]any{
		"steps":    []any{step("mt__echo", map[string]any{"message": "hi"}), step("mt__fail", map[string]any{})},
		"rollback": []any{step("mt__echo", map[string]any{"message": token})}}}, 201, &ex)
	waitExec(t, admin, ex.ID, "failed")
	conn := wsDial(t, srv, admin.c, []string{"execution:" + ex.ID}, cursor)
	last := wsUntil(t, conn, "the execution's failure", func(doc *goquery.Document) bool {
		if html, _ := doc.Html(); strings.Contains(html, token) {
			t.Errorf("a live fragment shows the undo step's token: %.300s", html)
		}
		return doc.Find("[data-testid=log-line][data-kind='execution.failed']").Length() == 1
	})
	if last.Find("[data-testid=results-loader]").Length() != 1 || last.Find("[data-testid=rollback-panel]").Length() != 0 {
		t.Error("the failure's live fragment does not ask for the rollback panel as its viewer")
	}
	if got := page(t, srv.Get(t, admin.c, "/executions/"+ex.ID+"/results")).Find(panelArgs).Text(); !strings.Contains(got, token) {
		t.Errorf("the rollback panel's arguments, to who may roll back: %q, want the token whole", got)
	}
}

// A step's words in the execution's log — what a failed tool answered, the start of a
// successful one's result — have what looks like a credential masked for every viewer,
// as its step error, audit row and result (for all but its requester) have.
func TestExecutionLogMasksCredentials(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		tool, said, status, token string
	}{
		{"fail", "bad credentials", "failed", "ghp_Z7c3Kq9Wm2Xv5Bn8Lp4Rt6Yh1Df0Gs3Ja9Uu"},
		{"echo", "created key", "success", "ghp_Q2w8Er5Ty1Ui7Op3As6Df9Gh4Jk0Lz2Xc5Vb"},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			t.Parallel()
			srv := webtest.Start(t, nil)
			liveServer(t, srv, "mt", true, tc.tool)
			srv.App.SetRisk(t, "mt__"+tc.tool, risk.Low)
			admin := svClient{t: t, srv: srv, c: srv.Login(t, "admin", webtest.AdminPassword)}
			var ex apiExec
			admin.json(http.MethodPost, "/api/v1/executions", map[string]any{"plan": map[string]any{
				"steps": []any{step("mt__"+tc.tool, map[string]any{"message": tc.said + " " + tc.token})}}}, 201, &ex)
			waitExec(t, admin, ex.ID, tc.status)
			srv.CreateUser(t, "audra", auth.RoleAuditor, "auditor-password-1")
			audra := svClient{t: t, srv: srv, c: srv.Login(t, "audra", "auditor-password-1")}
			doc := page(t, srv.Get(t, audra.c, "/executions/"+ex.ID))
			if got := doc.Find("[data-testid=log-line]").Text(); strings.Contains(got, tc.token) || !strings.Contains(got, tc.said) {
				t.Errorf("the execution's log: %q, want the tool's words with the token masked", got)
			}
		})
	}
}
