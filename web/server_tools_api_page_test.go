package web_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/registry"
)

// GET /api/v1/servers/:id/tools answers in keyset pages, as the other lists of tools.
func TestServerToolsAPIPages(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	api := webtest.API{T: t, Srv: srv, C: srv.Login(t, "admin", webtest.AdminPassword)}
	up := mcptest.StartHTTP(t, &mcptest.Options{Name: "paged", Generated: 7}) // and the 5 default tools
	srv.RegisterServer(t, registry.Spec{Name: "paged", Type: registry.TypeStreamableHTTP, URL: up.URL(), Enabled: true, Trusted: true})
	var id string
	webtest.WaitFor(t, 30*time.Second, func() bool {
		var n int
		err := srv.Pool.QueryRow(t.Context(), `SELECT s.id, count(t.id) FROM mcp_servers s JOIN mcp_tools t ON t.server_id = s.id
			WHERE s.name = 'paged' GROUP BY s.id`).Scan(&id, &n)
		return err == nil && n == 12
	}, "server paged never listed 12 tools")

	type page struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
		Total      int    `json:"total"`
		NextCursor string `json:"next_cursor"`
	}
	seen := map[string]bool{}
	cursor, pages := "", 0
	for {
		var p page
		api.JSON(http.MethodGet, "/api/v1/servers/"+id+"/tools?limit=5&cursor="+url.QueryEscape(cursor), nil, http.StatusOK, &p)
		pages++
		if len(p.Tools) > 5 || p.Total != 12 {
			t.Fatalf("page %d: got %d tools, total %d; want at most 5, total 12", pages, len(p.Tools), p.Total)
		}
		for _, tl := range p.Tools {
			seen[tl.Name] = true
		}
		if cursor = p.NextCursor; cursor == "" || pages > 5 {
			break
		}
	}
	if len(seen) != 12 || pages != 3 {
		t.Fatalf("pages of 5: got %d tools in %d pages, want 12 in 3", len(seen), pages)
	}
	var p page
	api.JSON(http.MethodGet, "/api/v1/servers/"+id+"/tools", nil, http.StatusOK, &p)
	if len(p.Tools) != 12 || p.NextCursor != "" {
		t.Fatalf("the default page: got %d tools, next %q; want all 12 (default limit 50)", len(p.Tools), p.NextCursor)
	}
	api.Error(http.MethodGet, "/api/v1/servers/"+id+"/tools?limit=0", nil, http.StatusBadRequest, "invalid_input")
	api.Error(http.MethodGet, "/api/v1/servers/"+id+"/tools?limit=201", nil, http.StatusBadRequest, "invalid_input")
	api.Error(http.MethodGet, "/api/v1/servers/"+id+"/tools?cursor=nonsense", nil, http.StatusBadRequest, "invalid_input")
}
