package security_test

// One test per finding of the attack on the running product (issue #17). Each was
// written to fail on the build the attack was run against.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/everything"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/registry"
)

// panel posts the test panel's form for tool id as a (a session, or a bearer token
// with no session) and returns the status and page.
func panel(t *testing.T, e *env, a webtest.API, id string, form url.Values) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/tools/"+id+"/test", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	c := a.C
	if a.Bearer != "" {
		req.Header.Set("Authorization", "Bearer "+a.Bearer)
		c = e.srv.Client(t)
	} else {
		req.Header.Set("Origin", e.srv.URL)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body)
}

// ran counts the calls of tool id that ran (their audit row written before they run).
func (e *env) ran(id string) int {
	e.t.Helper()
	e.flush()
	return e.count(`SELECT count(*) FROM audit_log WHERE action = 'tool.call' AND target_id = $1`, id)
}

// Finding 1: an API token's form fields approve nothing in the test panel: the HIGH
// phrase and the MEDIUM confirm it sends are ignored, the call is refused as needing
// approval; a person's session with the same confirm runs it.
func TestFinding01TokenApprovesNothingInTheTestPanel(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	e.srv.LiveServer(t, "mt", false, "echo", "write-note")
	high, medium := e.srv.ToolID(t, "mt__write-note"), e.srv.ToolID(t, "mt__echo")
	admin := e.people[auth.RoleAdmin]

	_, page := panel(t, e, admin.token, high, url.Values{"mode": {"json"}, "arguments_json": {`{"text":"x"}`}, "phrase": {"mt__write-note"}})
	if !strings.Contains(page, "API token cannot confirm") {
		t.Errorf("HIGH run with a token's phrase: the page does not say a token cannot confirm")
	}
	_, page = panel(t, e, admin.token, medium, url.Values{"mode": {"json"}, "arguments_json": {`{"message":"x"}`}, "confirm": {"1"}})
	if !strings.Contains(page, "API token cannot confirm") {
		t.Errorf("MEDIUM run with a token's confirm: the page does not say a token cannot confirm")
	}
	if n := e.ran(high) + e.ran(medium); n != 0 {
		t.Fatalf("a token's form fields ran %d risky calls, want 0", n)
	}
	if n := e.count(`SELECT count(*) FROM audit_log WHERE action = 'tool.call.refused' AND result = 'denied'
		AND payload->>'code' = 'approval_required' AND actor_kind = 'token'`); n != 2 {
		t.Errorf("refused token calls audited as denied: got %d, want 2", n)
	}
	// The same confirm from a person's session runs the MEDIUM call.
	panel(t, e, admin.session, medium, url.Values{"mode": {"json"}, "arguments_json": {`{"message":"x"}`}, "confirm": {"1"}})
	waitFor(t, 10*time.Second, func() bool { return e.ran(medium) == 1 }, "a person's confirm did not run the MEDIUM call")
}

