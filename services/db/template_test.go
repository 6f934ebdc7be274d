package db_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// startFrom starts a cluster on a new data dir with template, and returns it and its log.
func startFrom(t *testing.T, template string, fast bool) (*db.Cluster, string) {
	t.Helper()
	var log testkit.SyncBuffer
	c, err := db.StartCluster(context.Background(), dbtest.TempDir(t), &db.ClusterOptions{Fast: fast, Template: template,
		Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatalf("start with template %q: %v\n%s", template, err, log.String())
	}
	t.Cleanup(c.Stop)
	return c, log.String()
}

// migratedAndUsable checks that c's database is at the newest migration without running
// any, and that the application's role can use it.
func migratedAndUsable(t *testing.T, c *db.Cluster) {
	t.Helper()
	mg, err := db.NewMigrator(c.URL())
	if err != nil {
		t.Fatal(err)
	}
	st, err := mg.Status()
	mg.Close()
	if err != nil || !st.Current() {
		t.Fatalf("migration status %+v (%v), want current", st, err)
	}
	if err := db.Migrate(c.URL()); err != nil { // and nothing left for River either
		t.Fatal(err)
	}
	conn := connect(t, c.AppURL())
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM audit_log`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("audit_log as the application role: %d rows, %v", n, err)
	}
}

// A template made once is what a first start copies: the cluster comes up migrated,
// with the application's role, durable or fast; a template that does not fit (another
// schema, no cluster in it, a file it cannot copy) makes the start fall back to initdb
// and leaves nothing half copied.
func TestClusterTemplate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tpl := filepath.Join(dbtest.TempDir(t), "pg-template")
	made, err := db.MakeTemplate(ctx, tpl, nil)
	if err != nil || !made {
		t.Fatalf("MakeTemplate: made %v, %v", made, err)
	}
	if ok, why := db.TemplateCurrent(tpl); !ok {
		t.Fatalf("a template just made is not current: %s", why)
	}
	if made, err := db.MakeTemplate(ctx, tpl, nil); err != nil || made {
		t.Fatalf("MakeTemplate on a current template: made %v, %v; want it kept", made, err)
	}
	if _, err := os.Stat(filepath.Join(tpl, "data", "postmaster.pid")); err == nil {
		t.Fatal("the template holds a postmaster.pid: it was not stopped cleanly")
	}

	for _, fast := range []bool{false, true} {
		c, log := startFrom(t, tpl, fast)
		if !strings.Contains(log, "from the template") || strings.Contains(log, "initdb") {
			t.Fatalf("fast=%v: the start did not copy the template:\n%s", fast, log)
		}
		migratedAndUsable(t, c)
		if _, err := os.Stat(c.DataDir() + ".copy"); err == nil {
			t.Fatalf("fast=%v: the copy's folder was left behind", fast)
		}
		ownedByPostgres(t, c)
	}

	// A template of another schema (a build with other migrations): initdb, then the
	// migrations as always; MakeTemplate remakes it.
	other := copyTemplate(t, tpl)
	restamp(t, other, "schema", "0000")
	if ok, why := db.TemplateCurrent(other); ok || !strings.Contains(why, "another build's schema") {
		t.Fatalf("a template of another schema: current %v, %q", ok, why)
	}
	c, log := startFrom(t, other, true)
	if !strings.Contains(log, "another build's schema") || !strings.Contains(log, "created embedded PostgreSQL cluster") || strings.Contains(log, "from the template") {
		t.Fatalf("a template of another schema was not refused for initdb:\n%s", log)
	}
	if err := db.Migrate(c.URL()); err != nil {
		t.Fatal(err)
	}
	migratedAndUsable(t, c)
	if made, err := db.MakeTemplate(ctx, other, nil); err != nil || !made {
		t.Fatalf("MakeTemplate over another schema's template: made %v, %v; want remade", made, err)
	}
	if ok, why := db.TemplateCurrent(other); !ok {
		t.Fatalf("the remade template is not current: %s", why)
	}

	// Made by another PostgreSQL installation, another major version or another recipe
	// (initdb's arguments, the roles), or writable by others: not used.
	for _, tc := range []struct{ key, value, why string }{
		{"bin_dir", "/opt/elsewhere/bin", "made by the PostgreSQL in /opt/elsewhere/bin"},
		{"pg_version", "9", "the template is for PostgreSQL 9"},
		{"recipe", "format 0", "made otherwise"},
	} {
		spoilt := copyTemplate(t, tpl)
		restamp(t, spoilt, tc.key, tc.value)
		if ok, why := db.TemplateCurrent(spoilt); ok || !strings.Contains(why, tc.why) {
			t.Errorf("%s %q: current %v, %q; want refused for %q", tc.key, tc.value, ok, why, tc.why)
		}
	}
	writable := copyTemplate(t, tpl)
	if err := os.Chmod(writable, 0o777); err != nil {
		t.Fatal(err)
	}
	if ok, why := db.TemplateCurrent(writable); ok || !strings.Contains(why, "writable by no one else") {
		t.Errorf("a template others may write: current %v, %q", ok, why)
	}

	// A file the copy cannot take (here a named pipe): initdb, no half copy left.
	odd := copyTemplate(t, tpl)
	if err := syscall.Mkfifo(filepath.Join(odd, "data", "base", "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, log = startFrom(t, odd, true)
	if !strings.Contains(log, "copying the cluster template failed") || !strings.Contains(log, "not a file or folder") {
		t.Fatalf("a template with a pipe in it:\n%s", log)
	}
	if _, err := os.Stat(c.DataDir() + ".copy"); err == nil {
		t.Fatal("the failed copy's folder was left behind")
	}
	if err := db.Migrate(c.URL()); err != nil {
		t.Fatal(err)
	}

	// No template at all is not worth more than a debug line; none named, not even that.
	_, log = startFrom(t, filepath.Join(t.TempDir(), "none"), true)
	if !strings.Contains(log, "level=DEBUG") || strings.Contains(log, "level=INFO msg=\"database: not using") {
		t.Fatalf("a missing template:\n%s", log)
	}
	_, log = startFrom(t, "", true)
	if strings.Contains(log, "template") {
		t.Fatalf("no template named, yet the log speaks of one:\n%s", log)
	}
}

// restamp sets key in the stamp of the template in dir.
func restamp(t *testing.T, dir, key, value string) {
	t.Helper()
	p := filepath.Join(dir, "stamp.json")
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	if _, ok := s[key]; !ok {
		t.Fatalf("the stamp has no %q: %s", key, raw)
	}
	s[key] = value
	raw, _ = json.Marshal(s)
	if err := os.WriteFile(p, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

// MakeTemplate replaces only a template or an empty folder: --out naming anything else
// (a data dir, say) is refused and left as it was.
func TestMakeTemplateRefusesOtherFolders(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keep := filepath.Join(dir, "secret.key")
	if err := os.WriteFile(keep, []byte("k"), 0o600); err != nil {
		t.Fatal(err)
	}
	made, err := db.MakeTemplate(context.Background(), dir, slog.New(slog.DiscardHandler))
	if err == nil || made || !strings.Contains(err.Error(), "holds something other than a cluster template") {
		t.Fatalf("MakeTemplate over a folder with a file in it: made %v, %v", made, err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatalf("the folder's file is gone: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), ".pg-template-*")); len(left) > 0 {
		t.Fatalf("work folders left: %v", left)
	}
}

// A data dir that has its cluster keeps it (the template is for first starts only); a
// copy a killed start left behind goes once it is stale, and a recent one (another
// process's copy under way) stays.
func TestClusterTemplateOnlyForFirstStarts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tpl := filepath.Join(dbtest.TempDir(t), "pg-template")
	if _, err := db.MakeTemplate(ctx, tpl, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	dataDir := dbtest.TempDir(t)
	c, err := db.StartCluster(ctx, dataDir, &db.ClusterOptions{Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	conn := connect(t, c.URL())
	if _, err := conn.Exec(ctx, "CREATE TABLE keep (v int); INSERT INTO keep VALUES (7)"); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	c.Stop()

	stale := filepath.Join(dataDir, "pg", "data.copy-1")
	recent := filepath.Join(dataDir, "pg", "data.copy-2")
	for _, d := range []string{stale, recent} {
		if err := os.MkdirAll(filepath.Join(d, "base"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	var log testkit.SyncBuffer
	c, err = db.StartCluster(ctx, dataDir, &db.ClusterOptions{Fast: true, Template: tpl,
		Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if strings.Contains(log.String(), "template") || strings.Contains(log.String(), "created embedded") {
		t.Fatalf("a restart made its cluster again:\n%s", log.String())
	}
	conn = connect(t, c.URL())
	defer conn.Close(ctx)
	var v int
	if err := conn.QueryRow(ctx, "SELECT v FROM keep").Scan(&v); err != nil || v != 7 {
		t.Fatalf("the cluster's data after a start with a template: %d, %v", v, err)
	}
	if _, err := os.Stat(stale); err == nil {
		t.Error("a stale copy was left")
	}
	if _, err := os.Stat(recent); err != nil {
		t.Errorf("a recent copy (another process's, maybe) was removed: %v", err)
	}
}

// copyTemplate copies the template folder tpl (as cp -a would) for a test to spoil.
func copyTemplate(t *testing.T, tpl string) string {
	t.Helper()
	dst := filepath.Join(dbtest.TempDir(t), "pg-template")
	if err := os.CopyFS(dst, os.DirFS(tpl)); err != nil {
		t.Fatal(err)
	}
	// CopyFS makes folders 0777 less the umask; postgres wants its own closed.
	if err := os.Chmod(filepath.Join(dst, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	return dst
}

// ownedByPostgres checks that every file of c's data folder belongs to the user postgres
// runs as (the owner of the postmaster.pid it wrote): the copy was handed over when we
// are root.
func ownedByPostgres(t *testing.T, c *db.Cluster) {
	t.Helper()
	var pid syscall.Stat_t
	if err := syscall.Stat(filepath.Join(c.DataDir(), "postmaster.pid"), &pid); err != nil {
		t.Fatal(err)
	}
	err := filepath.WalkDir(c.DataDir(), func(p string, _ fs.DirEntry, err error) error {
		var st syscall.Stat_t
		if err == nil {
			err = syscall.Lstat(p, &st)
		}
		if err == nil && st.Uid != pid.Uid {
			t.Errorf("%s belongs to uid %d, postgres runs as %d", p, st.Uid, pid.Uid)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
