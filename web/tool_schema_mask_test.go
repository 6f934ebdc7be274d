package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/registry"
)

// A stored version written before discovery masked the server's secrets in tool texts
// keeps the secret: the Schema tab's comparison masks it as the current one is.
func TestToolSchemaDiffMasksServerSecrets(t *testing.T) {
	t.Parallel()
	const headerVal = "diff-hdr-5Kw8Np2Qs7Vx4Zc9"
	// Closed after the server stops (cleanups run last first): its connection to the
	// upstream stays open until then, and Close would wait for it.
	up := httptest.NewServer(mcptest.New(&mcptest.Options{Name: "old"}).Handler())
	t.Cleanup(up.Close)
	srv := webtest.Start(t, nil)
	srv.App.RegisterServer(t, registry.Spec{Name: "old", Type: registry.TypeStreamableHTTP, URL: up.URL + "/mcp", Enabled: true,
		Trusted: true, Headers: map[string]string{"X-Api-Key": headerVal}}, "echo")
	id := srv.ToolID(t, "old__echo")
	// A version as an older release stored it: the header's value in its description.
	if _, err := srv.Pool.Exec(context.Background(), `INSERT INTO tool_schemas (tool_id, version_major, version_minor, definition_hash, definition)
		VALUES ($1, 0, 1, 'old-hash', jsonb_build_object('name', 'echo', 'description', 'Echoes; call with key '||$2::text))`, id, headerVal); err != nil {
		t.Fatal(err)
	}
	var current string
	if err := srv.Pool.QueryRow(context.Background(), `SELECT definition_hash FROM mcp_tools WHERE id = $1`, id).Scan(&current); err != nil {
		t.Fatal(err)
	}
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	res := srv.Get(t, admin, "/tools/"+id+"?tab=schema&from=old-hash&to="+current)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("schema tab: %d", res.StatusCode)
	}
	doc := page(t, res)
	if doc.Find("[data-testid=diff-line]").Length() == 0 {
		t.Fatalf("no comparison shown: %q", doc.Find("[data-testid=diff-error]").Text())
	}
	if html, _ := doc.Html(); strings.Contains(html, headerVal) {
		t.Fatal("the Schema tab's comparison shows the server's header value from an old version")
	}
}
