package router_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/tools"
)

// Prepare checks a call as far as it can without running it (plans, issue #6), and a
// call pinned to what was approved is refused once the tool's configuration changes.
func TestPrepareAndPin(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	e.server("p", true, "echo")
	tg := e.tool("p__echo")
	if _, err := e.tools.Update(e.ctx, admin, tg.ID, tools.Patch{Params: map[string]tools.ParamInput{
		"message": {Mode: tools.ModeDefault, Value: json.RawMessage(`"configured"`)}}}); err != nil {
		t.Fatal(err)
	}
	prep := func(tool, args string) (*router.Prepared, error) {
		return e.r.Prepare(e.ctx, router.Call{Tool: tool, Arguments: json.RawMessage(args), Actor: admin, Role: auth.RoleAdmin,
			Source: router.SourceExecution})
	}
	var p *router.Prepared
	testkit.WaitFor(t, 10*time.Second, func() bool {
		var err error
		p, err = prep("p__echo", `{}`)
		return err == nil && string(p.Effective) == `{"message":"configured"}`
	}, "the configured default never reached Prepare")
	cur := e.tool("p__echo")
	if p.ToolID != cur.ID || p.DefinitionHash != cur.DefinitionHash || p.ConfigVersion != cur.ConfigVersion || p.Tool != "p__echo" ||
		string(p.Arguments) != `{}` || p.Risk.Level != risk.Low {
		t.Fatalf("prepared: got %+v, want the tool's id, hash, configuration version %d, arguments {} and low risk", p, cur.ConfigVersion)
	}
	for _, tc := range []struct{ tool, args, code string }{
		{"p__nope", `{}`, router.CodeToolNotFound},
		{"p__echo", `{"message":5}`, router.CodeInvalidArguments},
		{"p__add", `{"a":1,"b":2}`, router.CodeToolDisabled},
	} {
		if _, err := prep(tc.tool, tc.args); codeOf(err) != tc.code {
			t.Errorf("prepare %s %s: got %v, want %s", tc.tool, tc.args, err, tc.code)
		}
	}
	if n := e.count(`SELECT count(*) FROM tool_usage_logs`); n != 0 {
		t.Errorf("usage rows after preparing only: got %d, want 0", n)
	}
	call := func(pin router.Pin) error {
		_, err := e.r.Call(e.ctx, router.Call{Tool: pin.ToolID, Arguments: json.RawMessage(`{}`), Actor: admin, Role: auth.RoleAdmin,
			Source: router.SourceExecution, Approval: router.Approval{Execution: "e1"}, Pin: &pin})
		return err
	}
	if err := call(p.Pin); err != nil {
		t.Fatalf("pinned call as approved: %v", err)
	}
	stale := p.Pin
	stale.DefinitionHash = "0000"
	if err := call(stale); codeOf(err) != router.CodeStale {
		t.Fatalf("another definition: got %v, want %s", err, router.CodeStale)
	}
	if _, err := e.tools.Update(e.ctx, admin, tg.ID, tools.Patch{Params: map[string]tools.ParamInput{
		"message": {Mode: tools.ModeDefault, Value: json.RawMessage(`"changed"`)}}}); err != nil {
		t.Fatal(err)
	}
	var err error
	testkit.WaitFor(t, 10*time.Second, func() bool {
		err = call(p.Pin)
		return codeOf(err) == router.CodeStale
	}, "a call pinned to the old configuration was not refused")
	var re *router.Error
	if !errors.As(err, &re) || re.Kind != fault.KindStale {
		t.Fatalf("stale status: got %v, want 409", err)
	}
}
