package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
)

// HEAD is answered on ordinary pages and reads, and refused (405) where a HEAD would
// run the whole handler for a body Go drops: the audit log's export (which streams the
// whole log and records an export) and chain check, a websocket (a terminal's socket
// forwarded to another replica spends a hop allowance and a nonce there), the replicas'
// internal routes (a held watch), as /ws and the MCP transports already were.
func TestHeadOnlyWhereItCostsNothing(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	token := "Bearer " + srv.Token(t, "admin")
	head := func(c *http.Client, path string, bearer bool) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodHead, srv.URL+path, nil)
		if bearer {
			req.Header.Set("Authorization", token)
		}
		req.Header.Set("Origin", srv.URL)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode, res.Header.Get("Allow")
	}
	exports := func() int {
		return srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE action LIKE 'audit.export%'`)
	}
	before := exports()
	for _, path := range []string{"/api/v1/audit/export?format=jsonl", "/api/v1/audit/verify", "/terminals/t1/ws",
		"/internal/v1/testruns/c1/watch", "/internal/v1/testruns/c1", "/internal/v1/testruns/c1/parts", "/ws", "/mcp", "/sse"} {
		for _, bearer := range []bool{true, false} {
			if got, allow := head(admin, path, bearer); got != http.StatusMethodNotAllowed || !strings.Contains(allow, http.MethodGet) {
				t.Errorf("HEAD %s (bearer %v): %d (Allow %q), want 405 allowing GET", path, bearer, got, allow)
			}
		}
	}
	if n := exports(); n != before {
		t.Fatalf("HEAD of the export recorded %d export entries", n-before)
	}
	for _, r := range []struct {
		c      *http.Client
		path   string
		bearer bool
	}{{http.DefaultClient, "/login", false}, {admin, "/", false}, {admin, "/audit", false}, {admin, "/api/v1/servers", true},
		{admin, "/api/v1/audit", true}} {
		if got, _ := head(r.c, r.path, r.bearer); got != http.StatusOK {
			t.Errorf("HEAD %s: %d, want 200", r.path, got)
		}
	}
}
