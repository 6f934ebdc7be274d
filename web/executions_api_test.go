package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
)

// apiExec is an execution as the API answers it.
type apiExec struct {
	ID                 string `json:"id"`
	Status             string `json:"status"`
	Risk               string `json:"risk"`
	RiskWhy            string `json:"risk_why"`
	ConfirmationPhrase string `json:"confirmation_phrase"`
	PlanHash           string `json:"plan_hash"`
	Reason             string `json:"reason"`
	Error              string `json:"error"`
	Approval           string `json:"approval"`
	Approver           string `json:"approver"`
	Steps              []struct {
		Tool      string          `json:"tool"`
		Arguments json.RawMessage `json:"arguments"`
		Status    string          `json:"status"`
		Result    json.RawMessage `json:"result"`
		Error     string          `json:"error"`
	} `json:"steps"`
	Rollback []struct {
		Tool   string `json:"tool"`
		Status string `json:"status"`
	} `json:"rollback"`
}

func plan(steps ...map[string]any) map[string]any {
	return map[string]any{"plan": map[string]any{"steps": steps}}
}

func step(tool string, args map[string]any) map[string]any {
	return map[string]any{"tool": tool, "arguments": args}
}

// waitExec polls GET /api/v1/executions/:id until it has status want.
func waitExec(t *testing.T, api svClient, id, want string) apiExec {
	t.Helper()
	// Generous, and ever less often: a GET carries every step's result (megabytes in
	// some tests), and a machine running other packages' tests is slow to run a plan.
	deadline := time.Now().Add(60 * time.Second)
	pause := 20 * time.Millisecond
	for {
		var ex apiExec
		api.json(http.MethodGet, "/api/v1/executions/"+id, nil, 200, &ex)
		if ex.Status == want {
			return ex
		}
		if time.Now().After(deadline) {
			t.Fatalf("execution %s is %s (%s), want %s", id, ex.Status, ex.Error, want)
		}
		time.Sleep(pause)
		pause = min(2*pause, 250*time.Millisecond)
	}
}

func expectErr(t *testing.T, api svClient, method, path string, body any, status int, code string) webtest.ErrorBody {
	t.Helper()
	return api.api().Error(method, path, body, status, code)
}

