// Package dbtest gives each test its own PostgreSQL database, cloned from a migrated
// template in one embedded cluster per test process (docs/architecture.md, Testing).
//
// A package that uses it must run its tests through Main:
//
//	func TestMain(m *testing.M) { dbtest.Main(m) }
package dbtest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/migrations"
	"github.com/toolwarden/toolwarden/services/db"
)

const templateDB = "tw_template"

var (
	once    sync.Once
	cluster *db.Cluster
	dir     string
	initErr error
	seq     atomic.Int64
	started atomic.Bool
)

// Main runs the package's tests (m is a *testing.M, or what wraps one to clean up after
// it) and then stops the cluster and removes its files.
func Main(m interface{ Run() int }) {
	code := m.Run()
	if started.Load() {
		cluster.Stop()
	}
	if dir != "" {
		_ = os.RemoveAll(dir)
	}
	os.Exit(code)
}

// ownerFile names, in a cluster's folder, the process that made it (its pid, then its
// command line), which holds a lock on it while it lives: a later test process removes
// the folder once nobody holds the lock (sweep).
const ownerFile = "owner.pid"

// sweep removes the cluster folders that test processes killed before their clean-up
// (Main) left in the temp dir: those whose owner process is gone, and whose postgres,
// which stops itself once its owner is gone, has stopped too.
//
// The owner holds a lock on its owner.pid for as long as it lives (ownerLock): a lock
// the sweep can take is a lock nobody holds, whatever became of the owner's pid (reused,
// or in another pid namespace). A folder younger than a minute is left alone: its owner
// may not have taken the lock yet.
func sweep() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "twdb-*"))
	for _, d := range dirs {
		if fi, err := os.Stat(d); err != nil || time.Since(fi.ModTime()) < time.Minute {
			continue
		}
		if !ownerGone(filepath.Join(d, ownerFile)) {
			continue
		}
		pm, err := os.ReadFile(filepath.Join(d, "pg", "data", "postmaster.pid"))
		switch {
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			continue
		case err == nil:
			first, _, _ := strings.Cut(string(pm), "\n")
			if pid, _ := strconv.Atoi(strings.TrimSpace(first)); db.ProcessAlive(pid) {
				continue // its postgres has not noticed yet
			}
		}
		_ = os.RemoveAll(d)
	}
}

// ownerGone reports whether the owner file exists and nobody holds its lock.
func ownerGone(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false // an older folder, or one being made: not ours to judge
	}
	defer f.Close()
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return false // held: its owner lives
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return true
}

// ownerLock is this process's owner.pid, open and locked until the process ends.
var ownerLock *os.File

func setup() {
	sweep()
	// A short path under the system temp dir: the unix socket path limit is 107 bytes.
	dir, initErr = os.MkdirTemp("", "twdb-")
	if initErr != nil {
		return
	}
	// The pid, then the command line: which test left a folder behind.
	if ownerLock, initErr = os.Create(filepath.Join(dir, ownerFile)); initErr != nil {
		return
	}
	if initErr = syscall.Flock(int(ownerLock.Fd()), syscall.LOCK_EX); initErr != nil {
		return
	}
	if _, initErr = ownerLock.WriteString(strconv.Itoa(os.Getpid()) + "\n" + strings.Join(os.Args, " ") + "\n"); initErr != nil {
		return
	}
	// postgres may run as another user (we are root): let it through this folder.
	if initErr = os.Chmod(dir, 0o755); initErr != nil {
		return
	}
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cluster, initErr = db.StartCluster(ctx, dir, &db.ClusterOptions{Fast: !Durable(), Logger: quiet})
	if initErr != nil {
		return
	}
	started.Store(true)
	initErr = createTemplate(ctx)
}

func createTemplate(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, cluster.URLFor("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+templateDB); err != nil {
		return fmt.Errorf("dbtest: create template: %w", err)
	}
	if err := db.Migrate(cluster.URLFor(templateDB)); err != nil {
		return fmt.Errorf("dbtest: migrate template: %w", err)
	}
	return nil
}

// DurableEnv names the environment variable that chooses the test cluster's settings:
// "on" durable, "off" fast; unset, durable exactly when benchmarks run.
const DurableEnv = "TOOLWARDEN_TEST_DURABLE"

