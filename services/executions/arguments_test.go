package executions_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/planner"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/secrets"
	"github.com/toolwarden/toolwarden/services/verr"
)

// Numbers that jsonb writes back differently from how they were given (an exponent,
// -0, trailing zeros) are hashed as stored, so the plan is not taken for tampered with
// when it is confirmed; a number that would be stored as more than a hundred digits is
// refused, naming it.
func TestArgumentNumbersAsStored(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "add")
	e.setRisk("mt__add", risk.Medium)
	for _, args := range []string{`{"a":1e-7,"b":-0.0}`, `{"a":1.230e-5,"b":-0}`, `{"a":12E+2,"b":0.10}`} {
		ex := e.create(e.admin, step("mt__add", args))
		if ex.Risk != "medium" {
			t.Fatalf("risk: got %s, want medium", ex.Risk)
		}
		got, err := e.svc.Confirm(e.ctx, e.admin, ex.ID, "", ex.Hash())
		if err != nil {
			t.Errorf("%s: confirm: %v", args, err)
			continue
		}
		if got.Status != executions.Executing {
			t.Errorf("%s: got %s (%q), want executing", args, got.Status, got.Reason)
		}
	}
	for _, c := range []struct{ args, field string }{
		{`{"a":1e100000,"b":1}`, "/steps/0/arguments/a"},
		{`{"a":1,"b":-1e-200}`, "/steps/0/arguments/b"},
		{`{"a":0.` + strings.Repeat("1", 17_000) + `,"b":1}`, "/steps/0/arguments/a"},
		{`{"a":1,"b":` + strings.Repeat("9", 1001) + `}`, "/steps/0/arguments/b"},
	} {
		_, err := e.svc.Create(e.ctx, e.admin, executions.Input{Plan: &executions.Request{Steps: []executions.RequestStep{step("mt__add", c.args)}}})
		var ve *verr.Error
		if !errors.As(err, &ve) || ve.For(c.field) == "" {
			t.Errorf("%.40s: got %.200v, want a field error at %s", c.args, err, c.field)
		}
	}
	// A tool's name PostgreSQL cannot look up is bad input at the step's tool, not a
	// database error shown as a field's message.
	_, err := e.svc.Create(e.ctx, e.admin, executions.Input{Plan: &executions.Request{Steps: []executions.RequestStep{
		{Tool: "mt__add\x00", Arguments: json.RawMessage(`{"a":1,"b":2}`)}}}})
	var ve *verr.Error
	if !errors.As(err, &ve) || !strings.Contains(ve.For("/steps/0/tool"), "NUL") {
		t.Errorf("a tool name with a NUL: got %v, want a field error at /steps/0/tool naming the NUL", err)
	}
}

// fixedPlanner answers every prompt with its plan.
type fixedPlanner struct{ plan planner.Plan }

func (p fixedPlanner) Plan(context.Context, string, []planner.Tool) (planner.Plan, error) {
	return p.plan, nil
}
func (fixedPlanner) Name() string { return "fixed" }

// A planner's arguments get the checks a plan given through the API gets: text that
// PostgreSQL cannot store and duplicate keys are bad input naming the step, not an
// internal error from the INSERT.
func TestPlannerArgumentsChecked(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "echo")
	keys, err := secrets.NewKeyring(e.key)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ args, field, why string }{
		{`{"message":"a\u0000b"}`, "/steps/0/arguments/message", "NUL"},
		{`{"message":"a\ud800b"}`, "/steps/0/arguments/message", "surrogate"},
		{`{"message":"a","message":"b"}`, "/steps/0/arguments/message", "twice"},
	} {
		svc, err := executions.New(e.pool, e.r, e.tools, &executions.Options{Now: e.clock.Now, Keys: keys,
			Planner: fixedPlanner{planner.Plan{Steps: []planner.Step{{Tool: "mt__echo", Arguments: json.RawMessage(c.args)}}}}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = svc.Create(e.ctx, e.admin, executions.Input{Prompt: "echo something"})
		var ve *verr.Error
		if !errors.As(err, &ve) || !strings.Contains(ve.For(c.field), c.why) {
			t.Errorf("%s: got %v (%T), want a field error at %s saying %q", c.args, err, err, c.field, c.why)
		}
	}
}
