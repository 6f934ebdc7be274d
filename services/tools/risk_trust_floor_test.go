package tools_test

import (
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/tools"
)

// TestRiskSetOnlyByTrustNeedsAnAdministrator: on a trusted server a read-only tool is
// low, but a tool manager who stores that low would keep it after an administrator
// stops trusting the server (where the annotations give medium), named as an
// administrator's choice. Only an administrator may set a level below what the
// annotations give on an untrusted server.
func TestRiskSetOnlyByTrustNeedsAnAdministrator(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	srv := f.server("trusted", true)
	id := f.tool(toolSpec{server: srv, name: "reader", annotations: `{"readOnlyHint":true}`})
	if got := f.get(id).Risk().Level; got != risk.Low {
		t.Fatalf("derived level %s, want low", got)
	}
	_, err := f.svc.Update(f.ctx, bob, id, tools.Patch{Risk: ptr("low")})
	ve := wantFields(t, err, "risk")
	if !strings.Contains(ve.For("risk"), "only an administrator") {
		t.Errorf("message %q does not say only an administrator may set it", ve.For("risk"))
	}
	if it := f.get(id); it.RiskOverride != nil {
		t.Fatalf("a tool manager stored the level %s", *it.RiskOverride)
	}
	// What the annotations give without trust, or more, is anyone's.
	if it, err := f.svc.Update(f.ctx, bob, id, tools.Patch{Risk: ptr("medium")}); err != nil || deref(it.RiskOverride) != "medium" {
		t.Fatalf("a tool manager's medium: %v %v", it.RiskOverride, err)
	}
	// An administrator may set low.
	if it, err := f.svc.Update(f.ctx, alice, id, tools.Patch{Risk: ptr("low"), MayLowerRisk: true}); err != nil || deref(it.RiskOverride) != "low" {
		t.Fatalf("an administrator's low: %v %v", it.RiskOverride, err)
	}
	// The untrusted server's tool: low is refused as it always was.
	other := f.tool(toolSpec{server: f.server("untrusted", false), name: "reader", annotations: `{"readOnlyHint":true}`})
	_, err = f.svc.Update(f.ctx, bob, other, tools.Patch{Risk: ptr("low")})
	wantFields(t, err, "risk")
}
