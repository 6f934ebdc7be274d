package executions_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/secrets"
)

// panicky previews every step as a file write, and panics when asked for a step's
// fingerprint after the first: a bug in a hook, met as a step is about to run.
type panicky struct{ calls atomic.Int32 }

func (p *panicky) PreviewPlan(_ context.Context, _, _ string, steps []executions.PreviewCall) ([]*executions.StepPreview, error) {
	out := make([]*executions.StepPreview, len(steps))
	for i := range steps {
		out[i] = &executions.StepPreview{Path: "notes.txt", Diff: "+a line", Fingerprint: "same"}
	}
	return out, nil
}

func (p *panicky) Fingerprint(context.Context, string, executions.PreviewCall) (string, error) {
	if p.calls.Add(1) > 1 {
		panic("a bug in the previewer")
	}
	return "same", nil
}

func (p *panicky) SnapshotGone(context.Context, string, string) (string, error) { return "", nil }

// A run job that panics fails its attempt through the same path as an error: the
// runner is forgotten, and on the last attempt the execution fails. River turned the
// panic into a failed attempt past that path, and on the last one discarded the job:
// the execution stayed executing with this live replica as its runner, which no sweep
// takes over, until the replica restarted.
func TestRunJobPanicGivesUp(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "echo")
	keys, err := secrets.NewKeyring(e.key)
	if err != nil {
		t.Fatal(err)
	}
	self := e.app.Replicas.Self().ID
	svc, err := executions.New(e.pool, e.r, e.tools, &executions.Options{Now: e.clock.Now, Workers: 4, Keys: keys, Local: e.app.Local,
		Previewer: &panicky{}, Runner: e.app.Replicas.Name(), RunnerID: self, RunnerAlive: e.app.Replicas.Alive, Steady: e.app.Replicas.Steady})
	if err != nil {
		t.Fatal(err)
	}
	ex, err := svc.Create(e.ctx, e.admin, executions.Input{Plan: &executions.Request{Steps: []executions.RequestStep{
		step("mt__echo", `{"message":"one"}`), step("mt__echo", `{"message":"two"}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	if ex.Status != executions.Executing {
		t.Fatalf("status %s, want executing", ex.Status)
	}
	// work is an attempt as River makes it: a panic that escapes Work is its failure.
	work := func(attempt int) (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("escaped Work: %v", p)
			}
		}()
		return executions.WorkRun(e.ctx, svc, ex.ID, attempt, 3)
	}
	runner := func() string {
		var id string
		if err := e.pool.QueryRow(e.ctx, `SELECT coalesce(runner_id::text, '') FROM executions WHERE id = $1`, ex.ID).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}

	err = work(1)
	if err == nil || strings.Contains(err.Error(), "escaped Work") {
		t.Fatalf("the first attempt: %v, want Work to fail it", err)
	}
	if got := e.get(ex.ID); got.Status != executions.Executing || runner() != "" {
		t.Fatalf("after the first attempt: %s, runner %q; want executing (River tries again), no runner", got.Status, runner())
	}
	err = work(3)
	if err == nil || strings.Contains(err.Error(), "escaped Work") {
		t.Fatalf("the last attempt: %v, want Work to fail it", err)
	}
	got := e.get(ex.ID)
	if got.Status != executions.Failed || !strings.Contains(got.Error, "could not run it") || strings.Contains(got.Error, "a bug in the previewer") {
		t.Errorf("after the last attempt: %s %q; want failed, saying it could not be run (the panic's value is for the log)", got.Status, got.Error)
	}
	if r := runner(); r != "" {
		t.Errorf("runner after the last attempt: %q, want none", r)
	}
	if s := stepStatuses(e.steps(ex.ID)); fmt.Sprint(s) != "[succeeded skipped]" {
		t.Errorf("steps: %v, want [succeeded skipped]", s)
	}
}