// Finding 2: a HIGH plan needs another approver than its requester whenever another
// active person could approve; the test panel follows the same rule and offers to ask
// for approval; a single-person installation still works, its self-approvals marked.
func TestFinding02SeparationOfDuties(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	e.srv.LiveServer(t, "mt", false, "write-note")
	tu, admin := e.people[auth.RoleToolUser], e.people[auth.RoleAdmin]
	ex := create(t, tu.session, plan(step("mt__write-note", map[string]any{"text": "x"})))
	if ex.Risk != "high" {
		t.Fatalf("risk %s, want high", ex.Risk)
	}
	e1 := expect(t, tu.session, http.MethodPost, "/api/v1/executions/"+ex.ID+"/confirm", map[string]any{"phrase": ex.ConfirmationPhrase}, 403, "forbidden")
	if !strings.Contains(e1.Error.Message, "different person") {
		t.Errorf("self-approval refusal says %q", e1.Error.Message)
	}
	var ok execution
	admin.session.JSON(http.MethodPost, "/api/v1/executions/"+ex.ID+"/confirm", map[string]any{"phrase": ex.ConfirmationPhrase}, 200, &ok)
	if ok.SelfApproved {
		t.Error("another person's approval is marked self-approved")
	}
	waitStatus(t, admin.session, ex.ID, "success")

	// The test panel: the phrase typed by a user who is not alone runs nothing, and the
	// workspace offers to ask for approval instead, which makes a plan awaiting it.
	id := e.srv.ToolID(t, "mt__write-note")
	_, page := panel(t, e, tu.session, id, url.Values{"mode": {"json"}, "arguments_json": {`{"text":"y"}`}, "phrase": {"mt__write-note"}})
	if !strings.Contains(page, "different person") {
		t.Error("the test panel did not refuse the requester's own HIGH run")
	}
	if n := e.ran(id); n != 1 { // the one admin approved above
		t.Fatalf("tool ran %d times, want only the approved plan's run", n)
	}
	doc := e.srv.Get(t, tu.session.C, "/tools/"+id+"/test")
	body, _ := io.ReadAll(doc.Body)
	doc.Body.Close()
	if !strings.Contains(string(body), `data-testid="request-approval"`) {
		t.Fatal("the test panel does not offer to ask for approval")
	}
	res := e.srv.PostForm(t, tu.session.C, "/tools/"+id+"/test", url.Values{"mode": {"json"}, "arguments_json": {`{"text":"z"}`}, "_action": {"request"}})
	res.Body.Close()
	loc := res.Header.Get("Location")
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/executions/") {
		t.Fatalf("ask for approval: got %d to %q, want 303 to the new execution", res.StatusCode, loc)
	}
	var asked execution
	tu.session.JSON(http.MethodGet, "/api/v1"+loc, nil, 200, &asked)
	if asked.Status != "awaiting_approval" || asked.Risk != "high" {
		t.Errorf("asked for approval: got %s %s, want a high plan awaiting approval", asked.Status, asked.Risk)
	}

	// Vetting a tool nobody can call yet (validated, not enabled) is a test run its
	// tester may make alone: it is how the tool gets verified. Marked as such.
	fail := e.srv.ToolID(t, "mt__fail")
	panel(t, e, admin.session, fail, url.Values{"mode": {"json"}, "arguments_json": {`{"message":"x"}`}, "phrase": {"mt__fail"}})
	waitFor(t, 10*time.Second, func() bool {
		return e.count(`SELECT count(*) FROM audit_log WHERE action = 'tool.call' AND target_id = $1
			AND payload->>'vetting' = 'true' AND payload->>'self_approved' = 'true'`, fail) == 1
	}, "the vetting run of a HIGH tool not enabled yet did not run, or is not marked")

	// Alone, the administrator may approve their own HIGH plan and run it in the test
	// panel; both are marked self-approved in the audit log.
	solo := start(t, nil)
	solo.srv.LiveServer(t, "mt", false, "write-note")
	for _, r := range []auth.Role{auth.RoleToolManager, auth.RoleToolUser} {
		solo.exec(`UPDATE users SET disabled_at = now() WHERE id = $1`, solo.people[r].id)
	}
	me := solo.people[auth.RoleAdmin]
	own := create(t, me.session, plan(step("mt__write-note", map[string]any{"text": "x"})))
	me.session.JSON(http.MethodPost, "/api/v1/executions/"+own.ID+"/confirm", map[string]any{"phrase": own.ConfirmationPhrase}, 200, &ok)
	if !ok.SelfApproved {
		t.Error("a single person's own approval is not marked self-approved")
	}
	sid := solo.srv.ToolID(t, "mt__write-note")
	panel(t, solo, me.session, sid, url.Values{"mode": {"json"}, "arguments_json": {`{"text":"x"}`}, "phrase": {"mt__write-note"}})
	waitFor(t, 10*time.Second, func() bool {
		return solo.count(`SELECT count(*) FROM audit_log WHERE action = 'tool.call' AND target_id = $1 AND payload->>'self_approved' = 'true'
			AND payload->>'approval' = 'phrase'`, sid) == 1
	}, "the single person's own test-panel run is not audited as self-approved")
	// "always" refuses even them.
	me.session.JSON(http.MethodPut, "/api/v1/executions/settings", map[string]any{"approval_ttl_seconds": 3600, "high_separation": "always"}, 200, nil)
	again := create(t, me.session, plan(step("mt__write-note", map[string]any{"text": "x"})))
	expect(t, me.session, http.MethodPost, "/api/v1/executions/"+again.ID+"/confirm", map[string]any{"phrase": again.ConfirmationPhrase}, 403, "forbidden")
}

