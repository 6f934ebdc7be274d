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
	"github.com/toolwarden/toolwarden/services/tools"
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
	// Writes are medium risk whatever the tool's level: a person confirms the plan.
	if _, err := e.svc.Confirm(e.ctx, e.admin, ex.ID, "", ""); err != nil {
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
	// Each undo step shows what it puts back, the last write's first.
	if p := rp.Steps[0].Preview; p == nil || !strings.Contains(p.Diff, "new/: the directory the write created is removed") ||
		!strings.Contains(p.Diff, "new/b.txt: removed (the write created it)\n") || !strings.Contains(p.Diff, "-bee\n") {
		t.Fatalf("the preview of undoing the file created: %+v", p)
	}
	if p := rp.Steps[1].Preview; p == nil || p.Path != "a.txt" || !strings.Contains(p.Diff, "-BETA\n+beta\n") {
		t.Fatalf("the preview of undoing the edit: %+v", p)
	}
	// The rollback decided is the one shown: a file changed since changes what it
	// would do, and the decision is refused until the page is read again.
	changed := []byte("alpha\r\nBETA\n\tgamma ünï\nmore\n")
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), changed, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Rollback(e.ctx, e.admin, ex.ID, executions.RollbackDecision{Hash: rp.Hash, Phrase: rp.Phrase}); err == nil ||
		!strings.Contains(err.Error(), "not the one you saw") {
		t.Fatalf("a rollback decided on a preview that no longer holds: %v", err)
	}
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("alpha\r\nBETA\n\tgamma ünï\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if _, again, err := e.svc.PlanRollback(e.ctx, ex.ID); err != nil || again.Hash != rp.Hash {
		t.Fatalf("the rollback with the file as it was: %v, hash %s, want %s", err, again.Hash, rp.Hash)
	}
	// A restore deletes and moves files, so it is high risk: the phrase is typed.
	if rp.Risk != risk.High || rp.Phrase == "" {
		t.Fatalf("the rollback's risk: %s %q", rp.Risk, rp.Phrase)
	}
	if _, err := e.svc.Rollback(e.ctx, e.admin, ex.ID, executions.RollbackDecision{Hash: rp.Hash, Phrase: rp.Phrase}); err != nil {
		t.Fatal(err)
	}
	done := e.waitStatus(ex.ID, executions.RolledBack, 20*time.Second)
	if done.RollbackPlan == nil || len(done.RollbackPlan.Steps) != 2 || done.RollbackPlan.Steps[1].Preview == nil ||
		done.RollbackPlan.Steps[1].Preview.Fingerprint != rp.Steps[1].Preview.Fingerprint {
		t.Fatalf("the rollback decided does not keep the previews it was decided on: %+v", done.RollbackPlan)
	}
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

