package web_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/gorilla/websocket"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/planner"
)

// xpEnv is a server with two live MCP servers: lo (trusted: echo and add are low risk,
// fail has no annotations and is high) and mt (untrusted: echo is medium, write-note high).
type xpEnv struct {
	srv   *webtest.Server
	admin *http.Client
	ann   *http.Client // a tool user: creates and approves
	aud   *http.Client // an auditor: sees, never decides
}

const xpPassword = "exec-pages-password-1"

func xpStart(t *testing.T) *xpEnv {
	t.Helper()
	srv := webtest.Start(t, nil)
	liveServer(t, srv, "lo", true, "echo", "add", "fail")
	liveServer(t, srv, "mt", false, "echo", "write-note")
	srv.CreateUser(t, "ann", auth.RoleToolUser, xpPassword)
	srv.CreateUser(t, "aud", auth.RoleAuditor, xpPassword)
	return &xpEnv{srv: srv, admin: srv.Login(t, "admin", webtest.AdminPassword),
		ann: srv.Login(t, "ann", xpPassword), aud: srv.Login(t, "aud", xpPassword)}
}

// create posts the new-execution form and returns the id it redirects to.
func (e *xpEnv) create(t *testing.T, c *http.Client, form url.Values) string {
	t.Helper()
	res := e.srv.PostForm(t, c, "/executions/new", form)
	body := bodyString(t, res)
	loc := res.Header.Get("Location")
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/executions/") {
		t.Fatalf("create %v: got %d to %q, want 303 to the execution: %s", form, res.StatusCode, loc, body)
	}
	return strings.TrimPrefix(loc, "/executions/")
}

func (e *xpEnv) createPlan(t *testing.T, c *http.Client, plan string) string {
	t.Helper()
	return e.create(t, c, url.Values{"mode": {"plan"}, "plan": {plan}})
}

// show loads the page of an execution; want is the status expected.
func (e *xpEnv) show(t *testing.T, c *http.Client, id string, want int) *goquery.Document {
	t.Helper()
	res := e.srv.Get(t, c, "/executions/"+id)
	if res.StatusCode != want {
		t.Fatalf("GET /executions/%s: got %d, want %d: %s", id, res.StatusCode, want, bodyString(t, res))
	}
	return page(t, res)
}

// decide posts a decision and follows the redirect back to the page.
func (e *xpEnv) decide(t *testing.T, c *http.Client, id, what string, form url.Values) *goquery.Document {
	t.Helper()
	res := e.srv.PostForm(t, c, "/executions/"+id+"/"+what, form)
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/executions/"+id {
		t.Fatalf("POST %s %v: got %d to %q, want 303 back to the page", what, form, res.StatusCode, res.Header.Get("Location"))
	}
	return e.show(t, c, id, http.StatusOK)
}

func (e *xpEnv) get(t *testing.T, id string) *executions.Execution {
	t.Helper()
	ex, err := e.srv.Executions.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return ex
}

