package web_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/risk"
)

// POST /api/v1/executions takes the conversation the steps run in; the execution page
// shows the diff a built-in file write will make before it is approved.
func TestExecutionFileDiffAPI(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	srv.App.Enable(t, "builtin__file_operations")
	ws, err := srv.App.Builtin.Workspace("conv-api")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("old line\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	admin := svClient{t: t, srv: srv, c: srv.Login(t, "admin", webtest.AdminPassword)}
	body := plan(step("builtin__file_operations.replace_string", map[string]any{"filePath": "notes.txt", "oldString": "old", "newString": "new"}))
	body["conversation_id"] = "conv-api"
	var ex struct {
		ID             string `json:"id"`
		Status         string `json:"status"`
		ConversationID string `json:"conversation_id"`
	}
	admin.json(http.MethodPost, "/api/v1/executions", body, 201, &ex)
	if ex.ConversationID != "conv-api" || ex.Status != "awaiting_approval" {
		t.Fatalf("created %+v", ex)
	}
	res := srv.Get(t, admin.c, "/executions/"+ex.ID)
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, want := range []string{`data-testid="step-diff"`, `<del class="diff-line diff-del"><span class="visually-hidden">removed: </span>-old line`,
		`<ins class="diff-line diff-add"><span class="visually-hidden">added: </span>+new line`, "the snapshot this write takes"} {
		if !strings.Contains(string(page), want) {
			t.Fatalf("the execution page lacks %q", want)
		}
	}
	body["conversation_id"] = strings.Repeat("c", 201)
	expectErr(t, admin, http.MethodPost, "/api/v1/executions", body, 400, "invalid_input")
}

// A failed plan's rollback panel offers to undo a built-in file write by restoring
// its snapshot, and shows what the restore puts back.
func TestRollbackPanelRestoresSnapshot(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	srv.App.Enable(t, "builtin__file_operations")
	srv.App.SetRisk(t, "builtin__file_operations", risk.Low)
	admin := svClient{t: t, srv: srv, c: srv.Login(t, "admin", webtest.AdminPassword)}
	body := plan(step("builtin__file_operations.create_file", map[string]any{"filePath": "made.txt", "content": "x"}),
		step("builtin__file_operations.replace_string", map[string]any{"filePath": "made.txt", "oldString": "absent", "newString": "y"}))
	body["conversation_id"] = "conv-rb"
	var ex apiExec
	admin.json(http.MethodPost, "/api/v1/executions", body, 201, &ex)
	// Writes are medium risk whatever the tool's level: the admin confirms the plan.
	admin.json(http.MethodPost, "/api/v1/executions/"+ex.ID+"/confirm", map[string]any{}, 200, nil)
	waitExec(t, admin, ex.ID, "failed")
	res := srv.Get(t, admin.c, "/executions/"+ex.ID)
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	i := strings.Index(string(page), `data-testid="rollback-panel"`)
	if i < 0 || !strings.Contains(string(page[i:]), "restore_snapshot") || strings.Contains(string(page[i:]), `data-testid="rollback-missing"`) {
		t.Fatalf("the rollback panel does not restore the snapshot:\n%s", page[max(i, 0):])
	}
	// It shows what the restore puts back: the file the plan created is removed.
	panel := string(page[i:])
	for _, want := range []string{`data-testid="step-diff"`, "made.txt: removed (the write created it)",
		`<del class="diff-line diff-del"><span class="visually-hidden">removed: </span>-x`} {
		if !strings.Contains(panel, want) {
			t.Fatalf("the rollback panel lacks %q:\n%s", want, panel)
		}
	}
	// The API shows it too, with the hash that binds it.
	var rb struct {
		Steps []struct {
			Preview *struct{ Path, Diff string } `json:"preview"`
		} `json:"steps"`
		Hash string `json:"rollback_hash"`
	}
	admin.json(http.MethodGet, "/api/v1/executions/"+ex.ID+"/rollback", nil, 200, &rb)
	if len(rb.Steps) != 1 || rb.Steps[0].Preview == nil || rb.Steps[0].Preview.Path != "made.txt" ||
		!strings.Contains(rb.Steps[0].Preview.Diff, "-x") || rb.Hash == "" {
		t.Fatalf("GET …/rollback: %+v", rb)
	}
}

// The page of file_operations says that its reads run without asking while nobody
// set its level, and what they would do without an administrator's level once one is
// set; another tool's page says nothing of it.
func TestToolPageSaysReadsAreLow(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	srv.App.Enable(t, "builtin__file_operations")
	c := srv.Login(t, "admin", webtest.AdminPassword)
	note := func(qualified string) string {
		t.Helper()
		return strings.TrimSpace(page(t, srv.Get(t, c, "/tools/"+toolID(t, srv, qualified))).Find(`[data-testid="operation-risk"]`).Text())
	}
	if got := note("builtin__file_operations"); !strings.HasPrefix(got, "Its reads (read_file,") || !strings.Contains(got, "run without asking") {
		t.Fatalf("the note as discovered: %q", got)
	}
	srv.App.SetRisk(t, "builtin__file_operations", risk.High)
	if got := note("builtin__file_operations"); !strings.HasPrefix(got, "Without the override, its reads") {
		t.Fatalf("the note with an administrator's level: %q", got)
	}
	if got := note("builtin__think"); got != "" {
		t.Fatalf("think's page: %q", got)
	}
}
