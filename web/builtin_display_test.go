package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/router"
)

// A built-in call's audit entry page says what the call did in its display line
// (seed 000 §6), as a line of its own and not only inside the raw payload.
func TestAuditEntryShowsDisplayLine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	srv.App.Enable(t, "builtin__file_operations")
	srv.App.SetRisk(t, "builtin__file_operations", risk.Low) // a write stays medium: confirmed below
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	var adminID string
	if err := srv.Pool.QueryRow(ctx, `SELECT id::text FROM users WHERE username = 'admin'`).Scan(&adminID); err != nil {
		t.Fatal(err)
	}
	// Confirmed as the test panel confirms it.
	res, err := srv.Router.Call(ctx, router.Call{Tool: "builtin__file_operations.create_file",
		Arguments: json.RawMessage(`{"filePath":"docs/notes.txt","content":"hello"}`),
		Actor:     audit.Actor{Kind: audit.ActorUser, Name: "admin"}, Role: auth.RoleAdmin,
		Source: router.SourceTestPanel, ConversationID: "conv-audit", Approval: router.Approval{Confirmed: true}})
	if err != nil || res.IsError {
		t.Fatalf("create_file: %v %+v", err, res)
	}
	api := webtest.API{T: t, Srv: srv, C: admin}
	var l auditList
	webtest.WaitFor(t, 10*time.Second, func() bool {
		api.JSON(http.MethodGet, "/api/v1/audit?action=tool.call&target_type=tool&target_id="+srv.App.ToolID(t, "builtin__file_operations"), nil, 200, &l)
		return len(l.Items) == 1
	}, "the call's audit entry")
	d := doc(t, srv.Get(t, admin, fmt.Sprintf("/audit/%d", l.Items[0].ID)))
	if got := strings.TrimSpace(d.Find(`[data-testid=entry-what] [data-testid=entry-display]`).Text()); got != "Creating file notes.txt" {
		t.Fatalf("the entry's display line: %q, want %q", got, "Creating file notes.txt")
	}
	if !strings.Contains(d.Find(`[data-testid=entry-payload]`).Text(), `"display": "Creating file notes.txt"`) {
		t.Error("the payload no longer carries the display line")
	}
	// An entry that is no tool call has no such line.
	var other auditList
	api.JSON(http.MethodGet, "/api/v1/audit?action=user.login", nil, 200, &other)
	if len(other.Items) == 0 {
		t.Fatal("no login entry")
	}
	if d := doc(t, srv.Get(t, admin, fmt.Sprintf("/audit/%d", other.Items[0].ID))); d.Find(`[data-testid=entry-display]`).Length() != 0 {
		t.Error("a login entry shows a display line")
	}
}

// A plan with a built-in write shows the write's display line on its approval card in
// /approvals and, once it ran, in its execution's log.
func TestExecutionDisplayLineOnCardAndLog(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	srv.App.Enable(t, "builtin__file_operations")
	srv.App.SetRisk(t, "builtin__file_operations", risk.Low) // a write stays medium: an approver confirms
	srv.CreateUser(t, "ann", auth.RoleToolUser, xpPassword)
	ann := svClient{t: t, srv: srv, c: srv.Login(t, "ann", xpPassword)}
	adminC := srv.Login(t, "admin", webtest.AdminPassword)
	admin := svClient{t: t, srv: srv, c: adminC}
	body := plan(step("builtin__file_operations.create_file", map[string]any{"filePath": "docs/notes.txt", "content": "hello"}))
	body["conversation_id"] = "conv-card"
	var ex apiExec
	ann.json(http.MethodPost, "/api/v1/executions", body, 201, &ex)
	if ex.Status != "awaiting_approval" {
		t.Fatalf("created %+v", ex)
	}

	d := page(t, srv.Get(t, adminC, "/approvals"))
	card := d.Find(`[data-testid=approval-item][data-execution-id="` + ex.ID + `"]`)
	if card.Length() != 1 {
		t.Fatalf("no approval card for %s", ex.ID)
	}
	if got := strings.TrimSpace(card.Find(`[data-testid=approval-steps] li`).Text()); got != "Creating file notes.txt" {
		t.Fatalf("the card's steps: %q, want %q", got, "Creating file notes.txt")
	}

	admin.json(http.MethodPost, "/api/v1/executions/"+ex.ID+"/confirm", map[string]any{}, 200, nil)
	waitExec(t, admin, ex.ID, "success")
	var line string
	webtest.WaitFor(t, 10*time.Second, func() bool {
		d := page(t, srv.Get(t, adminC, "/executions/"+ex.ID))
		line = strings.TrimSpace(d.Find(`[data-testid=log-panel] [data-testid=log-line][data-kind="tool.started"]`).Text())
		return line != ""
	}, "the tool.started line in the execution's log")
	if !strings.Contains(line, "builtin__file_operations started: Creating file notes.txt") {
		t.Fatalf("the log's tool.started line: %q", line)
	}
}
