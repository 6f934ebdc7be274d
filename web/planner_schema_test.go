package web_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/planner"
	"github.com/toolwarden/toolwarden/services/tools"
)

// A planner is shown the input schema a caller sees: a parameter the tool's
// configuration fixes is left out (a plan that gave it would be refused), and the plan
// runs with the fixed value once a person confirms it.
func TestPlannerLeavesOutFixedParameters(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var asked string
	llm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		asked = string(body)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "c1", "object": "chat.completion", "model": "m",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "tool_calls", "message": map[string]any{
				"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"id": "call_a", "type": "function",
					"function": map[string]any{"name": "mt__add", "arguments": `{"a":2}`}}}}}}})
	}))
	t.Cleanup(llm.Close)
	srv := webtest.Start(t, &webtest.Options{Executions: &executions.Options{Planner: planner.NewLLM(llm.URL, nil)}})
	srv.LiveServer(t, "mt", true, "add")
	if _, err := srv.Tools.Update(t.Context(), audit.System, srv.ToolID(t, "mt__add"), tools.Patch{Params: map[string]tools.ParamInput{
		"b": {Mode: tools.ModeFixed, Value: json.RawMessage("40")}}}); err != nil {
		t.Fatal(err)
	}
	api := svClient{t: t, srv: srv, bearer: svToken(t, srv, "admin")}
	var ex apiExec
	api.json(http.MethodPost, "/api/v1/executions", map[string]any{"prompt": "add two to the fixed number"}, http.StatusCreated, &ex)
	mu.Lock()
	sent := asked
	mu.Unlock()
	var req struct {
		Tools []struct {
			Function struct {
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal([]byte(sent), &req); err != nil || len(req.Tools) != 1 || req.Tools[0].Function.Name != "mt__add" {
		t.Fatalf("the model's request: %v %s", err, sent)
	}
	var schema struct {
		Properties map[string]any `json:"properties"`
	}
	_ = json.Unmarshal(req.Tools[0].Function.Parameters, &schema)
	if _, ok := schema.Properties["b"]; ok || schema.Properties["a"] == nil {
		t.Fatalf("mt__add as the planner saw it: %s, want a without the fixed b", req.Tools[0].Function.Parameters)
	}
	// A plan the model wrote waits for a person's confirm, low as its steps are.
	if ex.Status != "awaiting_approval" || ex.Risk != "medium" {
		t.Fatalf("the model's plan: %s at %s risk, want awaiting_approval at medium", ex.Status, ex.Risk)
	}
	admin := svClient{t: t, srv: srv, c: srv.Login(t, "admin", webtest.AdminPassword)}
	admin.json(http.MethodPost, "/api/v1/executions/"+ex.ID+"/confirm", map[string]any{"plan_hash": ex.PlanHash}, http.StatusOK, nil)
	waitExec(t, api, ex.ID, "success")
}
