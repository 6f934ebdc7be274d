package mcpclient_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/registry"
)

// A template server's session leaves no keep-alive connection open at its upstream
// once it ends: every reconnect (disable and enable, a changed template) would
// otherwise leave its connections for the transport's idle timeout (90 s).
func TestTemplateSessionClosesUpstreamConnections(t *testing.T) {
	t.Parallel()
	var open atomic.Int64
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("pong"))
	}))
	up.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			open.Add(1)
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	up.Start()
	defer up.Close()

	e := start(t, nil)
	yaml := fmt.Sprintf("tools:\n  - name: ping\n    http: {url: \"%s/ping\"}\n", up.URL)
	sv := e.create(t, registry.Spec{Name: "tpl", Type: registry.TypeTemplate, Template: yaml, Enabled: true})
	ctx := context.Background()
	for round := range 3 {
		e.waitStatus(t, sv.ID, registry.StatusConnected)
		cs, err := e.mgr.Session(sv.ID)
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if out := toolText(t, cs, "ping", nil); out != "pong" {
				t.Fatalf("round %d: ping: %q", round, out)
			}
		}
		if n := open.Load(); n < 1 {
			t.Fatalf("round %d: %d connections open at the upstream after the calls, want the kept-alive one", round, n)
		}
		if _, err := e.reg.SetEnabled(ctx, audit.System, sv.ID, false); err != nil {
			t.Fatal(err)
		}
		e.mgr.Refresh(ctx, sv.ID)
		e.waitStatus(t, sv.ID, registry.StatusDisconnected)
		testkit.WaitFor(t, 5*time.Second, func() bool { return open.Load() == 0 },
			fmt.Sprintf("round %d: connections still open at the upstream after the session ended", round))
		if _, err := e.reg.SetEnabled(ctx, audit.System, sv.ID, true); err != nil {
			t.Fatal(err)
		}
		e.mgr.Refresh(ctx, sv.ID)
	}
}
