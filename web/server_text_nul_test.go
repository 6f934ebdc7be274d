package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/textcheck"
)

// Text PostgreSQL cannot store is a 400 naming its field, not a 500: an imported
// server's description "a\0b" (YAML's escape of a NUL), and a server's tools cursor
// whose name is "\u0000".
func TestServerNULTextAPI(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	token := srv.Token(t, "admin")
	api := webtest.API{T: t, Srv: srv, Bearer: token}

	file := "version: 1\nservers:\n  - name: nul-desc\n    type: streamable_http\n    url: http://127.0.0.1:9/mcp\n    enabled: false\n    description: \"a\\0b\"\n"
	status, body := sendAPI(t, srv, token, http.MethodPost, "/api/v1/servers/import?filename=servers.yaml&dry_run=false", "application/yaml", file)
	if status != http.StatusBadRequest || !strings.Contains(body, "description") || !strings.Contains(body, "NUL byte") {
		t.Errorf("import of a NUL description: got %d %.400s, want 400 naming description (%s)", status, body, textcheck.WhyNUL)
	}
	if n := srv.App.Count(t, `SELECT count(*) FROM mcp_servers WHERE name = 'nul-desc'`); n != 0 {
		t.Fatalf("got %d servers nul-desc stored, want none", n)
	}

	var sv struct {
		ID string `json:"id"`
	}
	api.JSON(http.MethodPost, "/api/v1/servers", map[string]any{"name": "cursor-nul", "type": "streamable_http",
		"url": "http://127.0.0.1:9/mcp", "enabled": false}, http.StatusCreated, &sv)
	// {"n":"\u0000"} as a cursor.
	status, body = sendAPI(t, srv, token, http.MethodGet, "/api/v1/servers/"+sv.ID+"/tools?cursor=eyJuIjoiXHUwMDAwIn0", "", "")
	wantInvalid(t, "cursor {\"n\":\"\\u0000\"}", status, body, "cursor", "is not a cursor")
}
