package executions_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/router"
)

// riseAtRun is a Previewer whose run-time check of a step's preview (staleFile, between
// checkBinding and the step's call) first makes the tool's server untrusted, and waits
// until the router rates the tool at least medium: a rise in the window after the
// plan's last check, with no new configuration version.
type riseAtRun struct {
	e    *env
	tool string
	once sync.Once
	err  error
}

func (p *riseAtRun) PreviewPlan(_ context.Context, _, _ string, steps []executions.PreviewCall) ([]*executions.StepPreview, error) {
	out := make([]*executions.StepPreview, len(steps))
	for i := range steps {
		out[i] = &executions.StepPreview{Path: "n/a", Fingerprint: "same"}
	}
	return out, nil
}

func (p *riseAtRun) Fingerprint(ctx context.Context, _ string, _ executions.PreviewCall) (string, error) {
	p.once.Do(func() { p.err = p.untrust(ctx) })
	return "same", p.err
}

func (p *riseAtRun) SnapshotGone(context.Context, string, string) (string, error) { return "", nil }

func (p *riseAtRun) untrust(ctx context.Context) error {
	off := false
	if _, err := p.e.reg.UpdateServer(ctx, audit.System, p.e.tool(p.tool).ServerID, registry.Patch{Trusted: &off}); err != nil {
		return err
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if d, err := p.e.r.RiskOf(ctx, p.tool, json.RawMessage(sampleArgs(p.tool))); err == nil && d.Level != risk.Low {
			return nil
		}
	}
	return fmt.Errorf("the router never saw %s rise above low", p.tool)
}

// A LOW step (approved by policy) whose server is made untrusted after checkBinding
// found it unchanged, just before its call, is not run at MEDIUM: the router refuses it
// as stale_plan, saying its risk rose, and the plan is handled as stale, as when
// checkBinding finds a breach: the step skipped (never run), the execution failed with
// the router's reason, audited as execution.stale.
func TestRiskRiseBeforeCallRefused(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "echo")
	hook := &riseAtRun{e: e, tool: "mt__echo"}
	svc, err := executions.New(e.pool, e.r, e.tools, &executions.Options{Now: e.clock.Now, Workers: 4, Keys: mustKeyring(t, e.key),
		Local: e.app.Local, Previewer: hook})
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	ex := e.create(e.admin, step("mt__echo", `{"message":"one"}`), step("mt__echo", `{"message":"two"}`))
	if ex.Status != executions.Executing || ex.Approval != "policy" || ex.Plan.Steps[0].Risk.Level != risk.Low {
		t.Fatalf("the LOW plan: %s approved by %q, want executing by policy at low", ex.Status, ex.Approval)
	}
	e.run(nil)
	got := e.waitEnded(ex.ID, 30*time.Second)
	if hook.err != nil {
		t.Fatal(hook.err)
	}
	const want = "step 1 (mt__echo) was not run: mt__echo is medium risk now, low when it was approved"
	if got.Status != executions.Failed || !strings.HasPrefix(got.Error, want) {
		t.Fatalf("run with the risk risen before the call: got %s (%q), want failed with %q…", got.Status, got.Error, want)
	}
	st := e.steps(ex.ID)
	if s := stepStatuses(st); !slices.Equal(s, []string{"skipped", "skipped"}) || st[0].Error != "" || st[0].CallID == nil {
		t.Fatalf("its steps: got %v (error %q, call %v), want skipped, skipped, the first naming its refused call", s, st[0].Error, st[0].CallID)
	}
	if n := e.count(`SELECT count(*) FROM audit_log WHERE target_id = $1 AND action = 'execution.stale' AND result = 'failure'`, ex.ID); n != 1 {
		t.Errorf("execution.stale audit rows with result failure: got %d, want 1", n)
	}
	e.wantAudits(ex.ID, map[string]int{"execution.failed": 0})
	e.bothTopics(ex.ID, "execution.failed", 1)
	checkInvariant(t, e, ex.ID)
	e.flush()
	if n := e.count(`SELECT count(*) FROM tool_usage_logs WHERE source = 'execution' AND NOT success AND error_code = $2 AND metadata->>'call_id' = $1`,
		*st[0].CallID, router.CodeStale); n != 1 {
		t.Errorf("the step's call refused as %s: got %d records, want 1", router.CodeStale, n)
	}
}
