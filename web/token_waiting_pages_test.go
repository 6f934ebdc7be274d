package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
)

// The cap of 20 waiting plans for an API token holds on the page routes a token may post
// to as well (the new-execution form, the test panel's "Ask for approval"), counted with
// those it made through the API: they are one agent burying the approvers.
func TestTokenWaitingCapOnPages(t *testing.T) {
	t.Parallel()
	e := xpStart(t)
	tok := e.srv.Token(t, "ann")
	api := webtest.API{T: t, Srv: e.srv, Bearer: tok}
	bearer := map[string]string{"Authorization": "Bearer " + tok}
	anon := e.srv.Client(t) // no session: the token is the only credential
	plan := `{"steps":[{"tool":"mt__write-note","arguments":{"text":"x"}}]}`
	body := map[string]any{"plan": map[string]any{"steps": []any{map[string]any{"tool": "mt__write-note", "arguments": map[string]any{"text": "x"}}}}}
	for range 10 {
		api.JSON(http.MethodPost, "/api/v1/executions", body, http.StatusCreated, nil)
	}
	for i := range 10 {
		res := e.srv.PostFormHeaders(t, anon, "/executions/new", url.Values{"mode": {"plan"}, "plan": {plan}}, bearer)
		got := bodyString(t, res)
		if res.StatusCode != http.StatusSeeOther {
			t.Fatalf("the token's page plan %d: %d %s", i+1, res.StatusCode, got)
		}
	}
	// The 21st, through the form: refused with the form kept, nothing stored.
	res := e.srv.PostFormHeaders(t, anon, "/executions/new", url.Values{"mode": {"plan"}, "plan": {plan}}, bearer)
	got := bodyString(t, res)
	if res.StatusCode != http.StatusConflict || !strings.Contains(got, "20 of your executions already wait for approval") {
		t.Fatalf("the 21st through /executions/new: %d, want 409 saying why: %s", res.StatusCode, got)
	}
	// Through the test panel.
	id := toolID(t, e.srv, "mt__write-note")
	res = e.srv.PostFormHeaders(t, anon, "/tools/"+id+"/test", url.Values{"mode": {"json"}, "_action": {"request"},
		"arguments_json": {`{"text":"x"}`}}, bearer)
	got = bodyString(t, res)
	if res.StatusCode != http.StatusConflict || !strings.Contains(got, "already wait for approval") {
		t.Fatalf("the 21st through the test panel: %d, want 409 saying why: %s", res.StatusCode, got)
	}
	if n := e.srv.App.Count(t, `SELECT count(*) FROM executions WHERE status = 'awaiting_approval'`); n != 20 {
		t.Errorf("executions waiting: %d, want 20", n)
	}
	// ann herself, signed in, is not capped.
	e.createPlan(t, e.ann, plan)
}
