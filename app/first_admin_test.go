package app_test

import (
	"context"
	"testing"

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
