package web_test

import (
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
)

// The dashboard shows the versions of Go and PostgreSQL and the servers' counts only to
// roles that may see them: a guest sees that the database is connected, not what runs it
// (versions help whoever looks for a known flaw), and no servers (guests have no
// server.view).
func TestDashboardHidesInternalsFromGuests(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	srv.CreateUser(t, "dash-guest", auth.RoleGuest, "dash-guest-password-1")
	for _, c := range []struct {
		user, password string
		internals      bool
	}{
		{"admin", webtest.AdminPassword, true},
		{"dash-guest", "dash-guest-password-1", false},
	} {
		res := srv.Get(t, srv.Login(t, c.user, c.password), "/")
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s: dashboard %d", c.user, res.StatusCode)
		}
		doc := page(t, res)
		status := doc.Find(`[data-testid="system-status"]`).Text()
		if status == "" {
			t.Fatalf("%s: no system status", c.user)
		}
		for what, shown := range map[string]bool{
			"Go version":         strings.Contains(status, runtime.Version()),
			"PostgreSQL version": strings.Contains(status, "PostgreSQL "),
			"server counts":      doc.Find(`[data-testid="count-servers"]`).Length() > 0,
		} {
			if shown != c.internals {
				t.Errorf("%s: %s shown %v, want %v", c.user, what, shown, c.internals)
			}
		}
		if doc.Find(`[data-testid="db-status"]`).Length() != 1 {
			t.Errorf("%s: the database's state is not shown", c.user)
		}
	}
}

// A replica that began shutting down is listed, marked so, until its row goes.
func TestDashboardMarksALeavingReplica(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	if _, err := srv.Pool.Exec(t.Context(), `INSERT INTO replicas (id, name, host, pid, leaving_at)
		VALUES (gen_random_uuid(), 'draining', 'h', 1, now()), (gen_random_uuid(), 'serving', 'h', 2, NULL)`); err != nil {
		t.Fatal(err)
	}
	doc := page(t, srv.Get(t, srv.Login(t, "admin", webtest.AdminPassword), "/"))
	for name, want := range map[string]bool{"draining": true, "serving": false} {
		row := doc.Find(`[data-testid="replica-row"][data-replica="` + name + `"]`)
		if row.Length() != 1 {
			t.Fatalf("replica %s is not listed", name)
		}
		if got := strings.Contains(row.Text(), "shutting down"); got != want {
			t.Errorf("replica %s marked as shutting down: %v, want %v", name, got, want)
		}
	}
}
