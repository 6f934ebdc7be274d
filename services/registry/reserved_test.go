package registry_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/verr"
)

// reservedMessage checks that err refuses the name field with the reserved-name message.
func reservedMessage(t *testing.T, err error, name string) {
	t.Helper()
	wantFields(t, err, "name")
	var ve *verr.Error
	_ = errors.As(err, &ve)
	if got := ve.For("name"); got != registry.ReservedNameMessage(name) || !strings.Contains(got, "the name "+name+" is for Toolwarden's own tools") {
		t.Fatalf("the message on name: %q", got)
	}
}

// The names toolwarden and builtin are refused when a server is created (API, page
// form: CreateServer), tried (Test connection), renamed or imported.
func TestReservedServerNames(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	files := f.create(stdioSpec("files"))
	for _, name := range []string{"toolwarden", "builtin"} {
		_, err := f.reg.CreateServer(f.ctx, audit.System, stdioSpec(name))
		reservedMessage(t, err, name)
		_, err = f.reg.PreviewConnection(f.ctx, "", registry.PatchFromSpec(stdioSpec(name)))
		reservedMessage(t, err, name)
		_, err = f.reg.UpdateServer(f.ctx, audit.System, files.ID, registry.Patch{Name: ptr(name)})
		reservedMessage(t, err, name)

		plan := f.plan("servers.yaml", "version: 1\nservers:\n  - name: "+name+"\n    type: stdio\n    command: npx\n", false)
		if len(plan.Errors) != 1 || plan.Errors[0].Field != "name" || plan.Errors[0].Message != registry.ReservedNameMessage(name) {
			t.Fatalf("import of %s: errors %+v", name, plan.Errors)
		}
		// A name that becomes reserved once made a slug is refused too.
		plan = f.plan("claude_desktop_config.json", `{"mcpServers": {"Toolwarden": {"command": "npx"}}}`, false)
		if !slices.ContainsFunc(plan.Errors, func(p registry.Problem) bool { return p.Field == "name" }) {
			t.Fatalf("import of Toolwarden: errors %+v, want one on name", plan.Errors)
		}
	}
	if n := f.count(`SELECT count(*) FROM mcp_servers`); n != 1 {
		t.Fatalf("%d servers, want only files", n)
	}
	// Names that only look like them are fine.
	f.create(stdioSpec("toolwarden-tools"))
	f.create(stdioSpec("builtins"))
}

// A server that had a reserved name before migration 22 keeps it and keeps working: it
// can be edited and disabled, the registry reports it on every start and marks it for
// the pages, and once renamed it cannot take the name back. Nothing else that writes
// the table can take a reserved name either (the migration's trigger).
func TestReservedNameBeforeTheMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := dbtest.NewURL(t)
	mg, err := db.NewMigrator(url)
	if err != nil {
		t.Fatal(err)
	}
	defer mg.Close()
	pool, err := db.NewPool(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	keys := newKeyring(t)
	reg := registry.New(pool, keys, nil)
	legacy, err := reg.CreateServer(ctx, audit.System, stdioSpec("legacy"))
	if err != nil {
		t.Fatal(err)
	}

	// Before the migration: a server could be named toolwarden. (Back to before 22,
	// through any migration that came after it.)
	after := 0
	for _, v := range db.MigrationVersions() {
		if v >= 22 {
			after++
		}
	}
	if err := mg.Down(after); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE mcp_servers SET name = 'toolwarden' WHERE id = $1`, legacy.ID); err != nil {
		t.Fatal(err)
	}
	if err := mg.Up(); err != nil {
		t.Fatalf("migrating with a server named toolwarden: %v", err)
	}

	var logs bytes.Buffer
	reg = registry.New(pool, keys, &registry.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	names, err := reg.ReportReservedNames(ctx)
	if err != nil || !slices.Equal(names, []string{"toolwarden"}) {
		t.Fatalf("reported %v, %v; want toolwarden", names, err)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), `\"toolwarden\" has a name now reserved`) {
		t.Fatalf("no warning logged: %s", logs.String())
	}
	sv, err := reg.GetServer(ctx, legacy.ID)
	if err != nil || sv.Name != "toolwarden" || !sv.NameReserved {
		t.Fatalf("the server: %+v %v, want toolwarden marked reserved", sv, err)
	}
	if sv, err = reg.UpdateServer(ctx, audit.System, legacy.ID, registry.Patch{Description: ptr("still works"), Enabled: ptr(false)}); err != nil || sv.Name != "toolwarden" {
		t.Fatalf("editing the server without renaming it: %+v %v", sv, err)
	}
	if _, err := reg.PreviewConnection(ctx, legacy.ID, registry.Patch{Description: ptr("tested")}); err != nil {
		t.Fatalf("testing its connection: %v", err)
	}

	// Anything else writing the table is refused a reserved name, even without the registry.
	for _, sql := range []string{
		`UPDATE mcp_servers SET name = 'builtin' WHERE id = $1`,
		`INSERT INTO mcp_servers (name, server_type, command) SELECT 'builtin', server_type, command FROM mcp_servers WHERE id = $1`,
	} {
		_, err := pool.Exec(ctx, sql, legacy.ID)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "23514" {
			t.Fatalf("%s: got %v, want a check violation", sql, err)
		}
	}

	if sv, err = reg.UpdateServer(ctx, audit.System, legacy.ID, registry.Patch{Name: ptr("files")}); err != nil || sv.NameReserved {
		t.Fatalf("renaming it: %+v %v", sv, err)
	}
	if names, err := reg.ReportReservedNames(ctx); err != nil || len(names) != 0 {
		t.Fatalf("reported after the rename: %v %v", names, err)
	}
	_, err = reg.UpdateServer(ctx, audit.System, legacy.ID, registry.Patch{Name: ptr("toolwarden")})
	reservedMessage(t, err, "toolwarden")
}

// The built-in server can be enabled and disabled, nothing else: a patch setting what it
// would run (fields its audit view leaves out for its type) is refused as well.
func TestBuiltinServerOnlyEnabled(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	bi, err := f.reg.EnsureBuiltin(f.ctx, "Toolwarden's own tools")
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]registry.Patch{
		"env":         {Env: map[string]*string{"LD_PRELOAD": ptr("/tmp/x.so")}},
		"command":     {Command: ptr("sh")},
		"args":        {Args: &[]string{"-c", "id"}},
		"working_dir": {WorkingDir: ptr("/tmp")},
		"template":    {Template: ptr(tplHTTP)},
		"auth token":  {AuthToken: ptr("secret")},
		"description": {Description: ptr("mine")},
	} {
		if _, err := f.reg.UpdateServer(f.ctx, audit.System, bi.ID, p); !errors.Is(err, registry.ErrBuiltinFixed) {
			t.Errorf("patch of %s: got %v, want ErrBuiltinFixed", name, err)
		}
	}
	if got := mustGet(t, f, bi.ID); got.Command != "" || len(got.EnvNames) != 0 || got.WorkingDir != "" || len(got.Args) != 0 || got.Template != "" {
		t.Fatalf("the built-in server after the refusals: %+v", got)
	}
	if sv := f.update(bi.ID, registry.Patch{Enabled: ptr(false)}); sv.Enabled {
		t.Fatal("disabling the built-in server did not")
	}
	if sv := f.update(bi.ID, registry.Patch{Enabled: ptr(true), Args: &[]string{}}); !sv.Enabled {
		t.Fatal("enabling the built-in server did not")
	}
}
