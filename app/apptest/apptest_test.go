package apptest_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func currentUser(t *testing.T, p *pgxpool.Pool) string {
	t.Helper()
	var u string
	if err := p.QueryRow(context.Background(), `SELECT current_user::text`).Scan(&u); err != nil {
		t.Fatal(err)
	}
	return u
}

// Test Apps connect as the application's role, as serve does, so that the suite fails
// at any statement of the product the role may not run; App.Owner is the tables' owner,
// for a test's tampering. Options.Owner and AppRoleEnv=0 connect the App as the owner;
// Options.AppRole keeps the role whatever the variable says.
func TestStartConnectsAsTheAppRole(t *testing.T) {
	ownerOf := func(t *testing.T, a *apptest.App) string {
		t.Helper()
		var o string
		if err := a.Owner.QueryRow(context.Background(),
			`SELECT tableowner::text FROM pg_tables WHERE schemaname = 'public' AND tablename = 'audit_log'`).Scan(&o); err != nil {
			t.Fatal(err)
		}
		return o
	}
	check := func(t *testing.T, opts *apptest.Options, wantRole bool) {
		t.Helper()
		a := apptest.Start(t, opts)
		owner := ownerOf(t, a)
		if got := currentUser(t, a.Owner); got != owner || owner == db.AppRole {
			t.Errorf("App.Owner connects as %q, want the owner of the tables, %q", got, owner)
		}
		switch got := currentUser(t, a.Pool); {
		case wantRole && got != db.AppRole:
			t.Errorf("the App connects as %q, want %s", got, db.AppRole)
		case !wantRole && (got != owner || a.Owner != a.Pool):
			t.Errorf("the App connects as %q (its own pool for the owner: %v), want the owner %q and App.Owner its pool",
				got, a.Owner != a.Pool, owner)
		}
	}
	t.Run("default", func(t *testing.T) {
		t.Setenv(apptest.AppRoleEnv, "")
		check(t, &apptest.Options{NoStart: true}, true)
	})
	t.Run("Owner", func(t *testing.T) {
		t.Setenv(apptest.AppRoleEnv, "")
		check(t, &apptest.Options{NoStart: true, Owner: true}, false)
	})
	t.Run("env 0", func(t *testing.T) {
		t.Setenv(apptest.AppRoleEnv, "0")
		check(t, &apptest.Options{NoStart: true}, false)
	})
	t.Run("AppRole under env 0", func(t *testing.T) {
		t.Setenv(apptest.AppRoleEnv, "0")
		check(t, &apptest.Options{NoStart: true, AppRole: true}, true)
	})
}
