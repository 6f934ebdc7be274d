package web_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/confine"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/registry"
)

// TestServerPageConfinement: a stdio server's page and API say how its process is
// confined (docs/security.md): what is hidden, or "none" and why; an HTTP server's say nothing.
func TestServerPageConfinement(t *testing.T) {
	t.Parallel()
	for _, off := range []bool{false, true} {
		name := "confined"
		if off {
			name = "off"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := webtest.Start(t, &webtest.Options{MCP: &mcpclient.Options{BackoffInitial: 50 * time.Millisecond,
				BackoffMax: 500 * time.Millisecond, Confine: confine.Spec{Off: off}}})
			admin := srv.Login(t, "admin", webtest.AdminPassword)
			cmd, args, env := mcptest.StdioCommand(&mcptest.Options{Name: "local"}, "")
			stdio := mustCreate(t, srv, registry.Spec{Name: "local", Type: registry.TypeStdio, Command: cmd, Args: args, Env: env})
			remote := mustCreate(t, srv, disabledSpec("remote"))

			want := "none: turned off; clean environment"
			if !off {
				// Hidden: the test process's database, as the data dir is in production.
				want = "namespaces; hidden: " + dbtest.ClusterDir(t)
			}
			got := strings.TrimSpace(page(t, srv.Get(t, admin, "/servers/"+stdio.ID)).Find("[data-testid=confinement]").Text())
			if !strings.Contains(got, want) || !strings.HasSuffix(got, "; clean environment") || got != srv.MCP.Confinement() {
				t.Fatalf("stdio server page: got confinement %q, want it to say %q (as the manager: %q)", got, want, srv.MCP.Confinement())
			}
			if n := page(t, srv.Get(t, admin, "/servers/"+remote.ID)).Find("[data-testid=confinement]").Length(); n != 0 {
				t.Fatalf("HTTP server page: got %d confinement rows, want none", n)
			}
			api := svClient{t: t, srv: srv, bearer: svToken(t, srv, "admin")}
			var body struct {
				Live struct {
					Confinement string `json:"confinement"`
				} `json:"live"`
			}
			api.json(http.MethodGet, "/api/v1/servers/"+stdio.ID, nil, http.StatusOK, &body)
			if body.Live.Confinement != got {
				t.Fatalf("API: got live.confinement %q, want %q", body.Live.Confinement, got)
			}
		})
	}
}
