package app_test

import (
	"context"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app"
	"github.com/toolwarden/toolwarden/app/apptest"
)

// New creates no user: the first administrator is Start's last step, so a start that
// stops on any check before (New's, serve's on the key file) leaves none, and the
// next start creates it and shows its password.
func TestFirstAdminCreatedByStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := apptest.Start(t, &apptest.Options{NoStart: true})
	count := func() int {
		t.Helper()
		var n int
		if err := a.Pool.QueryRow(ctx, `SELECT count(*) FROM users`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(); n != 0 || a.FirstAdminPassword != "" {
		t.Fatalf("after New: %d users, FirstAdminPassword %q; want none", n, a.FirstAdminPassword)
	}
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 1 || a.FirstAdminPassword != apptest.AdminPassword {
		t.Fatalf("after Start: %d users, FirstAdminPassword %q; want admin with %q", n, a.FirstAdminPassword, apptest.AdminPassword)
	}
	if _, err := a.Auth.GetUserByName(ctx, "admin"); err != nil {
		t.Fatalf("admin after Start: %v", err)
	}
}

// A first administrator's password the rules refuse is said before any component
// starts, naming where it came from (it stopped the start after every component had
// started); once users exist, the password is not used and not checked.
func TestShortFirstAdminPasswordRefusedBeforeStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	short := func(c *app.Config) { c.AdminPassword = "short" }
	a := apptest.Start(t, &apptest.Options{NoStart: true, Config: short})
	err := a.Start(ctx)
	if err == nil || !strings.Contains(err.Error(), "--admin-password") || !strings.Contains(err.Error(), "at least 12 characters") {
		t.Fatalf("Start with a short first password: %v, want a refusal naming --admin-password and why", err)
	}
	var n int
	if err := a.Pool.QueryRow(ctx, `SELECT count(*) FROM users`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("users after the refused start: %d (%v), want 0", n, err)
	}
	// With an administrator there, the same password is ignored, as it always was.
	first := apptest.Start(t, nil)
	again := apptest.Start(t, &apptest.Options{URL: first.DBURL, Key: &first.Key, NoStart: true, Config: short})
	if err := again.Start(ctx); err != nil {
		t.Fatalf("a later start with a short --admin-password: %v, want it ignored", err)
	}
}