// Finding 3: the approval is bound to what runs. Arguments edited in the database
// while a plan waits, or after approval before a later step, are refused and audited
// as plan_hash_mismatch; so is a change of a server's connection settings.
func TestFinding03ApprovalBoundToWhatRuns(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	e.srv.LiveServer(t, "mt", false, "echo", "sleep")
	e.srv.LiveServer(t, "ot", false, "echo")
	tu, admin := e.people[auth.RoleToolUser], e.people[auth.RoleAdmin]
	echoID := e.srv.ToolID(t, "mt__echo")

	// (a) Edited while it waits, confirmed with the hash that was shown.
	ex := create(t, tu.session, plan(step("mt__echo", map[string]any{"message": "approved"})))
	e.exec(`UPDATE tool_calls SET arguments = '{"message":"tampered"}' WHERE execution_id = $1`, ex.ID)
	got := expect(t, admin.session, http.MethodPost, "/api/v1/executions/"+ex.ID+"/confirm", map[string]any{"plan_hash": ex.PlanHash}, 409, "stale_plan")
	if !strings.Contains(got.Error.Message, "arguments are not the ones that were approved") {
		t.Errorf("refusal says %q", got.Error.Message)
	}
	if n := e.count(`SELECT count(*) FROM audit_log WHERE action = 'execution.plan_hash_mismatch' AND target_id = $1`, ex.ID); n != 1 {
		t.Errorf("plan_hash_mismatch audit rows: got %d, want 1", n)
	}
	if n := e.ran(echoID); n != 0 {
		t.Fatalf("the tampered plan ran %d calls", n)
	}

	// (b) Edited after approval, while an earlier step runs.
	ex = e.running(tu.session, admin.session, step("mt__echo", map[string]any{"message": "approved"}))
	e.exec(`UPDATE tool_calls SET arguments = '{"message":"tampered"}' WHERE execution_id = $1 AND position = 1`, ex.ID)
	failed := waitStatus(t, admin.session, ex.ID, "failed")
	if !strings.Contains(failed.Error, "step 2 (mt__echo) was not run") || failed.Steps[1].Status != "skipped" {
		t.Errorf("failed with %q, steps %+v", failed.Error, failed.Steps)
	}
	if n := e.count(`SELECT count(*) FROM audit_log WHERE action = 'execution.plan_hash_mismatch' AND target_id = $1`, ex.ID); n != 1 {
		t.Errorf("plan_hash_mismatch audit rows after approval: got %d, want 1", n)
	}

	// (c) A server's connection settings (here its credentials) changed after approval.
	ex = e.running(tu.session, admin.session, step("ot__echo", map[string]any{"message": "hi"}))
	s, err := e.srv.Registry.GetServerByName(context.Background(), "ot")
	if err != nil {
		t.Fatal(err)
	}
	admin.session.JSON(http.MethodPatch, "/api/v1/servers/"+s.ID, map[string]any{"headers": map[string]string{"X-Api-Key": "another-key-0123456789"}}, 200, nil)
	failed = waitStatus(t, admin.session, ex.ID, "failed")
	if !strings.Contains(failed.Error, "connection settings of server ot") {
		t.Errorf("failed with %q, want the changed connection named", failed.Error)
	}
	if n := e.ran(e.srv.ToolID(t, "ot__echo")); n != 0 {
		t.Errorf("the server whose connection changed was called %d times", n)
	}
}

// Finding 4: a plan whose requester was disabled, demoted or whose token was revoked
// does not run: at approval it is cancelled, between steps it fails.
func TestFinding04RequesterChecked(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	e.srv.LiveServer(t, "mt", false, "echo", "sleep")
	admin := e.people[auth.RoleAdmin]
	echoID := e.srv.ToolID(t, "mt__echo")
	for _, tc := range []struct {
		name   string
		change func(p *person)
		as     func(p *person) webtest.API
	}{
		{"disabled", func(p *person) {
			admin.session.JSON(http.MethodPatch, "/api/v1/users/"+p.id, map[string]any{"disabled": true}, 200, nil)
		}, func(p *person) webtest.API { return p.session }},
		{"demoted", func(p *person) {
			admin.session.JSON(http.MethodPatch, "/api/v1/users/"+p.id, map[string]any{"role": "guest"}, 200, nil)
		}, func(p *person) webtest.API { return p.session }},
		{"token revoked", func(p *person) {
			e.exec(`UPDATE api_tokens SET revoked_at = now() WHERE user_id = $1`, p.id)
		}, func(p *person) webtest.API { return p.token }},
	} {
		p := e.user("req-"+strings.ReplaceAll(tc.name, " ", "-"), auth.RoleToolUser)
		ex := create(t, tc.as(p), plan(step("mt__echo", map[string]any{"message": tc.name})))
		tc.change(p)
		expect(t, admin.session, http.MethodPost, "/api/v1/executions/"+ex.ID+"/confirm", map[string]any{}, 409, "stale_plan")
		var got execution
		admin.session.JSON(http.MethodGet, "/api/v1/executions/"+ex.ID, nil, 200, &got)
		if got.Status != "cancelled" {
			t.Errorf("%s: got %s, want cancelled", tc.name, got.Status)
		}
		if n := e.count(`SELECT count(*) FROM audit_log WHERE action = 'execution.requester_gone' AND target_id = $1`, ex.ID); n != 1 {
			t.Errorf("%s: requester_gone audit rows: got %d, want 1", tc.name, n)
		}
	}
	if n := e.ran(echoID); n != 0 {
		t.Fatalf("plans of requesters who can no longer act ran %d calls", n)
	}

	// Disabled while its first step runs: the second does not run.
	p := e.user("req-midway", auth.RoleToolUser)
	ex := e.running(p.session, admin.session, step("mt__echo", map[string]any{"message": "later"}))
	admin.session.JSON(http.MethodPatch, "/api/v1/users/"+p.id, map[string]any{"disabled": true}, 200, nil)
	failed := waitStatus(t, admin.session, ex.ID, "failed")
	if !strings.Contains(failed.Error, "can no longer act") || failed.Steps[1].Status != "skipped" {
		t.Errorf("failed with %q, steps %+v", failed.Error, failed.Steps)
	}
	if n := e.ran(echoID); n != 0 {
		t.Errorf("the disabled requester's second step ran")
	}
}

