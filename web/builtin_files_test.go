package web_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
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
