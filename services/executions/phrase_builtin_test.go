package executions_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/router"
)

// The phrase of a HIGH built-in step names its operation and what it acts on (filePath,
// a rename's newPath, a restore's snapshotId), so that approving the deletion of one file
// is not typing the same words as approving any other. What is typed into a terminal is
// a secret argument (writeOnly) and a credential is never shown: neither is in it.
func TestPlanPhraseBuiltin(t *testing.T) {
	t.Parallel()
	st := func(tool, args string) executions.PlannedStep {
		return executions.PlannedStep{Prepared: router.Prepared{Tool: tool, Arguments: json.RawMessage(args),
			Risk: risk.Decision{Level: risk.High}}}
	}
	const files, term = "builtin__file_operations", "builtin__terminal_operations"
	long := strings.Repeat("é", 70)
	for _, tc := range []struct {
		name string
		step executions.PlannedStep
		want string
	}{
		{"delete", st(files, `{"operation":"delete_file","filePath":"important.db"}`), files + " delete_file important.db"},
		{"dotted name", st(files, `{"filePath":"a/b.txt","operation":"create_directory"}`), files + " create_directory a/b.txt"},
		{"rename", st(files, `{"operation":"rename_file","filePath":"a.txt","newPath":"b.txt","overwrite":true}`), files + " rename_file a.txt b.txt"},
		{"copy", st(files, `{"operation":"copy_file","filePath":"a.txt","newPath":"sub/a.txt"}`), files + " copy_file a.txt sub/a.txt"},
		{"restore", st(files, `{"operation":"restore_snapshot","snapshotId":"20261205T124500-ab12cd"}`), files + " restore_snapshot 20261205T124500-ab12cd"},
		{"long parts cut each", st(files, `{"operation":"rename_file","filePath":"`+long+`","newPath":"`+long+`"}`),
			files + " rename_file " + strings.Repeat("é", 28) + "..." + strings.Repeat("é", 29) + " " + strings.Repeat("é", 28) + "..." + strings.Repeat("é", 29)},
		{"operation only", st(files, `{"operation":"delete_file"}`), files + " delete_file"},
		{"spaces in a path", st(files, `{"operation":"delete_file","filePath":" my\tnotes  .txt "}`), files + " delete_file my notes .txt"},
		{"credential in the path", st(files, `{"operation":"delete_file","filePath":"token=ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"}`), files + " delete_file"},
		{"credential in the destination", st(files, `{"operation":"rename_file","filePath":"a.txt","newPath":"ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789.txt"}`), files + " rename_file a.txt"},
		{"credential in the operation", st("x__do", `{"operation":"token=ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789","path":"/p"}`), "x__do /p"},
		{"multi-line operation", st("x__do", `{"operation":"a\nb","path":"/p"}`), "x__do /p"},
		{"operation not a string", st("x__do", `{"operation":7,"path":"/p"}`), "x__do /p"},
		{"terminal input withheld", st(term, `{"operation":"send_input","sessionId":"s1","input":"hunter2\n"}`), term + " send_input"},
		{"terminal command", st(term, `{"operation":"run_command","command":"rm -rf build"}`), term + " run_command rm -rf build"},
		// Other tools: no operation, their targets and destination.
		{"other tool", st("fs__rm", `{"path":"/tmp/x","newPath":"/tmp/y"}`), "fs__rm /tmp/x /tmp/y"},
		{"every target", st("db__drop", `{"name":"n","table":"t","path":"p"}`), "db__drop p n t"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := (executions.Plan{Steps: []executions.PlannedStep{tc.step}}).Phrase(); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// Through the service: deleting a built-in file asks for a phrase that names the file,
// the tool's name alone is refused, and the rollback's restore_snapshot names its snapshot.
func TestBuiltinDeletePhrase(t *testing.T) {
	t.Parallel()
	e := startBuiltin(t)
	e.run(nil)
	ws, err := e.app.Builtin.Workspace(router.DefaultConversation(e.admin.Actor))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "important.db"), []byte("rows"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("alpha"), 0o640); err != nil {
		t.Fatal(err)
	}
	req := executions.Request{Steps: []executions.RequestStep{
		step("builtin__file_operations", `{"operation":"delete_file","filePath":"important.db"}`),
		step("builtin__file_operations.replace_string", `{"filePath":"a.txt","oldString":"not there","newString":"x"}`),
	}}
	ex, err := e.svc.Create(e.ctx, e.admin, executions.Input{Plan: &req})
	if err != nil {
		t.Fatal(err)
	}
	const want = "builtin__file_operations delete_file important.db"
	if ex.Risk != "high" || ex.ConfirmationPhrase != want {
		t.Fatalf("got risk %s, phrase %q; want high, %q", ex.Risk, ex.ConfirmationPhrase, want)
	}
	_, err = e.svc.Confirm(e.ctx, e.admin, ex.ID, "builtin__file_operations", ex.Hash())
	if got, ok := executions.WrongPhrase(err); !ok || got != want {
		t.Fatalf("the tool's name alone: got %v, want a wrong_phrase asking for %q", err, want)
	}
	if _, err := e.svc.Confirm(e.ctx, e.admin, ex.ID, want, ex.Hash()); err != nil {
		t.Fatalf("with the phrase: %v", err)
	}
	e.waitStatus(ex.ID, executions.Failed, 20*time.Second)
	if _, err := os.Stat(filepath.Join(ws, "important.db")); !os.IsNotExist(err) {
		t.Fatalf("the delete did not run: %v", err)
	}
	_, rp, err := e.svc.PlanRollback(e.ctx, ex.ID)
	if err != nil || rp.Problems != nil || len(rp.Steps) != 1 {
		t.Fatalf("the rollback plan: %v %+v", err, rp)
	}
	var undo struct {
		SnapshotID string `json:"snapshotId"`
	}
	if err := json.Unmarshal(rp.Steps[0].Arguments, &undo); err != nil || undo.SnapshotID == "" {
		t.Fatalf("the undo step's arguments: %s (%v)", rp.Steps[0].Arguments, err)
	}
	if wantRP := "builtin__file_operations restore_snapshot " + undo.SnapshotID; rp.Risk != risk.High || rp.Phrase != wantRP {
		t.Fatalf("the rollback: risk %s, phrase %q; want high, %q", rp.Risk, rp.Phrase, wantRP)
	}
	if _, err := e.svc.Rollback(e.ctx, e.admin, ex.ID, executions.RollbackDecision{Hash: rp.Hash, Phrase: rp.Phrase}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(ex.ID, executions.RolledBack, 20*time.Second)
	if b, err := os.ReadFile(filepath.Join(ws, "important.db")); err != nil || string(b) != "rows" {
		t.Fatalf("important.db after the rollback: %q %v", b, err)
	}
}
