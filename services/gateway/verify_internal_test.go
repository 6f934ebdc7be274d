package gateway

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// A token that cannot be checked (the database not answering) is refused with a text of
// the gateway's own: the SDK answers the verifier's error as it is, and a database
// error names the database's user, name and socket. The reason goes to the log.
func TestVerifyHidesWhyATokenCouldNotBeChecked(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	logs := &testkit.SyncBuffer{}
	g := &Gateway{auth: auth.New(pool, nil), log: slog.New(slog.NewTextHandler(logs, nil))}
	pool.Close() // the database no longer answers
	_, err := g.verify(context.Background(), "tw_"+strings.Repeat("a", 40), httptest.NewRequest("POST", "/mcp", nil))
	if err == nil || err.Error() != errTokenCheck.Error() {
		t.Fatalf("verify with the database gone: got %v, want %q", err, errTokenCheck)
	}
	if !strings.Contains(logs.String(), "check an API token") || !strings.Contains(logs.String(), "closed") {
		t.Errorf("the reason was not logged: %q", logs.String())
	}
}
