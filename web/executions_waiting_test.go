package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
)

// An agent looping on POST /api/v1/executions with plans that need approval is
// stopped at 20 waiting, as /mcp stops it: it must not bury the approvers.
func TestAPIExecutionsWaitingBounded(t *testing.T) {
	t.Parallel()
	e := xpStart(t)
	api := webtest.API{T: t, Srv: e.srv, Bearer: e.srv.Token(t, "ann")}
	body := map[string]any{"plan": map[string]any{"steps": []any{map[string]any{"tool": "mt__write-note", "arguments": map[string]any{"text": "x"}}}}}
	for i := range 20 {
		var ex struct {
			Status string `json:"status"`
		}
		api.JSON(http.MethodPost, "/api/v1/executions", body, http.StatusCreated, &ex)
		if ex.Status != "awaiting_approval" {
			t.Fatalf("plan %d: status %s, want awaiting_approval", i+1, ex.Status)
		}
	}
	got := api.Error(http.MethodPost, "/api/v1/executions", body, http.StatusConflict, "too_many_waiting")
	if !strings.Contains(got.Error.Message, "20 of your executions already wait for approval") {
		t.Errorf("the 21st: %q", got.Error.Message)
	}
	if n := e.srv.App.Count(t, `SELECT count(*) FROM executions WHERE status = 'awaiting_approval'`); n != 20 {
		t.Errorf("executions waiting: %d, want 20", n)
	}
}
