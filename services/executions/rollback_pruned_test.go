package executions_test

import (
	"encoding/json"
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

// A failed execution can be rolled back long after it failed, but a built-in write's
// snapshot is pruned after SnapshotRetention: the rollback then names that write as not
// undone, saying its snapshot was pruned, rather than plan a restore that would fail
// and end the rollback before the compensation of an earlier step could run.
func TestRollbackNamesAWriteWhoseSnapshotWasPruned(t *testing.T) {
	t.Parallel()
	e := startBuiltin(t)
	e.server("mt", true, "echo", "add", "fail")
	e.setRisk("mt__fail", risk.Low)
	e.run(nil)
	if err := e.svc.SetCompensation(e.ctx, admin, e.tool("mt__add").ID, e.tool("mt__echo").ID,
		map[string]executions.MappedArgument{"message": {Value: json.RawMessage(`"undo add"`)}}); err != nil {
		t.Fatal(err)
	}
	ws, err := e.app.Builtin.Workspace(router.DefaultConversation(e.admin.Actor))
	if err != nil {
		t.Fatal(err)
	}
	ex, err := e.svc.Create(e.ctx, e.admin, executions.Input{Plan: &executions.Request{Steps: []executions.RequestStep{
		step("mt__add", `{"a":1,"b":2}`),
		step("builtin__file_operations", `{"operation":"create_file","filePath":"kept.txt","content":"k"}`),
		step("mt__fail", `{}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Confirm(e.ctx, e.admin, ex.ID, ex.ConfirmationPhrase, ""); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(ex.ID, executions.Failed, 20*time.Second)
	if s := stepStatuses(e.steps(ex.ID)); !slices.Equal(s, []string{"succeeded", "succeeded", "failed"}) {
		t.Fatalf("steps: %v, want succeeded, succeeded, failed", s)
	}
	undone := func(rp *executions.RollbackPlan) []int {
		var u []int
		for _, st := range rp.Steps {
			if st.Undoes != nil {
				u = append(u, *st.Undoes)
			}
		}
		return u
	}
	_, rp, err := e.svc.PlanRollback(e.ctx, ex.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Step 3's own error is named either way (it may have taken effect).
	if got := undone(rp); rp.Problems != nil || len(rp.Missing) != 1 || !slices.Equal(got, []int{1, 0}) {
		t.Fatalf("before the prune the rollback undoes steps %v (not undone %q, problems %v); want 1, 0", got, rp.Missing, rp.Problems)
	}

	// As KeepSnapshotsPruned does once the snapshot is past SnapshotRetention.
	if n, err := e.app.Builtin.PruneSnapshots(time.Now().Add(time.Hour)); err != nil || n == 0 {
		t.Fatalf("prune: %d, %v; want the write's snapshot removed", n, err)
	}
	_, rp, err = e.svc.PlanRollback(e.ctx, ex.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := undone(rp); rp.Problems != nil || !slices.Equal(got, []int{0}) || !strings.HasPrefix(rp.Steps[0].Tool, "mt__echo") {
		t.Fatalf("after the prune the rollback undoes steps %v (problems %v); want step 1's compensation alone", got, rp.Problems)
	}
	if len(rp.Missing) != 2 || !strings.HasPrefix(rp.Missing[0], "step 2 (builtin__file_operations), its snapshot ") ||
		!strings.Contains(rp.Missing[0], "is no longer in the snapshot store (pruned: a snapshot is kept 7 days") {
		t.Fatalf("not undone: %q; want step 2 named, its snapshot pruned", rp.Missing)
	}

	if _, err := e.svc.Rollback(e.ctx, e.admin, ex.ID, executions.RollbackDecision{Hash: rp.Hash, Confirmed: true, Phrase: rp.Phrase}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(ex.ID, executions.RolledBack, 20*time.Second)
	var run, undo []string
	for _, st := range e.steps(ex.ID) {
		if st.Phase == executions.PhaseRollback {
			undo = append(undo, st.Status)
		} else {
			run = append(run, st.Status)
		}
	}
	if !slices.Equal(run, []string{"compensated", "succeeded", "failed"}) || !slices.Equal(undo, []string{"succeeded"}) {
		t.Errorf("after the rollback: run steps %v, undo steps %v; want compensated, succeeded, failed and one undo succeeded", run, undo)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "kept.txt")); string(b) != "k" {
		t.Errorf("kept.txt after the rollback: %q, %v; want it left as step 2 wrote it", b, err)
	}
}
