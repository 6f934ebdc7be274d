package main

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/db"
)

// migrate down and force on the embedded cluster are refused while a serve holds the
// data dir (here this process, as lockDataDir): the schema would change under it. The
// refusal names the holder and says to stop it; nothing is opened.
func TestMigrateDownRefusedUnderServe(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.release()
	for _, args := range [][]string{{"migrate", "down", "1"}, {"migrate", "down", "--to", "40"}, {"migrate", "force", "40"}} {
		_, stderr, err := runCmd(t, "", append(args, "--data-dir", dir)...)
		if err == nil || !strings.Contains(err.Error(), "(pid "+strconv.Itoa(os.Getpid())+") is running on the data dir") ||
			!strings.Contains(err.Error(), "stop it first") {
			t.Errorf("%v under a serve: %v\n%s; want a refusal naming its pid", args, err, stderr)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the refused commands left %d files in the data dir, want serve.lock alone", len(entries))
	}
	l.release()
	// Without a serve, a data dir with no cluster is refused, not made one.
	if _, _, err := runCmd(t, "", "migrate", "down", "1", "--data-dir", dir); err == nil || !strings.Contains(err.Error(), "holds no database") {
		t.Errorf("migrate down on a data dir with no cluster: %v; want a refusal", err)
	}
}

// migrate down and force leave an audit entry, from and to which version, by whom;
// below the audit log's own migration there is none to write, and that is said.
func TestMigrateDownAudited(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, url, pool := cliDatabase(t)
	cli := func(args ...string) (string, string, error) {
		return runCmd(t, "", append(args, "--database-url", url, "--data-dir", dir)...)
	}
	type row struct {
		Actor, Target string
		Payload       map[string]any
	}
	last := func(action string) (r row) {
		t.Helper()
		var p []byte
		if err := pool.QueryRow(ctx, `SELECT actor_name, target_id, payload FROM audit_log WHERE action = $1 ORDER BY id DESC LIMIT 1`, action).
			Scan(&r.Actor, &r.Target, &p); err != nil {
			t.Fatalf("%s entry: %v", action, err)
		}
		if err := json.Unmarshal(p, &r.Payload); err != nil {
			t.Fatal(err)
		}
		return r
	}
	latest := db.LatestMigration()
	vs := db.MigrationVersions()
	prev := vs[len(vs)-2]
	if stdout, stderr, err := cli("migrate", "down", "1"); err != nil {
		t.Fatalf("migrate down 1: %v\n%s%s", err, stdout, stderr)
	}
	r := last("schema.migrate_down")
	if !strings.HasPrefix(r.Actor, "cli:") || r.Target != strconv.Itoa(int(prev)) ||
		r.Payload["from"] != float64(latest) || r.Payload["to"] != float64(prev) {
		t.Fatalf("schema.migrate_down entry: %+v; want from %d to %d by cli:", r, latest, prev)
	}
	if stdout, stderr, err := cli("migrate", "force", strconv.Itoa(int(prev))); err != nil {
		t.Fatalf("migrate force: %v\n%s%s", err, stdout, stderr)
	}
	r = last("schema.migrate_force")
	if r.Payload["from"] != float64(prev) || r.Payload["to"] != float64(prev) || r.Payload["from_dirty"] != false {
		t.Fatalf("schema.migrate_force entry: %+v; want from %d to %d, not dirty", r, prev, prev)
	}
	if stdout, _, err := cli("audit", "verify", "--checkpoint", "none"); err != nil || !strings.Contains(stdout, "audit chain OK") {
		t.Fatalf("audit verify after the entries: %v\n%s", err, stdout)
	}
	_, stderr, err := cli("migrate", "down", "--to", "4")
	if err != nil || !strings.Contains(stderr, "no audit entry: at version 4 the database has no audit log") {
		t.Fatalf("migrate down --to 4: %v\n%s; want a note that there is no audit log", err, stderr)
	}
}