// Before approval a plan that writes files shows the diff each step will make (a later
// step on the same file against what the earlier one leaves), in conversation_id's
// workspace; a file changed after the preview makes the run stale.
func TestBuiltinPreviewStale(t *testing.T) {
	t.Parallel()
	e := startBuiltin(t)
	e.setRisk("builtin__file_operations", risk.Medium)
	e.run(nil)
	ws, err := e.app.Builtin.Workspace("conv-p")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one\ntwo\nthree\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	req := executions.Request{Steps: []executions.RequestStep{
		step("builtin__file_operations.replace_string", `{"filePath":"a.txt","oldString":"two","newString":"2"}`),
		step("builtin__file_operations.replace_string", `{"filePath":"a.txt","oldString":"2\nthree","newString":"3"}`),
		step("builtin__file_operations.create_file", `{"filePath":"b.txt","content":"bee\n"}`),
	}}
	create := func() *executions.Execution {
		t.Helper()
		ex, err := e.svc.Create(e.ctx, e.admin, executions.Input{Plan: &req, ConversationID: "conv-p"})
		if err != nil {
			t.Fatal(err)
		}
		if ex.ConversationID != "conv-p" || ex.Status != executions.AwaitingApproval {
			t.Fatalf("created: %s %q", ex.Status, ex.ConversationID)
		}
		return ex
	}
	ex := create()
	for i, want := range []string{"--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n",
		"@@ -1,3 +1,2 @@\n one\n-2\n-three\n+3\n", "--- a/b.txt\n+++ b/b.txt\n@@ -0,0 +1 @@\n+bee\n"} {
		p := ex.Plan.Steps[i].Preview
		if p == nil || !strings.Contains(p.Diff, want) {
			t.Fatalf("step %d's preview: %+v, want a diff with %q", i, p, want)
		}
	}
	if ex.Plan.Steps[0].Display != "Editing a.txt" || ex.Plan.Steps[2].Display != "Creating file b.txt" {
		t.Fatalf("the steps' display lines: %q, %q", ex.Plan.Steps[0].Display, ex.Plan.Steps[2].Display)
	}
	if ex.Plan.Steps[2].Preview.Fingerprint != "absent" {
		t.Fatalf("the fingerprint of a file to create: %q", ex.Plan.Steps[2].Preview.Fingerprint)
	}
	// Unchanged, it runs as previewed.
	if _, err := e.svc.Confirm(e.ctx, e.admin, ex.ID, "", ""); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(ex.ID, executions.Success, 20*time.Second)
	if b, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(b) != "one\n3\n" {
		t.Fatalf("a.txt: %q", b)
	}
	// Changed after the preview: stale.
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one\ntwo\nthree\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(ws, "b.txt")); err != nil {
		t.Fatal(err)
	}
	ex = create()
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one\ntwo\nthree\nfour\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Confirm(e.ctx, e.admin, ex.ID, "", ""); err != nil {
		t.Fatal(err)
	}
	got := e.waitStatus(ex.ID, executions.Failed, 20*time.Second)
	if !strings.Contains(got.Error+got.Reason, "a.txt changed since the plan's preview") {
		t.Fatalf("a stale file: %q %q", got.Error, got.Reason)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(b) != "one\ntwo\nthree\nfour\n" {
		t.Fatalf("the stale step ran: %q", b)
	}
}

// A plan's preview and fingerprint use the arguments the step will run with, the tool's
// configured defaults merged: with overwrite true as a default, create_file on a file
// that exists overwrites it, so the step shows that diff and expects the file as
// previewed. Before, the preview read the arguments as given (no overwrite), showed
// nothing and set no expectation, and the file was overwritten unseen.
func TestBuiltinPreviewUsesDefaults(t *testing.T) {
	t.Parallel()
	e := startBuiltin(t)
	e.update("builtin__file_operations", tools.Patch{MergeParams: true,
		Params: map[string]tools.ParamInput{"overwrite": {Mode: tools.ModeDefault, Value: json.RawMessage(`true`)}}})
	e.run(nil)
	ws, err := e.app.Builtin.Workspace("conv-d")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	req := executions.Request{Steps: []executions.RequestStep{
		step("builtin__file_operations.create_file", `{"filePath":"a.txt","content":"new\n"}`),
	}}
	ex, err := e.svc.Create(e.ctx, e.admin, executions.Input{Plan: &req, ConversationID: "conv-d"})
	if err != nil {
		t.Fatal(err)
	}
	p := ex.Plan.Steps[0].Preview
	if p == nil || p.Fingerprint == "" || p.Fingerprint == "absent" || !strings.Contains(p.Diff, "-old\n+new\n") {
		t.Fatalf("the preview of create_file over a file, overwrite by default: %+v", p)
	}
	// The file changes after the preview: the step is stale, not run.
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("edited since\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Confirm(e.ctx, e.admin, ex.ID, ex.ConfirmationPhrase, ""); err != nil {
		t.Fatal(err)
	}
	got := e.waitStatus(ex.ID, executions.Failed, 20*time.Second)
	if !strings.Contains(got.Error+got.Reason, "a.txt changed since the plan's preview") {
		t.Fatalf("a stale file: %q %q", got.Error, got.Reason)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(b) != "edited since\n" {
		t.Fatalf("the stale step ran: %q", b)
	}
}