// The executions API follows docs/api.md: plans by prompt or steps, risk decides what
// approval they need, confirm answers 200 | 409 | 422, cancel and rollback 200 | 409.
func TestExecutionsAPI(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	liveServer(t, srv, "lo", true, "echo", "fail", "add")
	liveServer(t, srv, "mt", false, "echo", "write-note")
	srv.CreateUser(t, "ann", auth.RoleToolUser, "ann-password-123")
	srv.CreateUser(t, "gus", auth.RoleGuest, "gus-password-123")
	token := svClient{t: t, srv: srv, bearer: svToken(t, srv, "admin")}
	admin := svClient{t: t, srv: srv, c: srv.Login(t, "admin", webtest.AdminPassword)}
	ann := svClient{t: t, srv: srv, c: srv.Login(t, "ann", "ann-password-123")}
	guest := svClient{t: t, srv: srv, c: srv.Login(t, "gus", "gus-password-123")}

	{ // low runs at once
		var ex apiExec
		token.json(http.MethodPost, "/api/v1/executions", plan(step("lo__echo", map[string]any{"message": "hi"})), 201, &ex)
		if ex.ID == "" || ex.Risk != "low" || ex.ConfirmationPhrase != "" || (ex.Status != "executing" && ex.Status != "success") {
			t.Fatalf("created %+v", ex)
		}
		done := waitExec(t, token, ex.ID, "success")
		if len(done.Steps) != 1 || done.Steps[0].Status != "succeeded" || !strings.Contains(string(done.Steps[0].Result), "Echo: hi") ||
			done.Approval != "policy" {
			t.Fatalf("finished %+v", done)
		}
	}

	{ // medium waits for a person
		var ex apiExec
		token.json(http.MethodPost, "/api/v1/executions", plan(step("mt__echo", map[string]any{"message": "m"})), 201, &ex)
		if ex.Risk != "medium" || ex.Status != "awaiting_approval" || ex.ConfirmationPhrase != "" {
			t.Fatalf("created %+v", ex)
		}
		var list struct {
			Items []apiExec `json:"items"`
		}
		ann.json(http.MethodGet, "/api/v1/approvals", nil, 200, &list)
		if len(list.Items) != 1 || list.Items[0].ID != ex.ID {
			t.Fatalf("approvals: %+v", list.Items)
		}
		expectErr(t, token, http.MethodPost, "/api/v1/executions/"+ex.ID+"/confirm", map[string]any{}, 403, "forbidden")
		expectErr(t, ann, http.MethodPost, "/api/v1/executions/"+ex.ID+"/confirm", map[string]any{"plan_hash": strings.Repeat("0", 64)}, 409, "conflict")
		var ok apiExec
		ann.json(http.MethodPost, "/api/v1/executions/"+ex.ID+"/confirm", map[string]any{"plan_hash": ex.PlanHash}, 200, &ok)
		if ok.Status != "executing" && ok.Status != "success" || ok.Approver != "ann" || ok.Approval != "confirm" {
			t.Fatalf("confirmed %+v", ok)
		}
		expectErr(t, admin, http.MethodPost, "/api/v1/executions/"+ex.ID+"/confirm", nil, 409, "conflict")
		waitExec(t, token, ex.ID, "success")
		expectErr(t, admin, http.MethodPost, "/api/v1/executions/"+ex.ID+"/cancel", nil, 409, "conflict")
		expectErr(t, admin, http.MethodPost, "/api/v1/executions/"+ex.ID+"/rollback", nil, 409, "conflict")
		ann.json(http.MethodGet, "/api/v1/approvals", nil, 200, &list)
		if len(list.Items) != 0 {
			t.Fatalf("approvals after confirm: %+v", list.Items)
		}
	}

	{ // high needs the exact phrase
		var ex apiExec
		ann.json(http.MethodPost, "/api/v1/executions", plan(step("mt__write-note", map[string]any{"text": "t"})), 201, &ex)
		if ex.Risk != "high" || ex.ConfirmationPhrase == "" {
			t.Fatalf("created %+v", ex)
		}
		e := expectErr(t, admin, http.MethodPost, "/api/v1/executions/"+ex.ID+"/confirm", map[string]any{"phrase": strings.ToUpper(ex.ConfirmationPhrase)}, 422, "wrong_phrase")
		if !strings.Contains(e.Error.Message, ex.ConfirmationPhrase) {
			t.Fatalf("the error does not say what to type: %s", e.Error.Message)
		}
		var still apiExec
		admin.json(http.MethodGet, "/api/v1/executions/"+ex.ID, nil, 200, &still)
		if still.Status != "awaiting_approval" {
			t.Fatalf("a wrong phrase changed the status to %s", still.Status)
		}
		admin.json(http.MethodPost, "/api/v1/executions/"+ex.ID+"/confirm", map[string]any{"phrase": ex.ConfirmationPhrase}, 200, nil)
		waitExec(t, admin, ex.ID, "success")
	}

	{ // reject and cancel
		var a, b apiExec
		ann.json(http.MethodPost, "/api/v1/executions", plan(step("mt__echo", map[string]any{"message": "r"})), 201, &a)
		ann.json(http.MethodPost, "/api/v1/executions", plan(step("mt__echo", map[string]any{"message": "c"})), 201, &b)
		e := expectErr(t, admin, http.MethodPost, "/api/v1/executions/"+a.ID+"/reject", map[string]any{"reason": "  "}, 400, "invalid_input")
		if !strings.Contains(string(e.Error.Details), "reason") {
			t.Fatalf("details %s", e.Error.Details)
		}
		var rej apiExec
		admin.json(http.MethodPost, "/api/v1/executions/"+a.ID+"/reject", map[string]any{"reason": "not today"}, 200, &rej)
		if rej.Status != "cancelled" || rej.Reason != "not today" {
			t.Fatalf("rejected %+v", rej)
		}
		expectErr(t, guest, http.MethodPost, "/api/v1/executions/"+b.ID+"/cancel", nil, 403, "forbidden")
		ann.json(http.MethodPost, "/api/v1/executions/"+b.ID+"/cancel", nil, 200, nil)
		expectErr(t, ann, http.MethodPost, "/api/v1/executions/"+b.ID+"/cancel", nil, 409, "conflict")

		var page struct {
			Items      []apiExec `json:"items"`
			NextCursor string    `json:"next_cursor"`
		}
		ann.json(http.MethodGet, "/api/v1/executions?status=cancelled&requested_by=me", nil, 200, &page)
		if len(page.Items) != 2 {
			t.Fatalf("cancelled of ann: %+v", page.Items)
		}
		ann.json(http.MethodGet, "/api/v1/executions?status=cancelled&limit=1", nil, 200, &page)
		if len(page.Items) != 1 || page.Items[0].ID != b.ID || page.NextCursor == "" {
			t.Fatalf("first page %+v", page)
		}
		ann.json(http.MethodGet, "/api/v1/executions?status=cancelled&limit=1&cursor="+page.NextCursor, nil, 200, &page)
		if len(page.Items) != 1 || page.Items[0].ID != a.ID {
			t.Fatalf("second page %+v", page)
		}
		expectErr(t, ann, http.MethodGet, "/api/v1/executions?status=bogus", nil, 400, "invalid_input")
		expectErr(t, ann, http.MethodGet, "/api/v1/executions?cursor=nope", nil, 400, "invalid_input")
		expectErr(t, guest, http.MethodGet, "/api/v1/executions", nil, 403, "forbidden")
	}

	{ // failure and rollback
		body := map[string]any{"plan": map[string]any{
			"steps":    []any{step("lo__echo", map[string]any{"message": "do"}), step("lo__fail", map[string]any{"message": "boom"})},
			"rollback": []any{step("lo__echo", map[string]any{"message": "undo"})},
		}}
		var ex apiExec
		ann.json(http.MethodPost, "/api/v1/executions", body, 201, &ex)
		if ex.Risk != "high" { // lo__fail declares no annotations
			t.Fatalf("created %+v", ex)
		}
		// Another person could approve it (admin), so its requester may not (issue #17).
		expectErr(t, ann, http.MethodPost, "/api/v1/executions/"+ex.ID+"/confirm", map[string]any{"phrase": ex.ConfirmationPhrase}, 403, "forbidden")
		admin.json(http.MethodPost, "/api/v1/executions/"+ex.ID+"/confirm", map[string]any{"phrase": ex.ConfirmationPhrase}, 200, nil)
		failed := waitExec(t, ann, ex.ID, "failed")
		if failed.Steps[0].Status != "succeeded" || failed.Steps[1].Status != "failed" || !strings.Contains(failed.Error, "boom") {
			t.Fatalf("failed %+v", failed)
		}
		var rp struct {
			Steps []struct{ Tool, Risk string } `json:"steps"`
			Risk  string                        `json:"risk"`
		}
		ann.json(http.MethodGet, "/api/v1/executions/"+ex.ID+"/rollback", nil, 200, &rp)
		if len(rp.Steps) != 1 || rp.Steps[0].Tool != "lo__echo" || rp.Risk != "low" {
			t.Fatalf("rollback plan %+v", rp)
		}
		// Rolling back is a decision: a token gets 403 whatever the risk (issue #17, finding 6).
		expectErr(t, token, http.MethodPost, "/api/v1/executions/"+ex.ID+"/rollback", map[string]any{"confirm": true}, 403, "forbidden")
		ann.json(http.MethodPost, "/api/v1/executions/"+ex.ID+"/rollback", nil, 200, nil)
		back := waitExec(t, ann, ex.ID, "rolled_back")
		if len(back.Rollback) != 1 || back.Rollback[0].Status != "succeeded" || back.Steps[0].Status != "compensated" {
			t.Fatalf("rolled back %+v", back)
		}
		expectErr(t, ann, http.MethodPost, "/api/v1/executions/"+ex.ID+"/rollback", nil, 409, "conflict")
	}

	{ // bad input stores nothing
		const execs = "/api/v1/executions"
		post := http.MethodPost
		webtest.Run(t, []webtest.Case{
			{Name: "an unknown tool and an argument of the wrong type", As: ann.api(), Method: post, Path: execs,
				Body:   plan(step("lo__nope", nil), step("lo__echo", map[string]any{"message": 5})),
				Status: 400, Code: "invalid_input", Details: []string{"/steps/0/tool", "/steps/1/arguments/message"}},
			{Name: "a prompt nothing understands", As: ann.api(), Method: post, Path: execs,
				Body:   map[string]any{"prompt": "please tidy up everything"},
				Status: 422, Code: "not_understood", Details: []string{"fragment"}},
			{Name: "a prompt and a plan", As: ann.api(), Method: post, Path: execs,
				Body:   map[string]any{"prompt": "call lo__echo message=hi", "plan": map[string]any{"steps": []any{step("lo__echo", nil)}}},
				Status: 400, Code: "invalid_input"},
			{Name: "broken JSON", As: ann.api(), Method: post, Path: execs, Body: `{"plan":`, Status: 400, Code: "invalid_input"},
			{Name: "a misspelt key (its rollback would be dropped)", As: ann.api(), Method: post, Path: execs,
				Body:   `{"plan":{"steps":[{"tool":"lo__echo","arguments":{"message":"tidy"}}],"rolback":[{"tool":"lo__echo","arguments":{"message":"undo"}}]}}`,
				Status: 400, Code: "invalid_input", Details: []string{"body"}},
			{Name: "a guest", As: guest.api(), Method: post, Path: execs, Body: map[string]any{"prompt": "call lo__echo message=hi"},
				Status: 403, Code: "forbidden"},
			{Name: "no such execution", As: ann.api(), Method: http.MethodGet, Path: execs + "/not-an-id", Status: 404, Code: "not_found"},
			{Name: "a prompt too long to plan", As: ann.api(), Method: post, Path: execs, Body: map[string]any{"prompt": strings.Repeat("call lo__echo ", 600)},
				Status: 400, Code: "invalid_input", Details: []string{"/prompt"}},
		})
		var n int
		if err := srv.Pool.QueryRow(t.Context(), `SELECT count(*) FROM executions WHERE prompt LIKE '%tidy%' OR prompt LIKE '%message=hi%'`).Scan(&n); err != nil || n != 0 {
			t.Fatalf("bad input stored %d executions (%v)", n, err)
		}
		var ok apiExec
		ann.json(http.MethodPost, "/api/v1/executions", map[string]any{"prompt": `call lo__echo message="from a prompt"`}, 201, &ok)
		done := waitExec(t, ann, ok.ID, "success")
		if !strings.Contains(string(done.Steps[0].Result), "from a prompt") {
			t.Fatalf("prompt plan ran %+v", done.Steps)
		}
		// Sentences, not the grammar (services/planner/words.go): two servers have echo,
		// so the reply names both, and the server's name settles it.
		e := expectErr(t, ann, http.MethodPost, "/api/v1/executions", map[string]any{"prompt": `echo 'hello'`}, 422, "not_understood")
		if !strings.Contains(e.Error.Message, "mt__echo") || !strings.Contains(e.Error.Message, "lo__echo") {
			t.Fatalf("an ambiguous sentence: %s", e.Error.Message)
		}
		// A tool the requester may not use is not the planner's to choose: with mt__echo
		// taken from ann, the same sentence means lo__echo alone.
		no := false
		if err := srv.Tools.SetPermission(t.Context(), audit.System, srv.ToolID(t, "mt__echo"), "ann", &no); err != nil {
			t.Fatal(err)
		}
		var only apiExec
		ann.json(http.MethodPost, "/api/v1/executions", map[string]any{"prompt": `echo 'hello'`}, 201, &only)
		if done := waitExec(t, ann, only.ID, "success"); len(done.Steps) != 1 || done.Steps[0].Tool != "lo__echo" {
			t.Fatalf("with mt__echo denied, the plan ran %+v", done.Steps)
		}
		if err := srv.Tools.SetPermission(t.Context(), audit.System, srv.ToolID(t, "mt__echo"), "ann", nil); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct{ prompt, want string }{{`echo 'hello' on lo`, "hello"}, {"add 17 and 25", "42"}} {
			var ex apiExec
			ann.json(http.MethodPost, "/api/v1/executions", map[string]any{"prompt": c.prompt}, 201, &ex)
			done := waitExec(t, ann, ex.ID, "success")
			if len(done.Steps) != 1 || !strings.Contains(string(done.Steps[0].Result), c.want) {
				t.Fatalf("%q ran %+v", c.prompt, done.Steps)
			}
		}
	}

	{ // settings
		var st struct {
			TTL        int64  `json:"approval_ttl_seconds"`
			Separation string `json:"high_separation"`
			Separate   bool   `json:"separate_high_approver"`
		}
		ann.json(http.MethodGet, "/api/v1/executions/settings", nil, 200, &st)
		if st.TTL != 86400 || st.Separate || st.Separation != "auto" {
			t.Fatalf("defaults %+v", st)
		}
		expectErr(t, ann, http.MethodPut, "/api/v1/executions/settings", map[string]any{"approval_ttl_seconds": 3600}, 403, "forbidden")
		expectErr(t, admin, http.MethodPut, "/api/v1/executions/settings", map[string]any{"approval_ttl_seconds": 5}, 400, "invalid_input")
		admin.json(http.MethodPut, "/api/v1/executions/settings", map[string]any{"approval_ttl_seconds": 3600, "separate_high_approver": true}, 200, &st)
		if st.TTL != 3600 || !st.Separate || st.Separation != "always" {
			t.Fatalf("saved %+v", st)
		}
		// A TTL alone keeps the separation; seconds no duration holds are refused, not
		// wrapped into range (18446744134 s wrapped to 60 s).
		admin.json(http.MethodPut, "/api/v1/executions/settings", map[string]any{"approval_ttl_seconds": 7200}, 200, &st)
		if st.TTL != 7200 || st.Separation != "always" {
			t.Fatalf("a TTL alone: saved %+v, want always kept", st)
		}
		expectErr(t, admin, http.MethodPut, "/api/v1/executions/settings", map[string]any{"approval_ttl_seconds": int64(18446744134)}, 400, "invalid_input")
		admin.json(http.MethodPut, "/api/v1/executions/settings", map[string]any{"approval_ttl_seconds": 3600, "high_separation": "off"}, 200, &st)
		if st.Separate || st.Separation != "off" {
			t.Fatalf("saved %+v", st)
		}
		expectErr(t, admin, http.MethodPut, "/api/v1/executions/settings", map[string]any{"approval_ttl_seconds": 3600, "high_separation": "maybe"}, 400, "invalid_input")
		// A separation alone keeps the expiry; a wrong expiry is named as the API names it.
		admin.json(http.MethodPut, "/api/v1/executions/settings", map[string]any{"high_separation": "always"}, 200, &st)
		if st.TTL != 3600 || st.Separation != "always" {
			t.Fatalf("a separation alone: saved %+v, want the expiry kept", st)
		}
		if e := expectErr(t, admin, http.MethodPut, "/api/v1/executions/settings", map[string]any{"approval_ttl_seconds": 5}, 400, "invalid_input"); !strings.Contains(fmt.Sprint(e), "approval_ttl_seconds") {
			t.Fatalf("a wrong expiry: %+v, want approval_ttl_seconds named", e)
		}
		expectErr(t, ann, http.MethodGet, "/api/v1/executions?limit=0", nil, 400, "invalid_input")
	}

	{ // compensation
		path := "/api/v1/tools/" + toolID(t, srv, "lo__fail") + "/compensation"
		expectErr(t, ann, http.MethodGet, path, nil, 404, "not_found")
		e := expectErr(t, admin, http.MethodPut, path, map[string]any{"undo_tool": "lo__nope"}, 400, "invalid_input")
		if !strings.Contains(string(e.Error.Details), "undo_tool") {
			t.Fatalf("details %s", e.Error.Details)
		}
		expectErr(t, ann, http.MethodPut, path, map[string]any{"undo_tool": "lo__echo"}, 403, "forbidden")
		var comp struct {
			UndoToolID  string                     `json:"undo_tool_id"`
			ArgumentMap map[string]json.RawMessage `json:"argument_map"`
		}
		admin.json(http.MethodPut, path, map[string]any{"undo_tool": "lo__echo",
			"argument_map": map[string]any{"message": map[string]any{"from": "/message"}}}, 200, &comp)
		if comp.UndoToolID != toolID(t, srv, "lo__echo") || len(comp.ArgumentMap) != 1 {
			t.Fatalf("saved %+v", comp)
		}
		ann.json(http.MethodGet, path, nil, 200, nil)
		if got, _ := admin.do(http.MethodPut, path, map[string]any{"undo_tool": ""}); got != http.StatusNoContent {
			t.Fatalf("remove: %d", got)
		}
		expectErr(t, ann, http.MethodGet, path, nil, 404, "not_found")
	}
}

// An id that is not one (or not in its canonical form, which PostgreSQL refuses) is a
// 404 on every execution route, not a server error.
func TestExecutionBadIDs(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	token := svClient{t: t, srv: srv, bearer: svToken(t, srv, "admin")}
	urn := "urn:uuid:6f1b1f0e-0000-4000-8000-000000000000"
	for _, r := range []struct{ method, path string }{
		{http.MethodPost, "/api/v1/executions/abc/cancel"},
		{http.MethodPost, "/api/v1/executions/" + urn + "/cancel"},
		{http.MethodGet, "/api/v1/executions/abc/rollback"},
		{http.MethodGet, "/api/v1/executions/" + urn},
	} {
		token.json(r.method, r.path, map[string]any{}, 404, nil)
	}
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	if res := srv.Get(t, admin, "/executions/"+urn); res.StatusCode != http.StatusNotFound {
		t.Fatalf("the page of %s: %d, want 404", urn, res.StatusCode)
	}
}
