package db_test

import (
	"context"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// Every foreign key's column is the first column of an index of its table: deleting or
// changing a referenced row (a server's tools, with their steps, cases and rollups)
// otherwise scans the whole referring table once per row.
func TestForeignKeysIndexed(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	rows, err := pool.Query(context.Background(), `
		SELECT c.conrelid::regclass::text, a.attname
		FROM pg_constraint c
		JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
		WHERE c.contype = 'f' AND c.connamespace = current_schema()::regnamespace
		  AND NOT EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.conrelid AND i.indkey[0] = c.conkey[1])
		ORDER BY 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var missing []string
	for rows.Next() {
		var table, column string
		if err := rows.Scan(&table, &column); err != nil {
			t.Fatal(err)
		}
		missing = append(missing, table+"."+column)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 {
		t.Errorf("foreign keys without an index on their column: %s", strings.Join(missing, ", "))
	}
	// The rows migration 57 checks per statement instead of by a foreign key: a tool's
	// deletion looks them up by tool_id as a cascade would.
	for _, table := range []string{"tool_state_history", "tool_validations", "tool_schemas"} {
		n := testkit.Count(t, pool, `SELECT count(*) FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
			WHERE i.indrelid = $1::regclass AND a.attname = 'tool_id'`, table)
		if n == 0 {
			t.Errorf("%s.tool_id: no index starts with it, and deleting a tool looks its rows up by it", table)
		}
	}
}
