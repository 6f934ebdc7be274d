package mcpclient_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/registry"
)

// A server's error text is passed on cut and storable by DiscoverOnce (the import's
// answer repeats it for each of the server's tools; its failed run keeps it) and by the connection test (its page
// polls it), however long the server made it and whatever it put in it.
func TestServerErrorCutOutsideTheSession(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	long := "why\x00" + strings.Repeat("why ", 1<<20) // 4 MiB, under the message cap
	u := interposed(t, &mcptest.Options{Name: "verbose-once"}, func(w http.ResponseWriter, _ *http.Request, method string, id json.RawMessage, _ []byte) bool {
		if method != "tools/list" {
			return false
		}
		rpcError(w, id, long)
		return true
	})
	sv := e.create(t, registry.Spec{Name: "verbose-once", Type: registry.TypeStreamableHTTP, URL: u, TimeoutMS: 10_000})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := e.mgr.DiscoverOnce(ctx, sv.ID, "import", audit.System)
	if err == nil || len(err.Error()) > 4096 || strings.Contains(err.Error(), "\x00") || !strings.Contains(err.Error(), "(cut)") {
		t.Errorf("DiscoverOnce's error: %d bytes (err %v), want it cut and without NULs", len(errText(err)), err != nil)
	}
	// And it is the server's failed run, as a session's discovery's failure is.
	var status, msg string
	if err := e.pool.QueryRow(ctx, `SELECT status, error FROM discovery_runs WHERE server_id = $1 AND trigger = 'import'`,
		sv.ID).Scan(&status, &msg); err != nil || status != "failed" || len(msg) > 4096 || !strings.Contains(msg, "why why") {
		t.Errorf("the import's discovery run: %v %q %.80q, want it failed with the server's error, cut", err, status, msg)
	}
	res := e.mgr.Test(ctx, registry.Connection{Name: "verbose-once", Type: registry.TypeStreamableHTTP, URL: u, Timeout: 10 * time.Second})
	if res.OK || len(res.Error) > 4096 || strings.Contains(res.Error, "\x00") || !strings.Contains(res.Error, "(cut)") {
		t.Errorf("the connection test's error: %d bytes (ok %v), want it cut and without NULs", len(res.Error), res.OK)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