// Finding 5: trust decides risk, so only administrators mark a server trusted.
func TestFinding05OnlyAdminsTrust(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	e.srv.LiveServer(t, "mt", false, "echo")
	tm, admin := e.people[auth.RoleToolManager], e.people[auth.RoleAdmin]
	s, err := e.srv.Registry.GetServerByName(context.Background(), "mt")
	if err != nil {
		t.Fatal(err)
	}
	riskOf := func() string {
		var tl struct{ Risk string }
		admin.session.JSON(http.MethodGet, "/api/v1/tools/"+e.srv.ToolID(t, "mt__echo"), nil, 200, &tl)
		return tl.Risk
	}
	if r := riskOf(); r != "medium" {
		t.Fatalf("read-only tool of an untrusted server: risk %s, want medium", r)
	}
	for _, a := range []webtest.API{tm.session, tm.token} {
		expect(t, a, http.MethodPatch, "/api/v1/servers/"+s.ID, map[string]any{"trusted": true}, 403, "forbidden")
		expect(t, a, http.MethodPost, "/api/v1/servers", map[string]any{"name": "new-one", "type": "streamable_http",
			"url": "http://127.0.0.1:1/mcp", "trusted": true, "enabled": false}, 403, "forbidden")
	}
	// The edit form: the box is locked for them, and a crafted form is refused.
	res := e.srv.Get(t, tm.session.C, "/servers/"+s.ID+"/edit")
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(body), `data-testid="trust-locked"`) {
		t.Error("the edit form does not say trust is for administrators")
	}
	res = e.srv.PostForm(t, tm.session.C, "/servers/"+s.ID, url.Values{"name": {"mt"}, "type": {"streamable_http"}, "url": {s.URL},
		"enabled": {"true"}, "trusted": {"true"}, "auth_type": {"none"}})
	res.Body.Close()
	if res.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("a crafted form marking the server trusted: got %d, want 422", res.StatusCode)
	}
	// An import that marks a server trusted is refused, applied for real.
	status, raw := tm.session.Do(http.MethodPost, "/api/v1/servers/import?filename=s.yaml",
		"version: 1\nservers:\n  - name: mt\n    type: streamable_http\n    url: "+s.URL+"\n    trusted: true\n")
	if status != http.StatusForbidden || !strings.Contains(string(raw), "trusted") {
		t.Errorf("an import marking the server trusted: got %d %s, want 403 naming trust", status, raw)
	}
	if r := riskOf(); r != "medium" {
		t.Fatalf("after a tool manager's attempts: risk %s, want medium", r)
	}
	if n := e.count(`SELECT count(*) FROM mcp_servers WHERE trusted`); n != 0 {
		t.Fatalf("%d servers became trusted", n)
	}
	admin.session.JSON(http.MethodPatch, "/api/v1/servers/"+s.ID, map[string]any{"trusted": true}, 200, nil)
	waitFor(t, 5*time.Second, func() bool { return riskOf() == "low" }, "an administrator's trust did not lower the risk")
	// Once trusted, what the server is stays an administrator's to change: a tool manager
	// cannot point it elsewhere (or give it other credentials) and keep the trust.
	for _, patch := range []map[string]any{{"url": "http://127.0.0.1:1/mcp"}, {"headers": map[string]string{"X-Api-Key": "attacker-key-0123456789"}}} {
		expect(t, tm.session, http.MethodPatch, "/api/v1/servers/"+s.ID, patch, 403, "forbidden")
	}
	if got, err := e.srv.Registry.GetServer(context.Background(), s.ID); err != nil || got.URL != s.URL || len(got.HeaderNames) != 0 {
		t.Fatalf("a tool manager changed the trusted server: %+v, %v", got, err)
	}
	// Their other edits still work.
	tm.session.JSON(http.MethodPatch, "/api/v1/servers/"+s.ID, map[string]any{"description": "ours"}, 200, nil)
}

// Finding 6: a token cannot roll back, whatever the risk of the undo steps.
func TestFinding06TokenCannotRollBack(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	e.srv.LiveServer(t, "lo", true, "fail")
	e.srv.LiveServer(t, "mt", false, "echo")
	tu, admin := e.people[auth.RoleToolUser], e.people[auth.RoleAdmin]
	ex := create(t, tu.session, map[string]any{"plan": map[string]any{
		"steps":    []any{step("mt__echo", map[string]any{"message": "do"}), step("lo__fail", map[string]any{"message": "boom"})},
		"rollback": []any{step("mt__echo", map[string]any{"message": "undo"})},
	}})
	admin.session.JSON(http.MethodPost, "/api/v1/executions/"+ex.ID+"/confirm", map[string]any{"phrase": ex.ConfirmationPhrase}, 200, nil)
	waitStatus(t, admin.session, ex.ID, "failed")
	var rp struct{ Risk string }
	tu.session.JSON(http.MethodGet, "/api/v1/executions/"+ex.ID+"/rollback", nil, 200, &rp)
	if rp.Risk != "medium" {
		t.Fatalf("rollback risk %s, want medium", rp.Risk)
	}
	for _, a := range []webtest.API{tu.token, admin.token} {
		expect(t, a, http.MethodPost, "/api/v1/executions/"+ex.ID+"/rollback", map[string]any{"confirm": true}, 403, "forbidden")
	}
	if got := waitStatus(t, admin.session, ex.ID, "failed"); got.Status != "failed" {
		t.Fatal("a token's rollback changed the execution")
	}
	tu.session.JSON(http.MethodPost, "/api/v1/executions/"+ex.ID+"/rollback", map[string]any{"confirm": true}, 200, nil)
	waitStatus(t, admin.session, ex.ID, "rolled_back")
}