// wait polls until the execution has status want.
func (e *xpEnv) wait(t *testing.T, id string, want executions.Status) *executions.Execution {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ex := e.get(t, id)
		if ex.Status == want {
			return ex
		}
		if time.Now().After(deadline) {
			t.Fatalf("execution %s is %s (%s), want %s", id, ex.Status, ex.Error, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *xpEnv) count(t *testing.T) int {
	t.Helper()
	var n int
	if err := e.srv.Pool.QueryRow(context.Background(), `SELECT count(*) FROM executions`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func xpStatus(doc *goquery.Document) string {
	return doc.Find("[data-testid=execution-head] [data-testid=execution-status]").AttrOr("data-status", "")
}

func xpFlash(doc *goquery.Document) string {
	return strings.TrimSpace(doc.Find("[data-testid=flash]").Text())
}

func xpStepStatuses(doc *goquery.Document, testid string) []string {
	var out []string
	doc.Find("[data-testid=" + testid + "]").Each(func(_ int, s *goquery.Selection) {
		out = append(out, s.AttrOr("data-status", ""))
	})
	return out
}

func xpLogKinds(doc *goquery.Document) []string {
	var out []string
	doc.Find("[data-testid=log-panel] [data-testid=log-line]").Each(func(_ int, s *goquery.Selection) {
		out = append(out, s.AttrOr("data-kind", ""))
	})
	return out
}

// waitLog reloads the page until its log has a line of each kind (the router records a
// call's completion shortly after the step's row).
func (e *xpEnv) waitLog(t *testing.T, c *http.Client, id string, kinds ...string) *goquery.Document {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		doc := e.show(t, c, id, http.StatusOK)
		got := xpLogKinds(doc)
		missing := false
		for _, k := range kinds {
			missing = missing || !xpHas(got, k)
		}
		if !missing {
			return doc
		}
		if time.Now().After(deadline) {
			t.Fatalf("log %v, want lines of %v", got, kinds)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func xpHas(list []string, want string) bool {
	for _, s := range list {
		if s == want {
			return true
		}
	}
	return false
}

// A MEDIUM plan from a prompt: the preview shows every step, the ConfirmActionModal
// carries the plan hash, a stale hash is refused, a confirm runs it and the page shows
// the results and the log.
func TestExecutionPagesMediumConfirm(t *testing.T) {
	t.Parallel()
	e := xpStart(t)
	doc := page(t, e.srv.Get(t, e.ann, "/executions/new"))
	if doc.Find("textarea[data-testid=prompt][name=prompt]").Length() != 1 || doc.Find("button[data-testid=submit-prompt]").Length() != 1 ||
		doc.Find("textarea[data-testid=plan-json][name=plan]").Length() != 1 || !strings.Contains(doc.Find("#exec-prompt-help").Text(), "rollback:") {
		t.Fatalf("the new-execution form lacks the prompt, the plan editor or the grammar help")
	}
	if doc.Find("[data-testid=tool-hints] a[href^='/tools/']").Length() < 5 {
		t.Errorf("the form lists %d tools, want the enabled ones", doc.Find("[data-testid=tool-hints] a").Length())
	}

	id := e.create(t, e.ann, url.Values{"mode": {"prompt"}, "prompt": {`call mt__echo message="hi there" then call lo__add a=1 b=2`}})
	ex := e.get(t, id)
	doc = e.show(t, e.ann, id, http.StatusOK)
	if xpStatus(doc) != "awaiting_approval" || ex.Risk != "medium" {
		t.Fatalf("status %q risk %s, want awaiting_approval and medium", xpStatus(doc), ex.Risk)
	}
	if !strings.Contains(xpFlash(doc), "medium risk") {
		t.Errorf("flash after creating: %q", xpFlash(doc))
	}
	head := doc.Find("[data-testid=execution-head]")
	if head.Find("[data-testid=risk-badge]").AttrOr("data-risk", "") != "medium" || !strings.Contains(head.Text(), "ann") ||
		!strings.Contains(head.Find("[data-testid=execution-risk-why]").Text(), "mt__echo") ||
		head.Find("[data-testid=plan-hash]").AttrOr("title", "") != ex.Hash() || head.Find("[data-testid=execution-expires]").Length() != 1 {
		t.Errorf("header: %q", strings.Join(strings.Fields(head.Text()), " "))
	}
	if doc.Find("[data-testid=execution-page][data-mine]").Length() != 1 {
		t.Errorf("the requester's page is not marked as theirs")
	}
	// A requester made an auditor since may no longer withdraw it: the page offers no cancel.
	setRole := func(role string) {
		if _, err := e.srv.Pool.Exec(context.Background(), `UPDATE users SET role = $1 WHERE username = 'ann'`, role); err != nil {
			t.Fatal(err)
		}
	}
	setRole("auditor")
	if d := e.show(t, e.ann, id, http.StatusOK); d.Find("[data-testid=execution-page][data-mine]").Length() != 0 {
		t.Errorf("the page of a requester made an auditor offers them the cancel")
	}
	setRole("tool_user")
	steps := doc.Find("[data-testid=action-preview] [data-testid=preview-step]")
	if steps.Length() != 2 {
		t.Fatalf("preview has %d steps, want 2", steps.Length())
	}
	first := steps.Eq(0)
	if first.AttrOr("data-tool", "") != "mt__echo" || first.AttrOr("data-risk", "") != "medium" ||
		first.Find("a[href='/tools/"+toolID(t, e.srv, "mt__echo")+"']").Length() != 1 ||
		!strings.Contains(first.Find("[data-testid=step-arguments]").Text(), `"message": "hi there"`) ||
		first.Find("[data-testid=step-undo]").AttrOr("data-undo", "") != "none" || !strings.Contains(first.Text(), "on mt") {
		t.Errorf("first preview step: %q", strings.Join(strings.Fields(first.Text()), " "))
	}
	if steps.Eq(1).AttrOr("data-risk", "") != "low" {
		t.Errorf("lo__add: risk %q, want low", steps.Eq(1).AttrOr("data-risk", ""))
	}
	modal := doc.Find("dialog[data-testid=confirm-modal]")
	if modal.Length() != 1 || modal.Find("input[name=plan_hash]").AttrOr("value", "") != ex.Hash() ||
		modal.Find("form").AttrOr("action", "") != "/executions/"+id+"/confirm" ||
		doc.Find("[data-testid=confirm-open]").AttrOr("data-dialog-open", "") != modal.AttrOr("id", "") ||
		modal.ParentFiltered("[data-perm='execution.approve']").Length() != 1 {
		t.Fatalf("the ConfirmActionModal is missing or does not carry the plan hash")
	}
	if doc.Find("[data-testid=danger-zone]").Length() != 0 {
		t.Errorf("a medium plan shows a danger zone")
	}
	if cur, _ := strconv.ParseInt(doc.Find("#ws-cursor").AttrOr("data-last-event-id", "0"), 10, 64); cur == 0 {
		t.Errorf("the page has no websocket cursor")
	}
	if kinds := xpLogKinds(doc); !xpHas(kinds, "plan.created") || !xpHas(kinds, "approval.requested") {
		t.Errorf("log on load: %v", kinds)
	}
	if doc.Find("[data-testid=log-panel][role=log][aria-live=polite]").Length() != 1 {
		t.Errorf("the log panel is not an aria-live log")
	}

	// An auditor sees it all but may not decide: the route refuses, a cancel is refused
	// by the service with a reason.
	e.show(t, e.aud, id, http.StatusOK)
	res := e.srv.PostForm(t, e.aud, "/executions/"+id+"/confirm", url.Values{"plan_hash": {ex.Hash()}})
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("an auditor's confirm: got %d, want 403", res.StatusCode)
	}
	doc = e.decide(t, e.aud, id, "cancel", nil)
	if !strings.Contains(xpFlash(doc), "requester or an approver") || xpStatus(doc) != "awaiting_approval" {
		t.Errorf("an auditor's cancel: flash %q, status %s", xpFlash(doc), xpStatus(doc))
	}

	// A plan hash that is not the plan's: refused, nothing changes.
	doc = e.decide(t, e.admin, id, "confirm", url.Values{"plan_hash": {strings.Repeat("0", 64)}})
	if doc.Find("[data-testid=flash].error").Length() != 1 || !strings.Contains(xpFlash(doc), "not the one you saw") || xpStatus(doc) != "awaiting_approval" {
		t.Fatalf("stale hash: flash %q, status %s", xpFlash(doc), xpStatus(doc))
	}
	// A reject needs a reason.
	doc = e.decide(t, e.admin, id, "reject", url.Values{"reason": {"  "}})
	if !strings.Contains(xpFlash(doc), "Not rejected") || xpStatus(doc) != "awaiting_approval" {
		t.Fatalf("reject without a reason: flash %q, status %s", xpFlash(doc), xpStatus(doc))
	}

	doc = e.decide(t, e.admin, id, "confirm", url.Values{"plan_hash": {ex.Hash()}})
	if doc.Find("[data-testid=flash].success").Length() != 1 {
		t.Errorf("confirm: flash %q", xpFlash(doc))
	}
	e.wait(t, id, executions.Success)
	doc = e.show(t, e.ann, id, http.StatusOK)
	if xpStatus(doc) != "success" {
		t.Fatalf("after the run: status %s", xpStatus(doc))
	}
	if got := xpStepStatuses(doc, "step"); strings.Join(got, ",") != "succeeded,succeeded" {
		t.Errorf("stepper: %v", got)
	}
	if !strings.Contains(doc.Find("[data-testid=approval]").Text(), "Every step succeeded") ||
		!strings.Contains(doc.Find("[data-testid=execution-approval]").Text(), "confirmed by admin") {
		t.Errorf("outcome: %q", strings.Join(strings.Fields(doc.Find("[data-testid=approval]").Text()), " "))
	}
	results := doc.Find("[data-testid=results] [data-testid=step-result]")
	if results.Length() != 2 || !strings.Contains(results.Eq(0).Text(), "Echo: hi there") ||
		!strings.Contains(results.Eq(1).Find("[data-testid=result-structured]").Text(), `"sum": 3`) {
		t.Errorf("results: %q", strings.Join(strings.Fields(doc.Find("[data-testid=results]").Text()), " "))
	}
	doc = e.waitLog(t, e.ann, id, "approval.granted", "tool.started", "tool.completed", "execution.success")
	if line := doc.Find("[data-testid=log-line][data-kind='tool.completed']").First().Text(); !strings.Contains(line, "mt__echo completed") {
		t.Errorf("tool.completed line: %q", line)
	}
	if doc.Find("[data-testid=confirm-modal]").Length() != 0 || doc.Find("[data-testid=rollback-panel]:not([hidden])").Length() != 0 {
		t.Errorf("a finished plan still offers a confirm or a rollback")
	}
}

// A HIGH plan shows the DangerZone: the phrase, an input and a disabled button; a wrong
// phrase is refused with a clear error and changes nothing; the right one runs it.
func TestExecutionPagesDangerZone(t *testing.T) {
	t.Parallel()
	e := xpStart(t)
	id := e.createPlan(t, e.ann, `{"steps":[{"tool":"mt__write-note","arguments":{"text":"a note"}}]}`)
	ex := e.get(t, id)
	if ex.Risk != "high" || ex.ConfirmationPhrase == "" {
		t.Fatalf("risk %s phrase %q, want high with a phrase", ex.Risk, ex.ConfirmationPhrase)
	}
	doc := e.show(t, e.admin, id, http.StatusOK)
	zone := doc.Find("[data-testid=danger-zone]")
	input := zone.Find("input[data-testid=danger-input]")
	button := zone.Find("button[data-testid=danger-confirm]")
	if zone.Length() != 1 || strings.TrimSpace(zone.Find("[data-testid=danger-phrase]").Text()) != ex.ConfirmationPhrase ||
		input.AttrOr("data-phrase", "") != ex.ConfirmationPhrase || input.AttrOr("name", "") != "phrase" {
		t.Fatalf("danger zone: %q", strings.Join(strings.Fields(zone.Text()), " "))
	}
	if _, disabled := button.Attr("disabled"); !disabled || button.AttrOr("type", "") != "submit" {
		t.Errorf("the danger zone's button is not disabled until the phrase is typed")
	}
	if zone.Find("input[name=plan_hash]").AttrOr("value", "") != ex.Hash() || !strings.Contains(zone.Text(), "mt__write-note") {
		t.Errorf("the danger zone does not say what runs or carry the plan hash")
	}
	if doc.Find("[data-testid=confirm-modal]").Length() != 0 {
		t.Errorf("a high plan offers a plain confirm")
	}
	if doc.Find("[data-testid=execution-page][data-mine]").Length() != 0 {
		t.Errorf("admin's view of ann's plan is marked as admin's")
	}
	// ann asked for it and may approve plans, but with admin there to approve, not her
	// own high-risk one: her page says so up front (the phrase is not offered), admin's not.
	if doc.Find("[data-testid=execution-page][data-needs-other]").Length() != 0 {
		t.Errorf("admin's page says someone else must approve")
	}
	adoc := e.show(t, e.ann, id, http.StatusOK)
	if adoc.Find("[data-testid=execution-page][data-mine][data-needs-other]").Length() != 1 ||
		!strings.Contains(adoc.Find("[data-testid=needs-other]").Text(), "another person who may approve") {
		t.Errorf("ann's page of her own high-risk plan does not say another person must approve it")
	}

	// A LOW plan never waits: no confirm, no danger zone, approved by policy.
	low := e.createPlan(t, e.ann, `{"steps":[{"tool":"lo__echo","arguments":{"message":"low"}}]}`)
	e.wait(t, low, executions.Success)
	ldoc := e.show(t, e.ann, low, http.StatusOK)
	if ldoc.Find("[data-testid=confirm-modal], [data-testid=danger-zone]").Length() != 0 ||
		!strings.Contains(ldoc.Find("[data-testid=execution-approval]").Text(), "policy") {
		t.Errorf("a low plan: %q", strings.Join(strings.Fields(ldoc.Find("[data-testid=approval]").Text()), " "))
	}

	doc = e.decide(t, e.admin, id, "confirm", url.Values{"plan_hash": {ex.Hash()}, "phrase": {strings.ToUpper(ex.ConfirmationPhrase)}})
	if doc.Find("[data-testid=flash].error").Length() != 1 || !strings.Contains(xpFlash(doc), "does not match") ||
		!strings.Contains(xpFlash(doc), ex.ConfirmationPhrase) || xpStatus(doc) != "awaiting_approval" {
		t.Fatalf("wrong phrase: flash %q, status %s", xpFlash(doc), xpStatus(doc))
	}
	if got := e.get(t, id); got.Status != executions.AwaitingApproval || got.ApprovedAt != nil {
		t.Fatalf("a wrong phrase changed the execution: %s", got.Status)
	}

	e.decide(t, e.admin, id, "confirm", url.Values{"plan_hash": {ex.Hash()}, "phrase": {ex.ConfirmationPhrase}})
	e.wait(t, id, executions.Success)
	doc = e.show(t, e.admin, id, http.StatusOK)
	if xpStatus(doc) != "success" || !strings.Contains(doc.Find("[data-testid=execution-approval]").Text(), "typed phrase") ||
		doc.Find("[data-testid=step-result][data-status=succeeded]").Length() != 1 {
		t.Fatalf("after the phrase: status %s, results %q", xpStatus(doc), doc.Find("[data-testid=results]").Text())
	}
	if doc.Find("[data-testid=danger-zone]").Length() != 0 {
		t.Errorf("the danger zone is still offered after the run")
	}
}

// A failing step fails the execution and shows the RollbackPanel, gated by the undo
// steps' risk (MEDIUM here: a confirm box); the rollback runs and the page shows it.
func TestExecutionPagesFailureAndRollback(t *testing.T) {
	t.Parallel()
	e := xpStart(t)
	id := e.createPlan(t, e.ann, `{"steps":[{"tool":"lo__echo","arguments":{"message":"do"}},{"tool":"lo__fail","arguments":{"message":"boom"}},{"tool":"lo__echo","arguments":{"message":"never"}}],
		"rollback":[{"tool":"mt__echo","arguments":{"message":"undo"}}]}`)
	ex := e.get(t, id)
	doc := e.show(t, e.ann, id, http.StatusOK)
	undo := doc.Find("[data-testid=preview-step]").Eq(0).Find("[data-testid=step-undo]")
	if undo.AttrOr("data-undo", "") != "step" || !strings.Contains(undo.Text(), "mt__echo") {
		t.Errorf("the first step's undo: %q", undo.Text())
	}
	e.decide(t, e.admin, id, "confirm", url.Values{"plan_hash": {ex.Hash()}, "phrase": {ex.ConfirmationPhrase}})
	e.wait(t, id, executions.Failed)

	doc = e.show(t, e.ann, id, http.StatusOK)
	if xpStatus(doc) != "failed" {
		t.Fatalf("status %s, want failed", xpStatus(doc))
	}
	if got := xpStepStatuses(doc, "step"); strings.Join(got, ",") != "succeeded,failed,skipped" {
		t.Errorf("stepper: %v", got)
	}
	if !strings.Contains(doc.Find("[data-testid=step][data-status=failed] [data-testid=step-error]").Text(), "boom") ||
		!strings.Contains(doc.Find("[data-testid=step-result][data-status=failed] [data-testid=result-error]").Text(), "boom") {
		t.Errorf("the failed step does not say why")
	}
	panel := doc.Find("[data-testid=rollback-panel]")
	if _, hidden := panel.Attr("hidden"); hidden || panel.AttrOr("data-risk", "") != "medium" ||
		panel.Find("[data-testid=rollback-plan-step]").Length() != 1 || !strings.Contains(panel.Find("[data-testid=rollback-plan-step]").Text(), "mt__echo") ||
		panel.Find("input[type=checkbox][name=confirm][data-testid=rollback-confirm]").Length() != 1 ||
		panel.Find("button[data-testid=rollback-button]").Length() != 1 {
		t.Fatalf("rollback panel: %q", strings.Join(strings.Fields(panel.Text()), " "))
	}
	e.waitLog(t, e.ann, id, "tool.completed", "execution.failed")

	// Without the confirm the rollback is refused and nothing changes.
	doc = e.decide(t, e.ann, id, "rollback", nil)
	if !strings.Contains(xpFlash(doc), "Not rolled back") || xpStatus(doc) != "failed" {
		t.Fatalf("unconfirmed rollback: flash %q, status %s", xpFlash(doc), xpStatus(doc))
	}
	doc = e.decide(t, e.ann, id, "rollback", url.Values{"confirm": {"1"}})
	if !strings.Contains(xpFlash(doc), "Rollback started") {
		t.Errorf("rollback flash: %q", xpFlash(doc))
	}
	e.wait(t, id, executions.RolledBack)
	doc = e.show(t, e.ann, id, http.StatusOK)
	if xpStatus(doc) != "rolled_back" || strings.Join(xpStepStatuses(doc, "rollback-step"), ",") != "succeeded" ||
		strings.Join(xpStepStatuses(doc, "step"), ",") != "compensated,failed,skipped" {
		t.Fatalf("after the rollback: status %s, rollback steps %v, steps %v", xpStatus(doc),
			xpStepStatuses(doc, "rollback-step"), xpStepStatuses(doc, "step"))
	}
	if !strings.Contains(doc.Find("[data-testid=rollback-result]").Text(), "Echo: undo") ||
		!xpHas(xpLogKinds(doc), "rollback.completed") || doc.Find("[data-testid=rollback-button]").Length() != 0 {
		t.Errorf("rollback results or log missing")
	}
}

// Input the planner or the router refuses comes back on the form with the input kept,
// the error next to it, and nothing stored.
func TestExecutionPagesBadInput(t *testing.T) {
	t.Parallel()
	e := xpStart(t)
	post := func(form url.Values, want int) *goquery.Document {
		t.Helper()
		res := e.srv.PostForm(t, e.ann, "/executions/new", form)
		if res.StatusCode != want {
			t.Fatalf("POST %v: got %d, want %d: %s", form, res.StatusCode, want, bodyString(t, res))
		}
		return page(t, res)
	}

	prompt := "call mt__echo message=hi and make it snappy"
	doc := post(url.Values{"mode": {"prompt"}, "prompt": {prompt}}, http.StatusUnprocessableEntity)
	if got := doc.Find("textarea[data-testid=prompt]").Text(); got != prompt {
		t.Errorf("the prompt was not kept: %q", got)
	}
	if doc.Find("[data-testid=execution-input-error]").Length() != 1 || doc.Find("textarea[data-testid=prompt][aria-invalid=true]").Length() != 1 {
		t.Fatalf("no error shown for a prompt the planner does not understand")
	}
	if frag := doc.Find("[data-testid=prompt-fragment] mark").Text(); frag == "" || !strings.Contains(prompt, frag) {
		t.Errorf("the fragment at fault is not marked: %q", frag)
	}

	doc = post(url.Values{"mode": {"prompt"}, "prompt": {"call mt__echo"}}, http.StatusUnprocessableEntity)
	field := doc.Find("[data-testid=execution-field-errors] li[data-path='/steps/0/arguments/message']")
	if field.Length() != 1 || !strings.Contains(field.Text(), "Step 1, argument message") {
		t.Errorf("missing argument: %q", doc.Find("[data-testid=execution-input-error]").Text())
	}

	bad := `{"steps": [{"tool": "mt__echo", "arguments": {"message": "x"}}`
	doc = post(url.Values{"mode": {"plan"}, "plan": {bad}}, http.StatusBadRequest)
	if doc.Find("textarea[data-testid=plan-json]").Text() != bad || doc.Find("details.exec-plan-editor[open]").Length() != 1 ||
		!strings.Contains(doc.Find("[data-testid=execution-input-error]").Text(), "not valid JSON") {
		t.Errorf("malformed plan: %q", doc.Find("[data-testid=execution-input-error]").Text())
	}
	doc = post(url.Values{"mode": {"plan"}, "plan": {`{"steps": [{"tool": "mt__nope"}], "rollback": [{"tool": "lo__echo", "arguments": {}, "undoes": 7}]}`}},
		http.StatusUnprocessableEntity)
	if doc.Find("li[data-path='/steps/0/tool']").Length() != 1 || doc.Find("li[data-path='/rollback/0/undoes']").Length() != 1 {
		t.Errorf("unknown tool and bad undo: %q", doc.Find("[data-testid=execution-input-error]").Text())
	}
	doc = post(url.Values{"mode": {"plan"}, "plan": {`{"stepz": []}`}}, http.StatusBadRequest)
	if !strings.Contains(doc.Find("[data-testid=execution-input-error]").Text(), "stepz") {
		t.Errorf("an unknown field is not named: %q", doc.Find("[data-testid=execution-input-error]").Text())
	}
	post(url.Values{"mode": {"prompt"}, "prompt": {"   "}}, http.StatusUnprocessableEntity)
	if n := e.count(t); n != 0 {
		t.Fatalf("bad input stored %d executions", n)
	}
}

// xpDownPlanner is a planner whose model server does not answer.
type xpDownPlanner struct{}

func (xpDownPlanner) Plan(context.Context, string, []planner.Tool) (planner.Plan, error) {
	return planner.Plan{}, errors.New("planner: the model server at http://127.0.0.1:9 refused the connection")
}
func (xpDownPlanner) Name() string { return "llm:down" }

// A planner that fails is not the person's fault: 502, the form and the prompt kept.
func TestExecutionPagesPlannerDown(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Executions: &executions.Options{Planner: xpDownPlanner{}}})
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	res := srv.PostForm(t, admin, "/executions/new", url.Values{"mode": {"prompt"}, "prompt": {"echo hi"}})
	doc := page(t, res)
	if res.StatusCode != http.StatusBadGateway || doc.Find("textarea[data-testid=prompt]").Text() != "echo hi" ||
		!strings.Contains(doc.Find("[data-testid=execution-input-error]").Text(), "refused the connection") {
		t.Fatalf("planner down: got %d, error %q", res.StatusCode, doc.Find("[data-testid=execution-input-error]").Text())
	}
}

// Unknown and malformed ids are a 404 page, for the page and for its forms.
func TestExecutionPagesNotFound(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	for _, path := range []string{"/executions/" + fakeID, "/executions/not-an-id"} {
		res := srv.Get(t, admin, path)
		doc := page(t, res)
		if res.StatusCode != http.StatusNotFound || doc.Find("[data-testid=execution-page]").Length() != 0 {
			t.Errorf("GET %s: got %d, want 404", path, res.StatusCode)
		}
	}
	for _, what := range []string{"confirm", "reject", "cancel", "rollback"} {
		res := srv.PostForm(t, admin, "/executions/"+fakeID+"/"+what, url.Values{"reason": {"x"}})
		res.Body.Close()
		if res.StatusCode != http.StatusNotFound {
			t.Errorf("POST %s of an unknown execution: got %d, want 404", what, res.StatusCode)
		}
	}
}

var xpCursorRE = regexp.MustCompile(`id="ws-cursor"[^>]*\sdata-last-event-id="(\d+)"`)

// The page follows its execution over the websocket: after a confirm the socket pushes
// fragments that replace the stepper and append log lines, newer than the page's cursor.
// A step's progress sends the stepper and its log line only; every other event sends
// every part.
func TestExecutionPageLiveUpdates(t *testing.T) {
	t.Parallel()
	e := xpStart(t)
	if _, err := e.srv.Tools.SetEnabled(context.Background(), audit.System, []string{e.srv.ToolID(t, "lo__sleep")}, true, "test", false); err != nil {
		t.Fatal(err)
	}
	id := e.createPlan(t, e.ann, `{"steps":[{"tool":"mt__echo","arguments":{"message":"live"}},{"tool":"lo__sleep","arguments":{"ms":250}},{"tool":"lo__add","arguments":{"a":2,"b":3}}]}`)
	doc := e.show(t, e.ann, id, http.StatusOK)
	topic := "execution:" + id
	if !strings.Contains(doc.Find("[ws-connect]").AttrOr("data-topics", ""), topic) {
		t.Fatalf("the page does not follow %s: %q", topic, doc.Find("[ws-connect]").AttrOr("data-topics", ""))
	}
	cursor, _ := strconv.ParseInt(doc.Find("#ws-cursor").AttrOr("data-last-event-id", "0"), 10, 64)

	u, _ := url.Parse(e.srv.URL)
	h := http.Header{}
	var cookies []string
	for _, ck := range e.ann.Jar.Cookies(u) {
		cookies = append(cookies, ck.Name+"="+ck.Value)
	}
	h.Set("Cookie", strings.Join(cookies, "; "))
	h.Set("Origin", e.srv.URL)
	conn, res, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(e.srv.URL, "http")+"/ws", h)
	if err != nil {
		status := 0
		if res != nil {
			status = res.StatusCode
		}
		t.Fatalf("dial /ws: %v (HTTP %d)", err, status)
	}
	defer conn.Close()
	_ = conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if err := conn.WriteJSON(map[string]any{"subscribe": []string{topic}, "last_id": cursor}); err != nil {
		t.Fatal(err)
	}

	ex := e.get(t, id)
	e.decide(t, e.ann, id, "confirm", url.Values{"plan_hash": {ex.Hash()}})

	var sawRunning, sawLog, sawDone, sawProgress bool
	var lastLine string
	deadline := time.Now().Add(30 * time.Second)
	for !sawDone {
		_ = conn.SetReadDeadline(deadline)
		_, msg, err := conn.ReadMessage()
		if err != nil {
			t.Fatalf("read: %v (running %v, log %v)", err, sawRunning, sawLog)
		}
		m := xpCursorRE.FindSubmatch(msg)
		if m == nil {
			t.Fatalf("a fragment without a cursor: %s", msg)
		}
		if id, _ := strconv.ParseInt(string(m[1]), 10, 64); id <= cursor {
			t.Fatalf("the socket replayed event %d, older than the page's cursor %d", id, cursor)
		}
		frag, err := goquery.NewDocumentFromReader(strings.NewReader(string(msg)))
		if err != nil {
			t.Fatal(err)
		}
		stepper := frag.Find("#exec-steps-" + id + "[data-testid=stepper]")
		logs := frag.Find("ol#exec-log-lines-" + id + "[hx-swap-oob=beforeend] [data-testid=log-line]")
		if logs.Length() != 1 {
			t.Fatalf("a fragment without exactly one log line: %s", msg)
		}
		others := frag.Find("#exec-head-"+id).Length() + frag.Find("#exec-approval-"+id).Length() +
			frag.Find("#exec-results-"+id).Length() + frag.Find("#exec-rollback-"+id).Length()
		if logs.AttrOr("data-kind", "") == "tool.output" {
			sawProgress = true
			// Rendered from the database when sent: a step that ended meanwhile shows no
			// progress any more, one still running shows it. The progress is the sleep's
			// (step 2); the next step may be running already when it is rendered.
			running := stepper.Find("[data-testid=step][data-position='1'][data-status=running]").Length() > 0
			if stepper.Length() != 1 || others != 0 || running && !strings.Contains(stepper.Text(), "slept") {
				t.Fatalf("a progress fragment is not the stepper (with its progress) and its log line alone: %s", msg)
			}
		} else if stepper.Length() != 1 || others != 4 {
			t.Fatalf("a fragment without every live part: %s", msg)
		}
		sawLog = true
		lastLine = logs.Text()
		if stepper.Find("[data-testid=step][data-status=running], [data-testid=step][data-status=succeeded]").Length() > 0 {
			sawRunning = true
		}
		if logs.AttrOr("data-kind", "") == "execution.success" {
			sawDone = true
			if got := xpStepStatuses(frag, "step"); strings.Join(got, ",") != "succeeded,succeeded,succeeded" {
				t.Errorf("the last fragment's stepper: %v", got)
			}
			if xpStatus(frag) != "success" || !strings.Contains(frag.Find("#exec-results-"+id).Text(), "Echo: live") {
				t.Errorf("the last fragment's header or results: %s", msg)
			}
		}
	}
	if !sawRunning || !sawProgress || !strings.Contains(lastLine, "every step succeeded") {
		t.Errorf("running seen %v, progress seen %v, last line %q", sawRunning, sawProgress, lastLine)
	}
}

// The requester of a failed plan whose rollback is high-risk, with another approver
// there, reads that the rollback is someone else's instead of being offered a phrase
// the server would refuse from them; the other approver's page offers it.
func TestExecutionPagesRollbackNeedsOther(t *testing.T) {
	t.Parallel()
	e := xpStart(t)
	id := e.createPlan(t, e.ann, `{"steps":[{"tool":"lo__echo","arguments":{"message":"do"}},{"tool":"lo__fail","arguments":{"message":"boom"}}],
		"rollback":[{"tool":"mt__write-note","arguments":{"text":"undo"}}]}`)
	if ex := e.get(t, id); ex.Status == executions.AwaitingApproval {
		e.decide(t, e.admin, id, "confirm", url.Values{"plan_hash": {ex.Hash()}, "phrase": {ex.ConfirmationPhrase}})
	}
	e.wait(t, id, executions.Failed)
	adoc := e.show(t, e.ann, id, http.StatusOK)
	if adoc.Find("[data-testid=rollback-form].danger-zone").Length() != 1 ||
		adoc.Find("[data-testid=execution-page][data-mine][data-rollback-needs-other]").Length() != 1 ||
		!strings.Contains(adoc.Find("[data-testid=rollback-needs-other]").Text(), "another person who may roll") {
		t.Fatalf("ann's page of her failed plan with a high-risk rollback: %q", strings.Join(strings.Fields(adoc.Find("main").Text()), " "))
	}
	doc := e.show(t, e.admin, id, http.StatusOK)
	if doc.Find("[data-testid=execution-page][data-rollback-needs-other]").Length() != 0 || doc.Find("[data-testid=rollback-phrase]").Length() != 1 {
		t.Fatalf("admin's page of ann's failed plan does not offer the rollback's phrase")
	}
	// A wrong phrase for the rollback is refused and audited as refused, as a confirm's is.
	e.decide(t, e.admin, id, "rollback", url.Values{"rollback_hash": {doc.Find("[name=rollback_hash]").AttrOr("value", "")}, "phrase": {"not the phrase"}})
	if got := e.get(t, id).Status; got != executions.Failed {
		t.Fatalf("a wrong rollback phrase changed the execution: %s", got)
	}
	if n := e.srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'execution.approve.refused' AND target_id = $1
		AND payload->>'reason' LIKE '%wrong phrase%'`, id); n != 1 {
		t.Fatalf("refused rollback audit rows: %d, want 1", n)
	}
}
