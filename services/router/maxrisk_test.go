package router_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/router"
)

// A call pinned with the level it was approved at (Pin.MaxRisk, an execution's step,
// which skips the approval check) is refused as stale_plan when it is rated higher at
// the call, with its arguments merged, or its server no longer trusted (no new
// configuration version); at that level or lower, or with no level pinned, it runs.
func TestPinMaxRisk(t *testing.T) {
	t.Parallel()
	e := start(t, &router.Options{ArgumentRisk: func(name string, args json.RawMessage) (risk.Level, string, bool) {
		if name == "mr__echo" && strings.Contains(string(args), "danger") {
			return risk.High, "Its message says danger.", true
		}
		return "", "", false
	}})
	e.server("mr", true, "echo")
	p, err := e.r.Prepare(e.ctx, router.Call{Tool: "mr__echo", Arguments: json.RawMessage(`{"message":"hi"}`), Actor: admin,
		Role: auth.RoleAdmin, Source: router.SourceExecution})
	if err != nil || p.Risk.Level != risk.Low {
		t.Fatalf("prepare mr__echo: %+v, %v; want low risk", p, err)
	}
	call := func(args string, max risk.Level) error {
		pin := p.Pin
		pin.MaxRisk = max
		_, err := e.r.Call(e.ctx, router.Call{Tool: pin.ToolID, Arguments: json.RawMessage(args), Actor: admin, Role: auth.RoleAdmin,
			Source: router.SourceExecution, Approval: router.Approval{Execution: "e1"}, Pin: &pin})
		return err
	}
	for _, tc := range []struct {
		args string
		max  risk.Level
	}{
		{`{"message":"hi"}`, risk.Low},
		{`{"message":"hi"}`, risk.Medium},
		{`{"message":"danger"}`, risk.High},
		{`{"message":"danger"}`, ""}, // no level pinned: as before
	} {
		if err := call(tc.args, tc.max); err != nil {
			t.Errorf("%s approved at %q: %v, want it run", tc.args, tc.max, err)
		}
	}
	err = call(`{"message":"danger"}`, risk.Medium)
	var re *router.Error
	if !errors.As(err, &re) || re.Code != router.CodeStale || re.Kind != fault.KindStale ||
		!strings.Contains(re.Message, "mr__echo is high risk now, medium when it was approved (Its message says danger.)") {
		t.Fatalf("arguments rated high, approved at medium: got %v, want stale_plan saying the risk rose", err)
	}
	e.flush()
	if n := e.count(`SELECT count(*) FROM tool_usage_logs WHERE error_code = $1`, router.CodeStale); n != 1 {
		t.Errorf("refused stale calls recorded: got %d, want 1", n)
	}

	off := false
	if _, err := e.reg.UpdateServer(e.ctx, audit.System, e.tool("mr__echo").ServerID, registry.Patch{Trusted: &off}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, func() bool {
		d, err := e.r.RiskOf(e.ctx, "mr__echo", json.RawMessage(`{"message":"hi"}`))
		return err == nil && d.Level == risk.Medium
	}, "the router never saw mr__echo become medium")
	if cur := e.tool("mr__echo"); cur.ConfigVersion != p.ConfigVersion {
		t.Fatalf("configuration version: got %d, want %d (trust makes none)", cur.ConfigVersion, p.ConfigVersion)
	}
	err = call(`{"message":"hi"}`, risk.Low)
	if !errors.As(err, &re) || re.Code != router.CodeStale || !strings.Contains(re.Message, "mr__echo is medium risk now, low when it was approved") {
		t.Fatalf("server no longer trusted, approved at low: got %v, want stale_plan saying the risk rose", err)
	}
	if err := call(`{"message":"hi"}`, risk.Medium); err != nil {
		t.Errorf("server no longer trusted, approved at medium: %v, want it run", err)
	}
}
