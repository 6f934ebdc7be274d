package db_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// logBuffer collects a cluster's log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// startFrom starts a cluster on a new data dir with template, and returns it and its log.
func startFrom(t *testing.T, template string, fast bool) (*db.Cluster, string) {
	t.Helper()
	var log logBuffer
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
	stamp := filepath.Join(other, "stamp.json")
	raw, _ := os.ReadFile(stamp)
	var s map[string]any
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	s["schema"] = "0000"
	raw, _ = json.Marshal(s)
	if err := os.WriteFile(stamp, raw, 0o644); err != nil {
		t.Fatal(err)
	}
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
