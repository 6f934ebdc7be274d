package main

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/secrets"
)

// A rotation is on record before its key file changes (secrets.rotate.started, naming
// the new key), and a failure after the key was added still ends in a secrets.rotate
// failure entry naming it; a start that cannot be recorded changes nothing.
func TestSecretsRotateAuditedWhenItFails(t *testing.T) {
	ctx := context.Background()
	dir, url, pool := cliDatabase(t)
	path := filepath.Join(dir, "secret.key")
	old := writeKeyFile(t, path)
	cli := cliOn(url, dir)
	refuse := func(name, table, when string) {
		t.Helper()
		if _, err := pool.Exec(ctx, `CREATE FUNCTION `+name+`() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN RAISE EXCEPTION '`+name+`'; END $$;
			CREATE TRIGGER `+name+` BEFORE INSERT OR UPDATE ON `+table+` FOR EACH ROW WHEN (`+when+`) EXECUTE FUNCTION `+name+`()`); err != nil {
			t.Fatal(err)
		}
	}
	count := func(sql string, args ...any) int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	refuse("refuse_start", "audit_log", `NEW.action = 'secrets.rotate.started'`)
	if out, err := cli("secrets", "rotate"); err == nil || !strings.Contains(err.Error(), "refuse_start") || !strings.Contains(err.Error(), "nothing was changed") {
		t.Fatalf("rotate with its start refused: %v %s", err, out)
	}
	if k, err := secrets.LoadKeyring(path); err != nil || !slices.Equal(k.IDs(), []string{old.ID}) {
		t.Fatalf("the key file after a start that was not recorded: %v %v", k, err)
	}
	if _, err := pool.Exec(ctx, `DROP TRIGGER refuse_start ON audit_log`); err != nil {
		t.Fatal(err)
	}

	// The record of the keys cannot be written, after the key was added to the file.
	refuse("refuse_record", "settings", `NEW.key = 'secrets.keys'`)
	if out, err := cli("secrets", "rotate"); err == nil || !strings.Contains(err.Error(), "refuse_record") {
		t.Fatalf("rotate with the record of its key refused: %v %s", err, out)
	}
	k, err := secrets.LoadKeyring(path)
	if err != nil || len(k.IDs()) != 2 {
		t.Fatalf("the key file after the failed rotation: %v %v", k, err)
	}
	added := k.PrimaryID()
	if n := count(`SELECT count(*) FROM audit_log s JOIN audit_log e ON e.payload->>'started_entry' = s.id::text
		WHERE s.action = 'secrets.rotate.started' AND s.target_id = $1 AND s.payload->>'new_key' = 'true'
		AND e.action = 'secrets.rotate' AND e.result = 'failure' AND e.target_id = $1 AND e.payload->>'error' LIKE '%refuse_record%'`, added); n != 1 {
		t.Fatalf("the failed rotation's start and failure entries naming key %s: %d, want 1", added, n)
	}
	if _, err := pool.Exec(ctx, `DROP TRIGGER refuse_record ON settings`); err != nil {
		t.Fatal(err)
	}
	if out, err := cli("secrets", "rotate", "--reencrypt-only"); err != nil {
		t.Fatalf("rotate --reencrypt-only after it: %v %s", err, out)
	}
	if n := count(`SELECT count(*) FROM audit_log WHERE action = 'secrets.rotate' AND result = 'success' AND target_id = $1 AND payload->>'new_key' = 'false'`, added); n != 1 {
		t.Fatalf("the finishing rotation's entry: %d, want 1", n)
	}
	if n := count(`SELECT count(*) FROM audit_log WHERE action = 'secrets.rotate.started'`); n != 2 {
		t.Fatalf("rotations started on record: %d, want 2 (the refused start is none)", n)
	}
}