// login posts the sign-in form from address ip (through the trusted proxy when the
// server has one) and returns the status.
func login(t *testing.T, srv *webtest.Server, user, pw, ip string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/login", strings.NewReader(url.Values{"username": {user}, "password": {pw}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", srv.URL)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("X-Forwarded-For", ip)
	res, err := srv.Client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// Finding 7: an attacker's failed sign-ins slow the attacker's address, not the
// account's owner; X-Forwarded-For names the client only behind a trusted proxy.
func TestFinding07NoLockout(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	for i := range 6 {
		if got := login(t, srv, "admin", "wrong guess", "198.51.100.7"); i < 5 && got != http.StatusUnauthorized && got != http.StatusOK {
			t.Fatalf("guess %d: got %d", i+1, got)
		}
	}
	if got := login(t, srv, "admin", webtest.AdminPassword, "198.51.100.7"); got != http.StatusTooManyRequests {
		t.Errorf("the attacker's address with the right password: got %d, want 429", got)
	}
	if got := login(t, srv, "admin", webtest.AdminPassword, "203.0.113.5"); got != http.StatusSeeOther {
		t.Errorf("the owner from their own address: got %d, want 303 (signed in)", got)
	}
	if n := countOn(t, srv, `SELECT count(*) FROM login_failures WHERE ip = '198.51.100.7'`); n < 5 {
		t.Errorf("failures recorded for the attacker's address: got %d, want at least 5", n)
	}
	// Without a trusted proxy, X-Forwarded-For is the client's to write, so it is not
	// believed: every request is from the peer, and the guesses slow that peer.
	direct := webtest.Start(t, nil)
	for range 5 {
		login(t, direct, "admin", "wrong guess", "198.51.100.7")
	}
	if got := login(t, direct, "admin", webtest.AdminPassword, "203.0.113.5"); got != http.StatusTooManyRequests {
		t.Errorf("a forged X-Forwarded-For without a trusted proxy: got %d, want 429 (the peer's address is throttled)", got)
	}
}

func countOn(t *testing.T, srv *webtest.Server, q string) int {
	t.Helper()
	return testkit.Count(t, srv.Pool, q)
}

// Finding 8: NUL bytes and invalid UTF-8 are bad input: 400 naming the field, and
// nothing is stored.
func TestFinding08BadText(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	e.srv.LiveServer(t, "mt", false, "echo")
	admin := e.people[auth.RoleAdmin]
	ex := create(t, e.people[auth.RoleToolUser].session, plan(step("mt__echo", map[string]any{"message": "x"})))
	tokens := e.count(`SELECT count(*) FROM api_tokens`)
	for _, tc := range []struct {
		name, method, path string
		body               any
		field              string
	}{
		{"list q with NUL", http.MethodGet, "/api/v1/tools?q=a%00b", nil, "q"},
		{"list category not UTF-8", http.MethodGet, "/api/v1/tools?category=%ff%fe", nil, "category"},
		{"token name with NUL", http.MethodPost, "/api/v1/tokens", `{"name":"bad\u0000name"}`, "/name"},
		{"token name not UTF-8", http.MethodPost, "/api/v1/tokens", "{\"name\":\"bad\xffname\"}", "/name"},
		{"reject reason with NUL", http.MethodPost, "/api/v1/executions/" + ex.ID + "/reject", `{"reason":"no\u0000"}`, "/reason"},
		{"reject reason lone surrogate", http.MethodPost, "/api/v1/executions/" + ex.ID + "/reject", `{"reason":"no\ud800"}`, "/reason"},
		{"tool arguments with NUL", http.MethodPost, "/api/v1/tools/call", `{"tool":"mt__echo","arguments":{"message":"\u0000"}}`, "/arguments/message"},
		{"path parameter with NUL", http.MethodGet, "/api/v1/tools/a%00b", nil, "id"},
	} {
		got := expect(t, admin.session, tc.method, tc.path, tc.body, 400, "invalid_input")
		if !strings.Contains(string(got.Error.Details), `"path":"`+tc.field+`"`) {
			t.Errorf("%s: details %s do not name %s", tc.name, got.Error.Details, tc.field)
		}
	}
	// The sign-in form.
	for _, u := range []string{"adm\x00in", "adm\xffin"} {
		res := e.srv.PostForm(t, e.srv.Client(t), "/login", url.Values{"username": {u}, "password": {"x"}})
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest {
			t.Errorf("sign-in as %q: got %d, want 400", u, res.StatusCode)
		}
	}
	if n := e.count(`SELECT count(*) FROM api_tokens`); n != tokens {
		t.Errorf("bad input created %d tokens", n-tokens)
	}
	var still execution
	admin.session.JSON(http.MethodGet, "/api/v1/executions/"+ex.ID, nil, 200, &still)
	if still.Status != "awaiting_approval" {
		t.Errorf("a refused rejection changed the plan to %s", still.Status)
	}
}

