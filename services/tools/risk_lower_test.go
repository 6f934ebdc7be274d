package tools_test

import (
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/tools"
)

// TestRiskRaisedByAnAdministratorStays: a level an administrator raised above what the
// annotations give is lowered again only by an administrator, whether a tool manager
// sets a lower level, clears it or resets the tool; raising it further, or setting
// the same level again, is anyone's.
func TestRiskRaisedByAnAdministratorStays(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	srv := f.server("trusted", true)
	id := f.tool(toolSpec{server: srv, name: "reader", annotations: `{"readOnlyHint":true}`})
	if got := f.get(id).Risk().Level; got != risk.Low {
		t.Fatalf("derived level %s, want low", got)
	}
	f.update(id, tools.Patch{Risk: ptr("high"), MayLowerRisk: true, Reason: "raised by the administrator"})

	for _, p := range []tools.Patch{{Risk: ptr("low")}, {Risk: ptr("medium")}, {Risk: ptr("")}, {Risk: ptr("  ")}} {
		_, err := f.svc.Update(f.ctx, bob, id, p)
		ve := wantFields(t, err, "risk")
		if !strings.Contains(ve.For("risk"), "only an administrator") {
			t.Errorf("risk %q: message %q does not say only an administrator may lower it", *p.Risk, ve.For("risk"))
		}
	}
	if it := f.get(id); deref(it.RiskOverride) != "high" || it.Risk().Level != risk.High {
		t.Fatalf("after the refused changes: override %v, level %s; want high", it.RiskOverride, it.Risk().Level)
	}
	// Resetting keeps the administrator's level and resets the rest.
	f.update(id, tools.Patch{TimeoutMS: ptr(700)})
	it, err := f.svc.Reset(f.ctx, bob, id)
	if err != nil {
		t.Fatalf("reset by a tool manager: %v", err)
	}
	if deref(it.RiskOverride) != "high" || it.TimeoutMS != nil {
		t.Fatalf("after a tool manager's reset: override %v, timeout %v; want high and none", it.RiskOverride, it.TimeoutMS)
	}
	// The same level again changes nothing; an administrator may lower or reset it.
	if it, err := f.svc.Update(f.ctx, bob, id, tools.Patch{Risk: ptr("HIGH")}); err != nil || deref(it.RiskOverride) != "high" {
		t.Fatalf("the same level again: %v %v", it.RiskOverride, err)
	}
	if it, err := f.svc.ResetAll(f.ctx, alice, id); err != nil || it.RiskOverride != nil || it.Risk().Level != risk.Low {
		t.Fatalf("an administrator's reset: override %v, %v", it.RiskOverride, err)
	}

	// Below the annotations, an administrator's lower level may be raised by a tool
	// manager (it adds confirmations), but not lowered further.
	w := f.tool(toolSpec{server: srv, name: "writer"}) // no annotations: high
	f.update(w, tools.Patch{Risk: ptr("low"), MayLowerRisk: true})
	if it, err := f.svc.Update(f.ctx, bob, w, tools.Patch{Risk: ptr("medium")}); err != nil || deref(it.RiskOverride) != "medium" {
		t.Fatalf("raising an administrator's low level: %v %v", it.RiskOverride, err)
	}
	_, err = f.svc.Update(f.ctx, bob, w, tools.Patch{Risk: ptr("low")})
	wantFields(t, err, "risk")
	if it, err := f.svc.Update(f.ctx, bob, w, tools.Patch{Risk: ptr("")}); err != nil || it.RiskOverride != nil || it.Risk().Level != risk.High {
		t.Fatalf("clearing a level below the annotations': %v %v", it.RiskOverride, err)
	}
}
