package db_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// The rows that name a tool in tool_state_history, tool_validations and tool_schemas are
// checked once per statement (migration 57), not by a foreign key: a row naming no tool
// is refused as a foreign key refuses it, a tool's deletion removes its rows (as the
// application's role, which may not delete them itself), and a write racing a deletion
// either waits for it and fails, or makes it wait and is removed with the tool.
func TestToolRowsFollowTheirTool(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := dbtest.NewURL(t)
	owner, err := db.NewPool(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(owner.Close)
	app := dbtest.AppPool(t, url)
	newTools := func(t *testing.T, server string, n int) (string, []string) {
		t.Helper()
		sid := uuid.NewString()
		testkit.Exec(t, owner, `INSERT INTO mcp_servers (id, name, server_type, command) VALUES ($1, $2, 'stdio', 'x')`, sid, server)
		ids := make([]string, n)
		for i := range ids {
			ids[i] = uuid.NewString()
			testkit.Exec(t, owner, `INSERT INTO mcp_tools (id, server_id, name, definition, definition_hash) VALUES ($1, $2, $3, '{}', 'h')`,
				ids[i], sid, "t"+string(rune('a'+i)))
		}
		return sid, ids
	}
	rowsOf := func(t *testing.T, ids ...string) int {
		t.Helper()
		return testkit.Count(t, owner, `SELECT (SELECT count(*) FROM tool_state_history WHERE tool_id = ANY($1::uuid[]))
			+ (SELECT count(*) FROM tool_validations WHERE tool_id = ANY($1::uuid[]))
			+ (SELECT count(*) FROM tool_schemas WHERE tool_id = ANY($1::uuid[]))`, ids)
	}
	history := `INSERT INTO tool_state_history (tool_id, to_status, reason) VALUES ($1, 'discovered', 'test')`
	wantFK := func(t *testing.T, what string, err error, table string) {
		t.Helper()
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "23503" || pe.ConstraintName != table+"_tool_id_fkey" || pe.TableName != table {
			t.Errorf("%s: got %v, want a foreign key violation of %s_tool_id_fkey", what, err, table)
		}
	}

	sid, ids := newTools(t, "one", 2)
	x, y := ids[0], ids[1]
	// Rows naming a tool are written, one at a time and in a COPY.
	if _, err := app.Exec(ctx, history, x); err != nil {
		t.Fatal(err)
	}
	if _, err := app.Exec(ctx, `INSERT INTO tool_validations (tool_id, definition_hash, success, validated_by) VALUES ($1, 'h', true, 'test')`, x); err != nil {
		t.Fatal(err)
	}
	if _, err := app.CopyFrom(ctx, pgx.Identifier{"tool_schemas"}, []string{"tool_id", "version_major", "version_minor", "definition_hash", "definition"},
		pgx.CopyFromRows([][]any{{x, 1, 0, "h", "{}"}, {y, 1, 0, "h", "{}"}})); err != nil {
		t.Fatal(err)
	}
	if n := rowsOf(t, x, y); n != 4 {
		t.Fatalf("%d rows written, want 4", n)
	}

	// A row naming no tool fails its whole statement, however it is written.
	ghost := uuid.NewString()
	_, err = app.Exec(ctx, history, ghost)
	wantFK(t, "history of a missing tool", err, "tool_state_history")
	_, err = app.CopyFrom(ctx, pgx.Identifier{"tool_validations"}, []string{"tool_id", "definition_hash", "success", "validated_by"},
		pgx.CopyFromRows([][]any{{y, "h", true, "test"}, {ghost, "h", true, "test"}}))
	wantFK(t, "a COPY of validations, one of a missing tool", err, "tool_validations")
	_, err = app.Exec(ctx, `INSERT INTO tool_schemas (tool_id, version_major, version_minor, definition_hash, definition) VALUES ($1, 1, 0, 'h', '{}')`, ghost)
	wantFK(t, "a definition of a missing tool", err, "tool_schemas")
	_, err = app.Exec(ctx, `UPDATE tool_validations SET tool_id = $1 WHERE tool_id = $2`, ghost, x)
	wantFK(t, "a validation moved to a missing tool", err, "tool_validations")
	if n := rowsOf(t, x, y, ghost); n != 4 {
		t.Fatalf("%d rows after the refused statements, want the 4 before", n)
	}
	// Nor does a session's temporary table of the same name stand in for a real one.
	own, err := app.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = own.Exec(ctx, `CREATE TEMP TABLE mcp_tools (id uuid); INSERT INTO mcp_tools VALUES ('`+ghost+`')`)
	if err != nil {
		t.Fatal(err)
	}
	_, err = own.Exec(ctx, history, ghost)
	wantFK(t, "history of a tool only a temporary mcp_tools has", err, "tool_state_history")
	if _, err := own.Exec(ctx, `DROP TABLE pg_temp.mcp_tools; CREATE TEMP TABLE tool_state_history (tool_id uuid)`); err != nil {
		t.Fatal(err)
	}
	sid2, ids2 := newTools(t, "shadowed", 1)
	if _, err := own.Exec(ctx, `INSERT INTO public.tool_state_history (tool_id, to_status) VALUES ($1, 'discovered')`, ids2[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := own.Exec(ctx, `DELETE FROM mcp_servers WHERE id = $1`, sid2); err != nil {
		t.Fatal(err)
	}
	if n := rowsOf(t, ids2...); n != 0 {
		t.Errorf("%d rows of a tool deleted in a session with a temporary tool_state_history, want none", n)
	}
	if _, err := own.Exec(ctx, `DROP TABLE pg_temp.tool_state_history`); err != nil {
		t.Fatal(err)
	}
	own.Release()

	// A row written for a tool while its server is deleted: the deletion waits for the
	// write and removes the row with the tool.
	tx, err := app.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, history, y); err != nil {
		t.Fatal(err)
	}
	deleted := make(chan error, 1)
	go func() {
		_, err := app.Exec(ctx, `DELETE FROM mcp_servers WHERE id = $1`, sid)
		deleted <- err
	}()
	testkit.WaitForLockWait(t, owner, "DELETE FROM mcp_servers")
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-deleted; err != nil {
		t.Fatalf("delete the server: %v", err)
	}
	if n := rowsOf(t, x, y); n != 0 {
		t.Errorf("%d rows of the deleted tools are left, want none", n)
	}

	// A row written while its tool's deletion is under way waits for it, then fails.
	sid, ids = newTools(t, "two", 1)
	z := ids[0]
	tx, err = app.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `DELETE FROM mcp_servers WHERE id = $1`, sid); err != nil {
		t.Fatal(err)
	}
	written := make(chan error, 1)
	go func() {
		_, err := app.Exec(ctx, history, z)
		written <- err
	}()
	testkit.WaitForLockWait(t, owner, "INSERT INTO tool_state_history")
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wantFK(t, "history written while the tool was deleted", <-written, "tool_state_history")
	if n := rowsOf(t, z); n != 0 {
		t.Errorf("%d rows of the deleted tool, want none", n)
	}

	// A transaction reading one snapshot may not delete tools: it would miss rows an
	// insert it waited for wrote. Toolwarden's own connections run in READ COMMITTED
	// whatever the database's default.
	sid, ids = newTools(t, "snapshot", 1)
	if _, err := app.Exec(ctx, history, ids[0]); err != nil {
		t.Fatal(err)
	}
	testkit.Exec(t, owner, `DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET default_transaction_isolation = serializable', current_database()); END $$`)
	raw, err := pgx.Connect(ctx, dbtest.AppURL(t, url))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close(ctx)
	_, err = raw.Exec(ctx, `DELETE FROM mcp_servers WHERE id = $1`, sid)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "0A000" || !strings.Contains(pe.Message, "READ COMMITTED") {
		t.Errorf("a tool deleted in a serializable transaction: got %v, want it refused, naming READ COMMITTED", err)
	}
	fresh, err := db.NewPool(ctx, dbtest.AppURL(t, url))
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if _, err := fresh.Exec(ctx, `DELETE FROM mcp_servers WHERE id = $1`, sid); err != nil {
		t.Errorf("a server deleted through Toolwarden's pool on a serializable database: %v", err)
	}
	if n := rowsOf(t, ids...); n != 0 {
		t.Errorf("%d rows of the deleted tool, want none", n)
	}

	// TRUNCATE ... CASCADE (an owner's) empties them with the tools.
	_, ids = newTools(t, "truncated", 1)
	if _, err := app.Exec(ctx, history, ids[0]); err != nil {
		t.Fatal(err)
	}
	testkit.Exec(t, owner, `TRUNCATE mcp_tools CASCADE`)
	if n := testkit.Count(t, owner, `SELECT (SELECT count(*) FROM tool_state_history) + (SELECT count(*) FROM tool_validations) + (SELECT count(*) FROM tool_schemas)`); n != 0 {
		t.Errorf("%d rows left after TRUNCATE mcp_tools CASCADE, want none", n)
	}
}