// Finding 9: refused requests leave a trace: 403s of guests, auditors and tool users
// are audited as denied, rate-limited per actor (what is held back is counted).
func TestFinding09DeniedAudited(t *testing.T) {
	t.Parallel()
	e := start(t, &webtest.Options{Denials: &audit.DenialOptions{PerActor: 60}})
	e.srv.LiveServer(t, "mt", false, "echo")
	id := e.srv.ToolID(t, "mt__echo")
	for _, tc := range []struct {
		who          *person
		method, path string
		body         any
	}{
		{e.people[auth.RoleGuest], http.MethodGet, "/api/v1/users", nil},
		{e.people[auth.RoleAuditor], http.MethodPost, "/api/v1/servers", map[string]any{"name": "x", "type": "sse", "url": "http://127.0.0.1:1/sse"}},
		{e.people[auth.RoleToolUser], http.MethodPatch, "/api/v1/tools/" + id, map[string]any{"risk": "low"}},
	} {
		for _, a := range []webtest.API{tc.who.session, tc.who.token} {
			expect(t, a, tc.method, tc.path, tc.body, 403, "forbidden")
		}
		if n := e.count(`SELECT count(*) FROM audit_log WHERE action = 'request.denied' AND result = 'denied' AND actor_id = $1
			AND payload->>'path' = $2`, tc.who.id, strings.SplitN(tc.path, "?", 2)[0]); n != 2 {
			t.Errorf("%s %s by %s: %d denied entries, want 2 (session and token)", tc.method, tc.path, tc.who.name, n)
		}
	}
	// A page refused to a guest, too.
	guest := e.people[auth.RoleGuest]
	res := e.srv.Get(t, guest.session.C, "/users")
	res.Body.Close()
	if n := e.count(`SELECT count(*) FROM audit_log WHERE action = 'request.denied' AND actor_id = $1 AND payload->>'path' = '/users'`, guest.id); n != 1 {
		t.Errorf("page refused to a guest: %d denied entries, want 1", n)
	}
	// A token that is not one.
	expect(t, webtest.API{T: t, Srv: e.srv, Bearer: "tw_not-a-token"}, http.MethodGet, "/api/v1/tools", nil, 401, "unauthenticated")
	if n := e.count(`SELECT count(*) FROM audit_log WHERE action = 'request.denied' AND actor_kind = 'anonymous' AND payload->>'status' = '401'`); n != 1 {
		t.Errorf("unknown token: %d denied entries, want 1", n)
	}
	// A flood: the actor's entries stop at the limit, and the next entry written counts
	// the ones held back.
	aud := e.people[auth.RoleAuditor]
	before := e.count(`SELECT count(*) FROM audit_log WHERE action = 'request.denied' AND actor_id = $1`, aud.id)
	for range 100 {
		aud.session.Do(http.MethodGet, "/api/v1/users", nil)
	}
	written := e.count(`SELECT count(*) FROM audit_log WHERE action = 'request.denied' AND actor_id = $1`, aud.id) - before
	if written >= 100 || written < 50 {
		t.Fatalf("100 refusals wrote %d entries, want the per-actor limit (about 58)", written)
	}
	time.Sleep(1100 * time.Millisecond) // one entry's worth of the limit comes back each second
	aud.session.Do(http.MethodGet, "/api/v1/users", nil)
	// Every refusal is an entry or is counted by a later one (a slow flood may have got
	// an entry's worth back midway, whose entry counts those held back till then).
	total := e.count(`SELECT count(*) FROM audit_log WHERE action = 'request.denied' AND actor_id = $1`, aud.id) - before
	if held := e.count(`SELECT coalesce(sum((payload->>'withheld_before')::int), 0) FROM audit_log WHERE action = 'request.denied'
		AND actor_id = $1`, aud.id); total+held != 101 || held == 0 {
		t.Errorf("101 refusals: %d entries and %d counted as held back, want 101 in all", total, held)
	}
}