// Durable reports whether this process's cluster runs with the settings of `toolwarden
// serve` (fsync, synchronous_commit and full_page_writes on) rather than the fast ones
// tests use (all three off: a test never survives a host crash, and each commit would
// otherwise wait for the disk). Benchmarks (-test.bench given, as `make bench` does) get
// the durable cluster, so they measure what users run; DurableEnv overrides either way
// (TOOLWARDEN_TEST_DURABLE=off make bench compares with the fast settings).
func Durable() bool {
	switch os.Getenv(DurableEnv) {
	case "on", "1", "true":
		return true
	case "off", "0", "false":
		return false
	}
	f := flag.Lookup("test.bench")
	return f != nil && f.Value.String() != ""
}

// Cluster returns the process's embedded cluster, starting it on first use.
func Cluster(t testing.TB) *db.Cluster {
	t.Helper()
	once.Do(setup)
	if initErr != nil {
		t.Fatalf("dbtest: embedded PostgreSQL: %v", initErr)
	}
	return cluster
}

// ClusterDir returns the directory of the process's embedded cluster (its files and
// its unix socket): what a confined stdio server must not reach in tests, as the data
// dir in production.
func ClusterDir(t testing.TB) string {
	t.Helper()
	Cluster(t)
	return dir
}

// NewURL creates a fresh, migrated database for this test and returns its URL.
func NewURL(t testing.TB) string {
	t.Helper()
	return createDatabase(t, "t", "TEMPLATE "+templateDB)
}

// New creates a fresh, migrated database for this test and returns a pool on it that
// is closed when the test ends.
func New(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := db.NewPool(context.Background(), NewURL(t))
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// NewEmpty creates a database with no migrations applied (for migration tests).
func NewEmpty(t testing.TB) string {
	t.Helper()
	return createDatabase(t, "e", "")
}

// createDatabase creates a uniquely named database (with the given CREATE DATABASE
// options) on the process's cluster and returns its URL.
func createDatabase(t testing.TB, prefix, options string) string {
	t.Helper()
	c := Cluster(t)
	name := fmt.Sprintf("%s%d_%d", prefix, os.Getpid(), seq.Add(1))
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.URLFor("postgres"))
	if err != nil {
		t.Fatalf("dbtest: connect: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name+" "+options); err != nil {
		t.Fatalf("dbtest: create database %s: %v", name, err)
	}
	return c.URLFor(name)
}

// TempDir returns a short temporary directory (socket paths are limited to 107 bytes,
// and t.TempDir's paths can exceed that), reachable by the postgres user, removed when
// the test ends.
func TempDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "twt-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	return filepath.Clean(d)
}

// AppURL is url (a database of a test cluster, from NewURL) as the application's role,
// db.AppRole: not a superuser, not the owner, unable to rewrite the append-only tables.
// `serve` connects so. It works in a child process too (the URL says where the cluster is).
func AppURL(t testing.TB, url string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	return fmt.Sprintf("host=%s user=%s dbname=%s sslmode=disable", cfg.Host, db.AppRole, cfg.Database)
}

// AppPool is a pool on url (from NewURL) as the application's role (AppURL), closed
// when the test ends.
func AppPool(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := db.NewPool(context.Background(), AppURL(t, url))
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// RunMigration runs one migration file (name in migrations.FS, as "000058_x.up.sql") on
// pool as it stands: for a test of what an up or down step does to data.
func RunMigration(t testing.TB, pool *pgxpool.Pool, name string) {
	t.Helper()
	sql, err := migrations.FS.ReadFile(name)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	if _, err := pool.Exec(context.Background(), string(sql)); err != nil {
		t.Fatalf("dbtest: %s: %v", name, err)
	}
}

// PrintSettings prints the database's version and durability settings, for a
// benchmark's output (internal/benchdoc reads the line into docs/benchmarks.md): a
// figure means something only with the settings it was measured under.
func PrintSettings(tb testing.TB, q db.Querier) {
	tb.Helper()
	var version, fsync, syncCommit, fpw string
	if err := q.QueryRow(context.Background(), `SELECT current_setting('server_version'), current_setting('fsync'),
		current_setting('synchronous_commit'), current_setting('full_page_writes')`).Scan(&version, &fsync, &syncCommit, &fpw); err != nil {
		tb.Fatal(err)
	}
	fmt.Printf("\n- database: PostgreSQL %s, fsync=%s, synchronous_commit=%s, full_page_writes=%s\n", version, fsync, syncCommit, fpw)
}
