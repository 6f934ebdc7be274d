package executions_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/router"
)

// A built-in write that failed part way names the snapshot of what it changed (here a
// restore_snapshot that put b.txt back, then could not put a.txt back over a directory
// with files in it): the rollback restores that snapshot first, before the earlier
// steps' undo, and the failed step stays failed.
func TestRollbackRestoresAFailedBuiltinWrite(t *testing.T) {
	t.Parallel()
	e := startBuiltin(t)
	e.run(nil)
	ws, err := e.app.Builtin.Workspace(router.DefaultConversation(e.admin.Actor))
	if err != nil {
		t.Fatal(err)
	}
	run := func(want executions.Status, steps ...executions.RequestStep) *executions.Execution {
		t.Helper()
		ex, err := e.svc.Create(e.ctx, e.admin, executions.Input{Plan: &executions.Request{Steps: steps}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.svc.Confirm(e.ctx, e.admin, ex.ID, ex.ConfirmationPhrase, ""); err != nil {
			t.Fatal(err)
		}
		return e.waitStatus(ex.ID, want, 20*time.Second)
	}
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("alpha"), 0o644); err != nil {
		t.Fatal(err)
	}
	moved := run(executions.Success, step("builtin__file_operations", `{"operation":"rename_file","filePath":"a.txt","newPath":"b.txt"}`))
	snap := e.steps(moved.ID)[0].SnapshotID
	if err := os.MkdirAll(filepath.Join(ws, "a.txt", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	ex := run(executions.Failed,
		step("builtin__file_operations", `{"operation":"create_file","filePath":"c.txt","content":"c"}`),
		step("builtin__file_operations", `{"operation":"restore_snapshot","snapshotId":"`+snap+`"}`))
	sts := e.steps(ex.ID)
	if s := stepStatuses(sts); !slices.Equal(s, []string{"succeeded", "failed"}) || sts[1].SnapshotID == "" {
		t.Fatalf("steps: %v, step 2's snapshot %q, result %s; want succeeded, then failed naming a snapshot", s, sts[1].SnapshotID, sts[1].Result)
	}
	if _, err := os.Stat(filepath.Join(ws, "b.txt")); !os.IsNotExist(err) {
		t.Fatalf("the failed restore did not remove b.txt: %v", err)
	}

	_, rp, err := e.svc.PlanRollback(e.ctx, ex.ID)
	if err != nil {
		t.Fatal(err)
	}
	var undoes []int
	for _, st := range rp.Steps {
		if st.Undoes != nil {
			undoes = append(undoes, *st.Undoes)
		}
		if !strings.Contains(string(st.Arguments), `"restore_snapshot"`) {
			t.Errorf("an undo step is not restore_snapshot: %s", st.Arguments)
		}
	}
	if rp.Problems != nil || len(rp.Missing) != 0 || !slices.Equal(undoes, []int{1, 0}) {
		t.Fatalf("the rollback plan undoes steps %v (missing %q, problems %v); want the failed step 2's write, then step 1's",
			undoes, rp.Missing, rp.Problems)
	}
	if _, err := e.svc.Rollback(e.ctx, e.admin, ex.ID, executions.RollbackDecision{Hash: rp.Hash, Phrase: rp.Phrase}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(ex.ID, executions.RolledBack, 20*time.Second)
	if b, err := os.ReadFile(filepath.Join(ws, "b.txt")); string(b) != "alpha" {
		t.Errorf("b.txt after the rollback: %q, %v; want alpha, as before the failed restore", b, err)
	}
	if _, err := os.Stat(filepath.Join(ws, "c.txt")); !os.IsNotExist(err) {
		t.Errorf("c.txt is still there after the rollback: %v", err)
	}
	if s := stepStatuses(e.steps(ex.ID)); !slices.Equal(s, []string{"compensated", "failed"}) {
		t.Errorf("after the rollback the steps are %v, want compensated, failed", s)
	}
}

// A step whose tool answered with its own error result ran on its server, and may have
// done part of its work: the rollback names it among what nothing undoes.
func TestRollbackNamesAStepTheToolFailed(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "echo", "fail")
	e.setRisk("mt__fail", risk.Low)
	e.run(nil)
	ex, err := e.svc.Create(e.ctx, e.admin, executions.Input{Plan: &executions.Request{
		Steps:    []executions.RequestStep{step("mt__echo", `{"message":"one"}`), step("mt__fail", `{"message":"half done"}`)},
		Rollback: []executions.RequestStep{step("mt__echo", `{"message":"undo one"}`)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	e.waitStatus(ex.ID, executions.Failed, 20*time.Second)
	if s := stepStatuses(e.steps(ex.ID)); !slices.Equal(s, []string{"succeeded", "failed"}) {
		t.Fatalf("steps: %v, want succeeded, failed", s)
	}
	_, rp, err := e.svc.PlanRollback(e.ctx, ex.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rp.Problems != nil || len(rp.Steps) != 1 || rp.Steps[0].Undoes == nil || *rp.Steps[0].Undoes != 0 {
		t.Fatalf("rollback: steps %+v, problems %v; want step 1 undone", rp.Steps, rp.Problems)
	}
	if !slices.ContainsFunc(rp.Missing, func(m string) bool {
		return strings.HasPrefix(m, "step 2 (mt__fail)") && strings.Contains(m, "it may have taken effect")
	}) {
		t.Errorf("the rollback plan does not name the step the tool failed as one that may have taken effect: %q", rp.Missing)
	}
}

// A built-in tool whose error means it changed nothing (a memory operation is one
// transaction; a question cancelled or expired granted nothing) is not named as a step
// that may have taken effect.
func TestRollbackPassesOverAnErrorThatChangedNothing(t *testing.T) {
	t.Parallel()
	e := startBuiltin(t)
	e.enable("builtin__memory_operations")
	e.run(nil)
	ex, err := e.svc.Create(e.ctx, e.admin, executions.Input{Plan: &executions.Request{Steps: []executions.RequestStep{
		step("builtin__file_operations", `{"operation":"create_file","filePath":"quiet.txt","content":"q"}`),
		step("builtin__memory_operations", `{"operation":"delete","id":"no-such-note"}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Confirm(e.ctx, e.admin, ex.ID, ex.ConfirmationPhrase, ""); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(ex.ID, executions.Failed, 20*time.Second)
	if s := stepStatuses(e.steps(ex.ID)); !slices.Equal(s, []string{"succeeded", "failed"}) {
		t.Fatalf("steps: %v, want succeeded, failed", s)
	}
	_, rp, err := e.svc.PlanRollback(e.ctx, ex.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(rp.Steps) != 1 || len(rp.Missing) != 0 {
		t.Fatalf("rollback: steps %d, not undone %q; want the file's restore only, nothing named", len(rp.Steps), rp.Missing)
	}
}

// A built-in write whose error says it changed files it could not keep a snapshot of
// (services/builtin: "changed", no snapshotId) is named: nothing undoes it.
func TestRollbackNamesAnUnkeptBuiltinChange(t *testing.T) {
	t.Parallel()
	e := startBuiltin(t)
	e.run(nil)
	ex, err := e.svc.Create(e.ctx, e.admin, executions.Input{Plan: &executions.Request{Steps: []executions.RequestStep{
		step("builtin__file_operations", `{"operation":"create_file","filePath":"kept.txt","content":"k"}`),
		step("builtin__file_operations", `{"operation":"create_file","filePath":"lost.txt","content":"l"}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Confirm(e.ctx, e.admin, ex.ID, ex.ConfirmationPhrase, ""); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(ex.ID, executions.Success, 20*time.Second)
	// As the built-in server answers a write whose snapshot could not be saved.
	if _, err := e.pool.Exec(e.ctx, `UPDATE tool_calls SET status = 'failed', error = 'the tool reported an error',
		result = '{"content":[{"type":"text","text":"the write happened, but its snapshot could not be saved"}],"structured_content":{"errorType":"ExecutionFailed","changed":true},"is_error":true}'
		WHERE execution_id = $1 AND phase = 'run' AND position = 1`, ex.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(e.ctx, `UPDATE executions SET status = 'failed' WHERE id = $1`, ex.ID); err != nil {
		t.Fatal(err)
	}
	_, rp, err := e.svc.PlanRollback(e.ctx, ex.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(rp.Steps) != 1 || len(rp.Missing) != 1 || !strings.HasPrefix(rp.Missing[0], "step 2 (builtin__file_operations), failed after changing files") {
		t.Fatalf("rollback: steps %d, not undone %q; want step 1's restore, and step 2 named", len(rp.Steps), rp.Missing)
	}
}
