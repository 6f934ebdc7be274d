package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/risk"
)

// Large results are cut before they are masked (a page shows 64 KiB of each, 1 MiB in
// all): what is shown of them to others than the requester is masked still, in the page,
// the results panel and the live fragment, and a result past the total is left out and
// says so.
func TestExecutionLargeResultsMaskedWhereShown(t *testing.T) {
	t.Parallel()
	const token = "ghp_Q8d2Lm4Zt7Xw1Vb9Kc3Nf6Hj0Rp5Sy2Ua8Ee"
	srv := webtest.Start(t, nil)
	liveServer(t, srv, "mt", true, "echo")
	srv.App.SetRisk(t, "mt__echo", risk.Low)
	srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	srv.CreateUser(t, "carol", auth.RoleAuditor, "carol-password-1")
	alice := svClient{t: t, srv: srv, c: srv.Login(t, "alice", "alice-password-1")}
	carol := svClient{t: t, srv: srv, c: srv.Login(t, "carol", "carol-password-1")}
	var steps []map[string]any
	for range 20 {
		steps = append(steps, step("mt__echo", map[string]any{"message": "hi"}))
	}
	var ex apiExec
	alice.json(http.MethodPost, "/api/v1/executions", plan(steps...), 201, &ex)
	waitExec(t, alice, ex.ID, "success")
	// Results of 200 KiB, stored as a run would: the first with the token near its start
	// and where its shown part ends, in prose and named by a key in JSON as text.
	filler := strings.Repeat("ordinary words of a long log line\n", 6000)
	first, _ := json.Marshal(map[string]any{"content": []map[string]any{
		{"type": "text", "text": "auth failed for " + token + " " + strings.Repeat("x", 64<<10-40) + " " + token + " " + filler},
		{"type": "text", "text": `{"password":"hunter2hunter2","rows":"` + filler[:100<<10] + `"}`}}, "is_error": false})
	rest := benchTextResult(200 << 10)
	ctx := context.Background()
	if _, err := srv.Pool.Exec(ctx, `UPDATE tool_calls SET result = CASE WHEN position = 0 THEN $2::jsonb ELSE $3::jsonb END
		WHERE execution_id = $1`, ex.ID, string(first), rest); err != nil {
		t.Fatal(err)
	}

	check := func(what, html string, sees bool) {
		t.Helper()
		if strings.Contains(html, token[:12]) != sees || strings.Contains(html, "hunter2hunter2") {
			t.Errorf("%s: the token shown %v, want %v (or the password shown)", what, !sees, sees)
		}
		if !strings.Contains(html, "This result is shortened:") || !strings.Contains(html, "too large to show here") {
			t.Errorf("%s: no result says it is shortened, or none that it is left out", what)
		}
	}
	check("carol's results", pageHTML(t, carol, "/executions/"+ex.ID+"/results"), false)
	check("carol's page", pageHTML(t, carol, "/executions/"+ex.ID), false)
	check("alice's results", pageHTML(t, alice, "/executions/"+ex.ID+"/results"), true)

	var evID int64
	if err := srv.Pool.QueryRow(ctx, `SELECT max(id) FROM events WHERE topic = $1 AND kind = 'execution.success'`,
		"execution:"+ex.ID).Scan(&evID); err != nil {
		t.Fatal(err)
	}
	evs, err := srv.Bus.Since(ctx, evID-1, []string{"execution:" + ex.ID}, 1)
	if err != nil || len(evs) != 1 {
		t.Fatalf("the success event: %v (%d)", err, len(evs))
	}
	raw, err := srv.Web.RenderLive(ctx, evs[0])
	if err != nil {
		t.Fatal(err)
	}
	// Rendered once for every viewer, it has each page ask for the results masked.
	if strings.Contains(string(raw), token[:12]) || !strings.Contains(string(raw), `data-testid="results-loader"`) {
		t.Errorf("the live fragment shows the token, or does not have the page ask for the results: %.300s", raw)
	}
}
