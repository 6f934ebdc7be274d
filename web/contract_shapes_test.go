package web_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/grants"
)

// on is c reporting to t (a subtest's), so one subtest's failure does not stop the others.
func (c svClient) on(t *testing.T) svClient { c.t = t; return c }

// keysOf decodes a JSON object's keys, to tell a key sent as null or "" from one left out.
func keysOf(t *testing.T, what string, raw []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: not a JSON object: %v: %.300s", what, err, raw)
	}
	return m
}

// wantKey fails unless m has key with exactly the JSON value want.
func wantKey(t *testing.T, what string, m map[string]json.RawMessage, key, want string) {
	t.Helper()
	got, ok := m[key]
	if !ok {
		t.Errorf("%s: no %q key, want %s (DESIGN §1 always sends it)", what, key, want)
		return
	}
	if string(got) != want {
		t.Errorf("%s: %q is %s, want %s", what, key, got, want)
	}
}

// The JSON shapes of DESIGN §1 that programs outside the repository rely on: keys are
// sent even when empty (structured_content, next_cursor, authorize_operation, an
// error's details), a reject of a decided execution is 409 whatever its reason, the
// audit log is filtered by a target id alone, and an export takes the list's query
// string (limit and cursor ignored).
func TestContractShapes(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	liveServer(t, srv, "lo", true, "echo")  // LOW: runs at once
	liveServer(t, srv, "mt", false, "echo") // MEDIUM: waits for approval
	ann := srv.CreateUser(t, "ann", auth.RoleToolUser, "ann-password-123")
	admin := svClient{t: t, srv: srv, c: srv.Login(t, "admin", webtest.AdminPassword)}
	annS := svClient{t: t, srv: srv, c: srv.Login(t, "ann", "ann-password-123")}
	token := svClient{t: t, srv: srv, bearer: svToken(t, srv, "admin")}

	t.Run("tools/call sends structured_content as null", func(t *testing.T) {
		token := token.on(t)
		status, raw := token.do(http.MethodPost, "/api/v1/tools/call", map[string]any{"tool": "lo__echo", "arguments": map[string]any{"message": "hi"}})
		if status != http.StatusOK {
			t.Fatalf("call: got %d %.300s", status, raw)
		}
		wantKey(t, "POST /api/v1/tools/call", keysOf(t, "call", raw), "structured_content", "null")
	})

	t.Run("an error sends details as null", func(t *testing.T) {
		token := token.on(t)
		status, raw := token.do(http.MethodGet, "/api/v1/executions/00000000-0000-0000-0000-000000000001", nil)
		if status != http.StatusNotFound {
			t.Fatalf("unknown execution: got %d %.300s", status, raw)
		}
		wantKey(t, "a 404's error", keysOf(t, "error body", keysOf(t, "body", raw)["error"]), "details", "null")
	})

	// A MEDIUM plan (an untrusted server's tool) waits for approval.
	var waiting, decided apiExec
	annS.json(http.MethodPost, "/api/v1/executions", plan(step("mt__echo", map[string]any{"message": "w"})), 201, &waiting)
	annS.json(http.MethodPost, "/api/v1/executions", plan(step("mt__echo", map[string]any{"message": "d"})), 201, &decided)
	if waiting.Status != "awaiting_approval" || decided.Status != "awaiting_approval" {
		t.Fatalf("plans: got %s and %s, want awaiting_approval", waiting.Status, decided.Status)
	}
	admin.json(http.MethodPost, "/api/v1/executions/"+decided.ID+"/reject", map[string]any{"reason": "not today"}, 200, nil)

	t.Run("reject checks the state before the reason", func(t *testing.T) {
		admin := admin.on(t)
		for _, body := range []any{map[string]any{}, map[string]any{"reason": ""}, map[string]any{"reason": "   "}, nil} {
			e := expectErr(t, admin, http.MethodPost, "/api/v1/executions/"+decided.ID+"/reject", body, 409, "conflict")
			if !strings.Contains(string(e.Error.Details), `"status":"cancelled"`) {
				t.Errorf("reject %v of a decided execution: details %s, want its status", body, e.Error.Details)
			}
		}
		e := expectErr(t, admin, http.MethodPost, "/api/v1/executions/"+waiting.ID+"/reject", map[string]any{"reason": ""}, 400, "invalid_input")
		if !strings.Contains(string(e.Error.Details), `"reason"`) {
			t.Errorf("reject without a reason: details %s, want reason", e.Error.Details)
		}
		expectErr(t, admin, http.MethodPost, "/api/v1/executions/00000000-0000-0000-0000-000000000001/reject", map[string]any{}, 404, "not_found")
		var still apiExec
		admin.json(http.MethodGet, "/api/v1/executions/"+waiting.ID, nil, 200, &still)
		if still.Status != "awaiting_approval" {
			t.Fatalf("a refused reject changed the status to %s", still.Status)
		}
	})

	t.Run("lists send next_cursor on the last page", func(t *testing.T) {
		admin := admin.on(t)
		for _, path := range []string{"/api/v1/executions", "/api/v1/executions?status=awaiting_approval", "/api/v1/approvals"} {
			status, raw := admin.do(http.MethodGet, path, nil)
			if status != http.StatusOK {
				t.Fatalf("%s: got %d %.300s", path, status, raw)
			}
			wantKey(t, path, keysOf(t, path, raw), "next_cursor", `""`)
		}
	})

	t.Run("collaborations send authorize_operation", func(t *testing.T) {
		annS := annS.on(t)
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		go func() {
			_, _ = srv.App.Grants.Ask(ctx, grants.Question{UserID: ann.ID, UserName: "ann", ConversationID: "conv-1", Prompt: "Which file?"})
		}()
		var items []json.RawMessage
		webtest.WaitFor(t, 10*time.Second, func() bool {
			var list struct{ Items []json.RawMessage }
			annS.json(http.MethodGet, "/api/v1/collaborations?status=pending", nil, http.StatusOK, &list)
			items = list.Items
			return len(items) == 1
		}, "ann's question")
		wantKey(t, "a collaboration", keysOf(t, "collaboration", items[0]), "authorize_operation", `""`)
	})

	t.Run("the audit log by a target id alone", func(t *testing.T) {
		admin := admin.on(t)
		var l auditList
		admin.json(http.MethodGet, "/api/v1/audit?target_id="+decided.ID+"&limit=500", nil, 200, &l)
		actions := map[string]bool{}
		for _, it := range l.Items {
			if it.TargetID != decided.ID {
				t.Errorf("target_id=%s: got an entry of %q", decided.ID, it.TargetID)
			}
			actions[it.Action] = true
		}
		if !actions["execution.reject"] || len(l.Items) < 2 {
			t.Fatalf("target_id=%s alone: got %d entries %v, want its creation and its rejection", decided.ID, len(l.Items), actions)
		}
		res := srv.Get(t, admin.c, "/audit?target_id="+url.QueryEscape(decided.ID))
		page := body(t, res)
		if res.StatusCode != http.StatusOK || strings.Count(page, `data-testid="audit-row"`) != len(l.Items) {
			t.Fatalf("/audit?target_id= alone: got %d with %d rows, want 200 with %d", res.StatusCode, strings.Count(page, `data-testid="audit-row"`), len(l.Items))
		}

		// The list's query string, its limit and a cursor too, exports the whole set.
		var first auditList
		admin.json(http.MethodGet, "/api/v1/audit?target_id="+decided.ID+"&limit=1", nil, 200, &first)
		if first.NextCursor == "" {
			t.Fatalf("a page of 1 of %d entries has no next_cursor", len(l.Items))
		}
		for _, q := range []string{"&target_id=" + decided.ID, "&target_id=" + decided.ID + "&limit=1&cursor=" + first.NextCursor} {
			status, raw := admin.do(http.MethodGet, "/api/v1/audit/export?format=jsonl"+q, nil)
			if status != http.StatusOK {
				t.Fatalf("export%s: got %d %.300s", q, status, raw)
			}
			n := 0
			for sc := bufio.NewScanner(bytes.NewReader(raw)); sc.Scan(); n++ {
			}
			if n != len(l.Items) {
				t.Errorf("export%s: got %d entries, want every one of the %d that match", q, n, len(l.Items))
			}
		}
		expectErr(t, admin, http.MethodGet, "/api/v1/audit/export?format=jsonl&after=1", nil, 400, "invalid_input")
	})
}
