package executions_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/planner"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/secrets"
)

// A plan a language model wrote never starts on a policy approval, even when every step
// is LOW: a tool description can steer the model, and nothing else checks its steps
// against what the person asked. It waits for a person's confirm (MEDIUM, its steps
// still LOW); a token's waits for a person too, as a token never approves. The rule
// planner's LOW plans start at once as before.
func TestModelPlanWaitsForAPerson(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "echo")
	e.setRisk("mt__echo", risk.Low)
	// The model, answering as an OpenAI-compatible endpoint does: a call the prompt did
	// not ask for (as a hostile description would have it write).
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"message": map[string]any{
			"role": "assistant", "tool_calls": []any{map[string]any{"id": "c1", "type": "function",
				"function": map[string]any{"name": "mt__echo", "arguments": `{"message":"exfiltrated"}`}}}}}}})
	}))
	t.Cleanup(model.Close)
	keys, err := secrets.NewKeyring(e.key)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := executions.New(e.pool, e.r, e.tools, &executions.Options{Now: e.clock.Now, Keys: keys,
		Planner: planner.NewLLM(model.URL, &planner.LLMOptions{Model: "m"})})
	if err != nil {
		t.Fatal(err)
	}
	alice := e.user("alice", auth.RoleToolUser)

	ex, err := svc.Create(e.ctx, alice, executions.Input{Prompt: "say hello"})
	if err != nil {
		t.Fatal(err)
	}
	if ex.Status != executions.AwaitingApproval || ex.Risk != string(risk.Medium) || ex.Planner != "llm:m" || ex.Approval != "" {
		t.Fatalf("a model's LOW plan: got status %s, risk %s, planner %q, approval %q; want it awaiting a confirm at medium",
			ex.Status, ex.Risk, ex.Planner, ex.Approval)
	}
	if sts := e.steps(ex.ID); len(sts) != 1 || sts[0].Risk != string(risk.Low) {
		t.Fatalf("its steps: %+v, want one LOW step", sts)
	}
	if n := e.count(`SELECT count(*) FROM audit_log WHERE action = 'execution.approve' AND target_id = $1`, ex.ID); n != 0 {
		t.Fatalf("%d approvals audited for a model's plan nobody confirmed, want 0", n)
	}

	// Asked for with a token, it waits for a person: the token cannot confirm it.
	tx, err := svc.Create(e.ctx, token(alice), executions.Input{Prompt: "say hello"})
	if err != nil {
		t.Fatal(err)
	}
	if tx.Status != executions.AwaitingApproval {
		t.Fatalf("a token's model plan: got %s, want awaiting_approval", tx.Status)
	}
	if _, err := svc.Confirm(e.ctx, token(alice), tx.ID, "", ""); err == nil {
		t.Fatal("a token confirmed its own model plan")
	} else if f, ok := fault.As(err); !ok || f.Kind != fault.KindForbidden {
		t.Fatalf("a token's confirm: got %v, want forbidden", err)
	}

	// The person's confirm (no phrase: the steps are LOW) starts it.
	got, err := svc.Confirm(e.ctx, alice, ex.ID, "", ex.Hash())
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != executions.Executing || got.Approval != "confirm" {
		t.Fatalf("confirmed: got status %s, approval %q; want executing by confirm", got.Status, got.Approval)
	}

	// The rule planner's LOW plan is approved by policy, as before.
	rules, err := e.svc.Create(e.ctx, alice, executions.Input{Prompt: "call mt__echo message=hi"})
	if err != nil {
		t.Fatal(err)
	}
	if rules.Status != executions.Executing || rules.Approval != "policy" || rules.Risk != string(risk.Low) {
		t.Fatalf("the rule planner's LOW plan: got status %s, approval %q, risk %s; want executing by policy at low",
			rules.Status, rules.Approval, rules.Risk)
	}
}
