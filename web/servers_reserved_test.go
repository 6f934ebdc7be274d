package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/registry"
)

// The reserved server names are refused by the API and the page form, on the name
// field; a server that had one before they were reserved is shown with a notice asking
// for it to be renamed, on the list and on its page, and the API marks it.
func TestReservedServerNamePages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, nil)
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	api := svClient{t: t, srv: srv, c: admin}

	status, raw := api.do(http.MethodPost, "/api/v1/servers", map[string]any{"name": "toolwarden", "type": "sse", "url": "http://127.0.0.1:9/sse"})
	var e apiErr
	_ = json.Unmarshal(raw, &e)
	if status != http.StatusBadRequest || len(e.Error.Details) != 1 || e.Error.Details[0].Path != "name" ||
		e.Error.Details[0].Message != registry.ReservedNameMessage("toolwarden") {
		t.Fatalf("POST /api/v1/servers named toolwarden: got %d %s", status, raw)
	}
	res := srv.PostForm(t, admin, "/servers", httpForm("builtin", "http://127.0.0.1:9/mcp"))
	doc := page(t, res)
	if got := doc.Find("[data-testid=error-name]").Text(); res.StatusCode != http.StatusUnprocessableEntity ||
		got != registry.ReservedNameMessage("builtin") {
		t.Fatalf("the form with the name builtin: got %d, name error %q", res.StatusCode, got)
	}

	// A server named toolwarden before the name was reserved (the trigger of migration
	// 21 is set aside to make one).
	sv, err := srv.Registry.CreateServer(ctx, audit.System, registry.Spec{Name: "legacy", Type: registry.TypeSSE,
		URL: "http://127.0.0.1:9/sse"})
	if err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{`ALTER TABLE mcp_servers DISABLE TRIGGER mcp_servers_reserved_name`,
		`UPDATE mcp_servers SET name = 'toolwarden' WHERE id = '` + sv.ID + `'`,
		`ALTER TABLE mcp_servers ENABLE TRIGGER mcp_servers_reserved_name`} {
		if _, err := srv.Owner.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	for _, path := range []string{"/servers", "/servers/" + sv.ID} {
		doc := page(t, srv.Get(t, admin, path))
		notice := doc.Find("[data-testid=reserved-name]")
		if notice.Length() != 1 || !strings.Contains(notice.Text(), "toolwarden is reserved for Toolwarden's own tools") ||
			notice.Find(`a[href="/servers/`+sv.ID+`/edit"]`).Length() != 1 {
			t.Fatalf("%s: the notice %q (%d)", path, notice.Text(), notice.Length())
		}
	}
	var got struct {
		Name         string `json:"name"`
		NameReserved bool   `json:"name_reserved"`
	}
	api.json(http.MethodGet, "/api/v1/servers/"+sv.ID, nil, http.StatusOK, &got)
	if got.Name != "toolwarden" || !got.NameReserved {
		t.Fatalf("GET /api/v1/servers/:id: %+v, want name_reserved", got)
	}

	// Renamed, the notice is gone.
	api.json(http.MethodPatch, "/api/v1/servers/"+sv.ID, map[string]any{"name": "renamed"}, http.StatusOK, nil)
	if n := page(t, srv.Get(t, admin, "/servers")).Find("[data-testid=reserved-name]").Length(); n != 0 {
		t.Fatalf("after the rename: %d notices", n)
	}
}
