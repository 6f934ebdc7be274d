package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
)

// An id in another spelling than PostgreSQL's (upper case, braces, urn:uuid:) names
// nothing: a server reconnected or discovered under it answers 404 and opens no second
// session of that server (it ran a second stdio process, left running when the server
// was disabled), and where PostgreSQL refuses the spelling the answer is 404 or 400,
// not 500.
func TestIDsInOtherSpellings(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	srv.LiveServer(t, "mt", true, "echo")
	var id string
	if err := srv.Pool.QueryRow(t.Context(), `SELECT id::text FROM mcp_servers WHERE name = 'mt'`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	token := srv.Token(t, "admin")
	call := func(method, path string) int {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	for _, other := range []string{strings.ToUpper(id), "{" + id + "}", "urn:uuid:" + id} {
		for _, path := range []string{"/reconnect", "/discover"} {
			if got := call(http.MethodPost, "/api/v1/servers/"+other+path); got != http.StatusNotFound {
				t.Errorf("POST %s for %s: got %d, want 404", path, other, got)
			}
		}
		if got := call(http.MethodGet, "/api/v1/servers/"+other); got != http.StatusNotFound {
			t.Errorf("GET the server as %s: got %d, want 404", other, got)
		}
		if _, err := srv.App.MCP.Session(other); err == nil {
			t.Errorf("a session of the server is kept under %s", other)
		}
	}
	if got := call(http.MethodGet, "/api/v1/executions?requested_by=urn:uuid:"+id); got != http.StatusBadRequest && got != http.StatusUnprocessableEntity {
		t.Errorf("executions requested by a urn:uuid: id: got %d, want 400 or 422", got)
	}
	if got := call(http.MethodPost, "/api/v1/servers/"+id+"/reconnect"); got != http.StatusAccepted {
		t.Errorf("reconnect by its id: got %d, want 202", got)
	}
	// A reconnect kills and starts the server's process again: it is audited.
	if n := srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'server.reconnect' AND target_id = $1 AND actor_name = 'admin'`, id); n != 1 {
		t.Errorf("server.reconnect audit entries: got %d, want 1", n)
	}
}