// A refused request's method is the caller's to choose, of any length (Go's server
// takes any token up to its header limit): the append-only log keeps a bounded one,
// as it does the path, since the denial limits count entries, not bytes.
func TestDeniedHugeMethodBounded(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	method := "X" + strings.Repeat("M", 100<<10)
	expect(t, webtest.API{T: t, Srv: srv, Bearer: "tw_not-a-token"}, method, "/api/v1/tools", nil, 401, "unauthenticated")
	var n, id, payload int
	if err := srv.Pool.QueryRow(context.Background(), `SELECT count(*), coalesce(max(octet_length(target_id)), 0),
		coalesce(max(octet_length(payload::text)), 0) FROM audit_log WHERE action = 'request.denied'`).Scan(&n, &id, &payload); err != nil {
		t.Fatal(err)
	}
	if n != 1 || id >= 400 || payload >= 1000 {
		t.Fatalf("a 100 KB method with a bad token: %d request.denied entries, target_id %d bytes, payload %d bytes; want 1, under 400 and 1000",
			n, id, payload)
	}
}

// Finding 10: a configured secret an upstream echoes back is masked in the API's
// result, the usage log, the events and an execution's results; so is a server's
// environment printed by the tool.
func TestFinding10SecretsMasked(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	const canary = "sk-canary-0123456789abcdefXYZ"    // the server's environment
	const toolCanary = "sk-toolsecret-98765432zyxwvu" // a tool's configured secret parameter
	cmd, args := everything.StdioCommand(t)
	e.srv.RegisterServer(t, registry.Spec{Name: "ev", Type: registry.TypeStdio, Command: cmd, Args: args, Enabled: true, Trusted: true,
		Env: map[string]string{"SERVICE_API_KEY": canary}}, "get-env", "echo")
	admin := e.people[auth.RoleAdmin]
	// A tool's configured secret: the echo tool's message, fixed to another canary.
	admin.session.JSON(http.MethodPatch, "/api/v1/tools/"+e.srv.ToolID(t, "ev__echo"),
		map[string]any{"configuration": map[string]any{"fixed": map[string]any{"message": toolCanary}}, "reason": "test"}, 200, nil)
	for _, tool := range []string{"ev__get-env", "ev__echo"} {
		status, raw := admin.token.Do(http.MethodPost, "/api/v1/tools/call", map[string]any{"tool": tool, "arguments": map[string]any{}})
		if status != http.StatusOK {
			t.Fatalf("%s: got %d %s", tool, status, raw)
		}
		if strings.Contains(string(raw), canary) || strings.Contains(string(raw), toolCanary) || !strings.Contains(string(raw), "***") {
			t.Errorf("%s: the API's result shows a secret (or masks nothing): %.300s", tool, raw)
		}
	}
	ex := create(t, admin.session, plan(step("ev__get-env", map[string]any{}), step("ev__echo", map[string]any{})))
	done := waitStatus(t, admin.session, ex.ID, "success")
	e.flush()
	raw, _ := json.Marshal(done)
	for _, secret := range []string{canary, toolCanary} {
		for where, n := range map[string]int{
			"an execution's results": strings.Count(string(raw), secret),
			"the usage log":          e.count(`SELECT count(*) FROM tool_usage_logs WHERE response::text LIKE '%' || $1 || '%'`, secret),
			"the events":             e.count(`SELECT count(*) FROM events WHERE payload::text LIKE '%' || $1 || '%'`, secret),
			"the audit log":          e.count(`SELECT count(*) FROM audit_log WHERE payload::text LIKE '%' || $1 || '%'`, secret),
			"the server's log":       strings.Count(e.srv.Logs.String(), secret),
		} {
			if n != 0 {
				t.Errorf("%s shows the secret %.14s… %d times", where, secret, n)
			}
		}
	}
	if !strings.Contains(string(raw), "***") {
		t.Error("an execution's results mask nothing")
	}
}

