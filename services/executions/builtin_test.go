package executions_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/secrets"
)

// startBuiltin is start with the built-in server, its file tool enabled at LOW risk.
func startBuiltin(t *testing.T) *env {
	t.Helper()
	key, err := secrets.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	e := startApp(t, dbtest.NewURL(t), key, true)
	e.admin = e.user("boss", auth.RoleAdmin)
	e.enable("builtin__file_operations")
	e.setRisk("builtin__file_operations", risk.Low)
	return e
}

// A plan that edits two files and then fails rolls back to the exact previous bytes:
// each built-in write's automatic compensation restores the snapshot it took.
func TestBuiltinWriteRollback(t *testing.T) {
	t.Parallel()
	e := startBuiltin(t)
	e.run(nil)
	ws, err := e.app.Builtin.Workspace(router.DefaultConversation(e.admin.Actor))
	if err != nil {
		t.Fatal(err)
	}
	a := []byte("alpha\r\nbeta\n\tgamma ünï\n")
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), a, 0o640); err != nil {
		t.Fatal(err)
	}
	req := executions.Request{Steps: []executions.RequestStep{
		step("builtin__file_operations.replace_string", `{"filePath":"a.txt","oldString":"beta","newString":"BETA"}`),
		step("builtin__file_operations", `{"operation":"create_file","filePath":"new/b.txt","content":"bee"}`),
		step("builtin__file_operations.replace_string", `{"filePath":"a.txt","oldString":"not there","newString":"x"}`),
	}}
	ex, err := e.svc.Create(e.ctx, e.admin, executions.Input{Plan: &req})
	if err != nil {
		t.Fatal(err)
	}
	e.waitStatus(ex.ID, executions.Failed, 20*time.Second)
	if b, _ := os.ReadFile(filepath.Join(ws, "a.txt")); bytes.Equal(b, a) {
		t.Fatal("the first step changed nothing")
	}
	_, rp, err := e.svc.PlanRollback(e.ctx, ex.ID)
	if err != nil || rp.Problems != nil || len(rp.Missing) != 0 || len(rp.Steps) != 2 {
		t.Fatalf("the rollback plan: %v %+v", err, rp)
	}
	for _, st := range rp.Steps {
		if !strings.Contains(string(st.Arguments), `"restore_snapshot"`) {
			t.Fatalf("an undo step is not restore_snapshot: %s", st.Arguments)
		}
	}
	if _, err := e.svc.Rollback(e.ctx, e.admin, ex.ID, executions.RollbackDecision{Hash: rp.Hash}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(ex.ID, executions.RolledBack, 20*time.Second)
	if b, _ := os.ReadFile(filepath.Join(ws, "a.txt")); !bytes.Equal(b, a) {
		t.Fatalf("a.txt after the rollback: %q, want %q", b, a)
	}
	if _, err := os.Stat(filepath.Join(ws, "new")); !os.IsNotExist(err) {
		t.Fatalf("what the second step created is still there: %v", err)
	}
	for _, st := range e.steps(ex.ID) {
		if st.Phase == executions.PhaseRollback {
			var r struct {
				Structured json.RawMessage `json:"structured_content"`
			}
			_ = json.Unmarshal(st.Result, &r)
			if st.Status != executions.StepSucceeded || !strings.Contains(string(r.Structured), "restored") {
				t.Fatalf("undo step %d: %s %s", st.Position, st.Status, st.Result)
			}
		}
	}
}
