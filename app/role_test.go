package app_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/migrations"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/router"
)

// The App works as the application's database role, as serve runs it, and that role
// cannot rewrite history: UPDATE, DELETE and TRUNCATE of the append-only tables are
// refused by PostgreSQL's privileges (before any trigger), and it cannot disable the
// triggers either, not owning the tables (docs/security.md).
func TestAppRole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := apptest.Start(t, &apptest.Options{AppRole: true})
	var user string
	var super bool
	if err := a.Pool.QueryRow(ctx, `SELECT current_user, rolsuper FROM pg_roles WHERE rolname = current_user`).Scan(&user, &super); err != nil {
		t.Fatal(err)
	}
	if user != db.AppRole || super {
		t.Fatalf("the App connects as %q (superuser %v), want %s, not a superuser", user, super, db.AppRole)
	}
	if warn, err := db.RoleWarning(ctx, a.Pool); err != nil || warn != "" {
		t.Errorf("role warning as %s: got %q, %v; want none", db.AppRole, warn, err)
	}

	// What the App does writes every kind of row: users, tokens, a server and its tools
	// (definitions, state history), calls (usage, audit), events, jobs.
	a.CreateUser(t, "carol", auth.RoleToolUser, "a-long-enough-password")
	a.Token(t, "carol")
	a.LiveServer(t, "mt", true, "echo")
	res, err := a.Router.Call(ctx, router.Call{Tool: "mt__echo", Arguments: json.RawMessage(`{"message":"as the app role"}`),
		Actor: audit.System, Source: "test"})
	if err != nil || res.IsError {
		t.Fatalf("call as %s: %+v, %v", db.AppRole, res, err)
	}
	testkit.WaitFor(t, 10*time.Second, func() bool {
		return a.Count(t, `SELECT count(*) FROM tool_usage_logs`) > 0
	}, "the call was never recorded")
	// The audit log's free-text index is filled behind the appends, by the App.
	testkit.WaitFor(t, 10*time.Second, func() bool {
		return a.Count(t, `SELECT count(*) FROM audit_search`) > 0
	}, "no entry was indexed for search")
	for _, table := range []string{"tool_state_history", "tool_schemas", "audit_log", "audit_search"} {
		if n := a.Count(t, `SELECT count(*) FROM `+table); n == 0 {
			t.Errorf("%s: no rows written as %s", table, db.AppRole)
		}
	}
	if v, err := audit.Verify(ctx, a.Pool); err != nil || !v.OK() {
		t.Fatalf("verify as %s: %+v, %v", db.AppRole, v, err)
	}
	// A checkpoint waits for the log's flush, reading where it stands.
	_, key, _ := ed25519.GenerateKey(nil)
	if _, err := audit.MakeCheckpoint(ctx, a.Pool, audit.NewSigner(key)); err != nil {
		t.Fatalf("checkpoint as %s: %v", db.AppRole, err)
	}

	for _, stmt := range []string{
		`UPDATE audit_log SET actor_name = 'mallory'`,
		`DELETE FROM audit_log WHERE id = 1`,
		`TRUNCATE audit_log`,
		`UPDATE tool_state_history SET reason = 'forged'`,
		`DELETE FROM tool_state_history`,
		`TRUNCATE tool_state_history`,
		`UPDATE tool_schemas SET breaking = NOT breaking`,
		`DELETE FROM tool_schemas`,
		`TRUNCATE tool_schemas CASCADE`,
		`UPDATE audit_search SET doc = to_tsvector('forged')`,
		`DELETE FROM audit_search`,
		`TRUNCATE audit_search`,
		`INSERT INTO audit_search (id, doc) VALUES (1000000, to_tsvector('planted'))`,
		`SELECT audit_search_trim()`,
		`UPDATE schema_migrations SET version = 1`,
	} {
		_, err := a.Pool.Exec(ctx, stmt)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "42501" || !strings.Contains(pgErr.Message, "permission denied") {
			t.Errorf("%s as %s: got %v, want permission denied", stmt, db.AppRole, err)
		}
	}
	_, err = a.Pool.Exec(ctx, `ALTER TABLE audit_log DISABLE TRIGGER USER`)
	if err == nil || !strings.Contains(err.Error(), "must be owner") {
		t.Errorf("disable the audit triggers as %s: got %v, want must be owner", db.AppRole, err)
	}
	if v, err := audit.Verify(ctx, a.Pool); err != nil || !v.OK() {
		t.Fatalf("verify after the refused statements: %+v, %v", v, err)
	}

	// A table a later migration creates (as the owner) is the App's to use.
	owner, err := pgx.Connect(ctx, a.DBURL)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close(ctx)
	if w, err := db.RoleWarning(ctx, owner); err != nil || !strings.Contains(w, "superuser") {
		t.Errorf("role warning as the owner: got %q, %v; want one naming the superuser", w, err)
	}
	if _, err := owner.Exec(ctx, `CREATE TABLE later_feature (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, note text)`); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Pool.Exec(ctx, `INSERT INTO later_feature (note) VALUES ('x'); UPDATE later_feature SET note = 'y'; DELETE FROM later_feature`); err != nil {
		t.Errorf("a later table as %s: %v", db.AppRole, err)
	}
}

// The application's role cannot create objects in the schema the owner's SECURITY
// DEFINER functions search (migration 63): on PostgreSQL 14, or a cluster upgraded from
// it, every role could, and a function shadowing one they call ran as the owner. Until
// the schema's owner revokes it, serve warns at every start.
func TestAppRoleCannotCreateInItsSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := apptest.Start(t, &apptest.Options{AppRole: true, NoStart: true})
	owner, err := pgx.Connect(ctx, a.DBURL)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close(ctx)
	// PostgreSQL 14's default for the public schema.
	if _, err := owner.Exec(ctx, `GRANT CREATE ON SCHEMA public TO PUBLIC`); err != nil {
		t.Fatal(err)
	}
	if w, err := db.RoleWarning(ctx, a.Pool); err != nil || !strings.Contains(w, `may create objects in schema "public"`) {
		t.Errorf("role warning while the app role may create in public: got %q, %v", w, err)
	}
	sql, err := migrations.FS.ReadFile("000063_schema_create_revoked.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Exec(ctx, string(sql)); err != nil {
		t.Fatal(err)
	}
	if w, err := db.RoleWarning(ctx, a.Pool); err != nil || w != "" {
		t.Errorf("role warning after migration 63: got %q, %v; want none", w, err)
	}
	_, err = a.Pool.Exec(ctx, `CREATE FUNCTION public.hashtextextended(text, integer) RETURNS bigint
		LANGUAGE sql AS 'SELECT 0::bigint'`)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
		t.Fatalf("a function created in public as %s: got %v, want permission denied", db.AppRole, err)
	}
}