// Finding 3, further: the approval also covers arguments the approver sees masked (a
// secret parameter's value), the plan's own undo steps, a rewrite of the plan together
// with its hashes (the seal), and the tools' risk; and a server reconnecting is not a
// change of what was approved.
func TestFinding03MoreWays(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	e.srv.LiveServer(t, "mt", false, "echo", "sleep", "fail")
	e.srv.LiveServer(t, "lo", true, "echo", "sleep")
	tu, admin := e.people[auth.RoleToolUser], e.people[auth.RoleAdmin]
	ctx := context.Background()
	mismatches := func(id string) int {
		return e.count(`SELECT count(*) FROM audit_log WHERE action = 'execution.plan_hash_mismatch' AND target_id = $1`, id)
	}

	// A secret default: the approver sees the caller's value masked, the hash still covers it.
	admin.session.JSON(http.MethodPatch, "/api/v1/tools/"+e.srv.ToolID(t, "mt__echo"),
		map[string]any{"configuration": map[string]any{"defaults": map[string]any{"message": "sk-default-secret-0123456789"}}, "reason": "test"}, 200, nil)
	ex := create(t, tu.session, plan(step("mt__echo", map[string]any{"message": "approved"})))
	e.exec(`UPDATE tool_calls SET arguments = '{"message":"tampered"}' WHERE execution_id = $1`, ex.ID)
	expect(t, admin.session, http.MethodPost, "/api/v1/executions/"+ex.ID+"/confirm", map[string]any{"plan_hash": ex.PlanHash}, 409, "stale_plan")
	if mismatches(ex.ID) != 1 {
		t.Errorf("tampered argument of a secret parameter: not audited as plan_hash_mismatch")
	}

	// The plan's own undo step, edited in the stored plan after approval.
	ex = create(t, tu.session, map[string]any{"plan": map[string]any{
		"steps":    []any{step("lo__echo", map[string]any{"message": "do"}), step("mt__fail", map[string]any{"message": "boom"})},
		"rollback": []any{step("lo__echo", map[string]any{"message": "undo"})},
	}})
	admin.session.JSON(http.MethodPost, "/api/v1/executions/"+ex.ID+"/confirm", map[string]any{"phrase": ex.ConfirmationPhrase}, 200, nil)
	waitStatus(t, admin.session, ex.ID, "failed")
	e.exec(`UPDATE executions SET plan = jsonb_set(plan, '{rollback,0,arguments,message}', '"tampered"') WHERE id = $1`, ex.ID)
	expect(t, tu.session, http.MethodPost, "/api/v1/executions/"+ex.ID+"/rollback", map[string]any{}, 409, "stale_plan")
	if n := e.count(`SELECT count(*) FROM tool_calls WHERE execution_id = $1 AND phase = 'rollback'`, ex.ID); n != 0 {
		t.Errorf("the altered plan's rollback was started (%d steps)", n)
	}

	// The plan and its hashes rewritten together: the seal, keyed by the secret key the
	// database does not hold, gives it away.
	var stored executions.Plan
	ex = create(t, tu.session, plan(step("mt__echo", map[string]any{"message": "approved"})))
	if err := e.srv.Pool.QueryRow(ctx, `SELECT plan FROM executions WHERE id = $1`, ex.ID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	stored.Steps[0].Arguments = json.RawMessage(`{"message":"tampered"}`)
	stored.Steps[0].Effective = json.RawMessage(`{"message":"tampered"}`)
	forged, err := stored.Hash()
	if err != nil {
		t.Fatal(err)
	}
	e.exec(`UPDATE executions SET plan = $2, plan_hash = $3 WHERE id = $1`, ex.ID, stored, forged)
	e.exec(`UPDATE tool_calls SET arguments = '{"message":"tampered"}' WHERE execution_id = $1`, ex.ID)
	got := expect(t, admin.session, http.MethodPost, "/api/v1/executions/"+ex.ID+"/confirm", map[string]any{}, 409, "stale_plan")
	if !strings.Contains(got.Error.Message, "seal") || mismatches(ex.ID) != 1 {
		t.Errorf("a consistent rewrite: got %q, %d mismatch rows; want the seal named and audited", got.Error.Message, mismatches(ex.ID))
	}

	// A risk that rose after approval: the LOW plan's next step is MEDIUM now.
	lo, err := e.srv.Registry.GetServerByName(ctx, "lo")
	if err != nil {
		t.Fatal(err)
	}
	ex = create(t, tu.session, plan(step("lo__sleep", map[string]any{"ms": 1500}), step("lo__echo", map[string]any{"message": "later"})))
	waitFor(t, 10*time.Second, func() bool {
		return e.count(`SELECT count(*) FROM tool_calls WHERE execution_id = $1 AND position = 0 AND status = 'running'`, ex.ID) == 1
	}, "the first step never ran")
	admin.session.JSON(http.MethodPatch, "/api/v1/servers/"+lo.ID, map[string]any{"trusted": false}, 200, nil)
	failed := waitStatus(t, admin.session, ex.ID, "failed")
	if !strings.Contains(failed.Error, "medium risk now, low when the plan was made") {
		t.Errorf("risk rose: failed with %q", failed.Error)
	}

	// A reconnect while a plan waits changes nothing that was approved.
	mt, err := e.srv.Registry.GetServerByName(ctx, "mt")
	if err != nil {
		t.Fatal(err)
	}
	admin.session.JSON(http.MethodPatch, "/api/v1/tools/"+e.srv.ToolID(t, "mt__echo"),
		map[string]any{"configuration": map[string]any{}, "reason": "test"}, 200, nil)
	for i := range 5 {
		ex = create(t, tu.session, plan(step("mt__sleep", map[string]any{"ms": 1})))
		done := make(chan error, 1)
		go func() { done <- e.srv.MCP.Reconnect(ctx, mt.ID) }()
		status, raw := admin.session.Do(http.MethodPost, "/api/v1/executions/"+ex.ID+"/confirm", map[string]any{})
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if status != http.StatusOK {
			t.Fatalf("confirm %d during a reconnect: got %d %s", i, status, raw)
		}
	}
}
