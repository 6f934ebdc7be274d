package db_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-migrate/migrate/v4/database"

	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// recordHandler hands each log record to fn as it is logged, in the logging goroutine.
type recordHandler struct{ fn func(slog.Record) }

func (h recordHandler) Enabled(context.Context, slog.Level) bool      { return true }
func (h recordHandler) Handle(_ context.Context, r slog.Record) error { h.fn(r); return nil }
func (h recordHandler) WithAttrs([]slog.Attr) slog.Handler            { return h }
func (h recordHandler) WithGroup(string) slog.Handler                 { return h }

// openMigrating opens url as serve does, migrating it, and closes it again.
func openMigrating(ctx context.Context, url string, log *slog.Logger) error {
	d, err := db.Open(ctx, db.Config{URL: url, Migrate: true, Cluster: &db.ClusterOptions{Logger: log}})
	if err == nil {
		d.Close()
	}
	return err
}

// migrationStatus reads url's golang-migrate version.
func migrationStatus(t *testing.T, url string) db.MigrationStatus {
	t.Helper()
	mg, err := db.NewMigrator(url)
	if err != nil {
		t.Fatal(err)
	}
	defer mg.Close()
	st, err := mg.Status()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// A stop (SIGTERM: the context ends) while another process holds the migration lock
// ends the wait at once, having run nothing, and the next start migrates.
func TestMigrateStopsWaitingForTheLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := dbtest.NewEmpty(t)
	holder := connect(t, url)
	defer holder.Close(ctx)
	var dbName, schema string
	if err := holder.QueryRow(ctx, `SELECT current_database(), current_schema()`).Scan(&dbName, &schema); err != nil {
		t.Fatal(err)
	}
	// golang-migrate's own lock, as another replica migrating holds it.
	id, _ := database.GenerateAdvisoryLockId(dbName, schema, "schema_migrations")
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_lock($1::bigint)`, id); err != nil {
		t.Fatal(err)
	}
	stopCtx, stop := context.WithCancel(ctx)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- openMigrating(stopCtx, url, nil) }()
	// Stop once the migrator is waiting for the lock.
	for waiting := false; !waiting; {
		select {
		case err := <-errc:
			t.Fatalf("migrate ended while another session held the lock: %v", err)
		default:
		}
		if err := holder.QueryRow(ctx, `SELECT count(*) > 0 FROM pg_locks
			WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	var err error
	select {
	case err = <-errc:
	case <-time.After(time.Minute): // a guard against hanging: the wait should end at once
		t.Fatal("migrate still waiting for the lock a minute after its context ended")
	}
	t.Logf("stopped: %v", err)
	if err == nil || !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "next start") {
		t.Fatalf("migrate stopped while waiting: got %v, want a context.Canceled error saying the next start migrates", err)
	}
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_unlock($1::bigint)`, id); err != nil {
		t.Fatal(err)
	}
	if st := migrationStatus(t, url); st.Dirty || st.Version != 0 {
		t.Fatalf("after a stop while waiting: %+v, want version 0, clean", st)
	}
	if err := openMigrating(ctx, url, nil); err != nil {
		t.Fatalf("the next start: %v", err)
	}
	if st := migrationStatus(t, url); !st.Current() {
		t.Fatalf("after the next start: %+v, want current", st)
	}
}

// A stop while a migration runs lets that one finish and runs no other: the database is
// left clean at it (not dirty, so no `migrate force` by hand), and the next start goes on.
func TestMigrateStopsBetweenMigrations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := dbtest.NewEmpty(t)
	stopCtx, stop := context.WithCancel(ctx)
	defer stop()
	var mu sync.Mutex
	var applying []uint
	log := slog.New(recordHandler{func(r slog.Record) {
		if !strings.Contains(r.Message, "applying migration") {
			return
		}
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "version" {
				mu.Lock()
				applying = append(applying, uint(a.Value.Uint64()))
				mu.Unlock()
			}
			return true
		})
		stop() // SIGTERM arrives while the first migration runs
	}})
	err := openMigrating(stopCtx, url, log)
	mu.Lock()
	defer mu.Unlock()
	if len(applying) == 0 {
		t.Fatalf("no log line said a migration was being applied (migrate: %v)", err)
	}
	t.Logf("stopped: %v", err)
	if err == nil || !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "next start") {
		t.Fatalf("migrate stopped during the first migration: got %v, want a context.Canceled error saying the next start goes on", err)
	}
	st := migrationStatus(t, url)
	if st.Dirty || st.Version != applying[0] || st.Version >= db.LatestMigration() {
		t.Fatalf("after a stop during migration %d: %+v, want it applied, clean, and no other", applying[0], st)
	}
	if len(applying) != 1 {
		t.Fatalf("migrations begun after the stop: %v", applying[1:])
	}
	if err := openMigrating(ctx, url, nil); err != nil {
		t.Fatalf("the next start: %v", err)
	}
	if st := migrationStatus(t, url); !st.Current() {
		t.Fatalf("after the next start: %+v, want current", st)
	}
}

// A new database's schema is announced in one line, not one per migration, and no line
// says a migration may take minutes unless one has run for a while; an upgrade names
// each migration it applies.
func TestMigrationsAnnounced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := dbtest.NewEmpty(t)
	var mu sync.Mutex
	var lines []string
	log := slog.New(recordHandler{func(r slog.Record) {
		// A migration slow on a loaded machine says so once it has run a while: not what
		// is counted here.
		if r.Level >= slog.LevelInfo && strings.Contains(r.Message, "migration") && !strings.Contains(r.Message, "still running") {
			mu.Lock()
			lines = append(lines, r.Message)
			mu.Unlock()
		}
	}})
	taken := func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := lines
		lines = nil
		return out
	}
	if err := openMigrating(ctx, url, log); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("database: applying migrations 1 to %d to a new database", db.LatestMigration())
	if got := taken(); len(got) != 1 || got[0] != want {
		t.Fatalf("a new database's migrations logged %q, want the one line %q", got, want)
	}

	mg, err := db.NewMigrator(url)
	if err != nil {
		t.Fatal(err)
	}
	if err := mg.Down(2); err != nil {
		t.Fatal(err)
	}
	if err := mg.Close(); err != nil {
		t.Fatal(err)
	}
	if err := openMigrating(ctx, url, log); err != nil {
		t.Fatal(err)
	}
	got := taken()
	vs := db.MigrationVersions()
	if len(got) != 2 || !strings.HasPrefix(got[0], fmt.Sprintf("database: applying migration %d (", vs[len(vs)-2])) ||
		!strings.HasPrefix(got[1], fmt.Sprintf("database: applying migration %d (", vs[len(vs)-1])) {
		t.Fatalf("an upgrade by two migrations logged %q, want one line naming each", got)
	}
}
