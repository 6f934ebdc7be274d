package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	migratepgx "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/toolwarden/toolwarden/migrations"
)

// MigrationStatus is where a database stands against the embedded migrations.
type MigrationStatus struct {
	Version uint // 0 when no migration has run
	Dirty   bool // a migration failed half way; fix by hand, then `migrate force V`
	Latest  uint // newest embedded migration
}

// Current reports whether the database is at the newest migration and clean.
func (s MigrationStatus) Current() bool { return !s.Dirty && s.Version == s.Latest }

// Migrator applies the embedded migrations to one database.
type Migrator struct {
	m   *migrate.Migrate
	db  *sql.DB
	url string
}

// NewMigrator connects a golang-migrate instance to url. Close it when done.
func NewMigrator(url string) (*Migrator, error) {
	cc, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("db: migrate: parse url: %w", err)
	}
	sqlDB := stdlib.OpenDB(*cc)
	drv, err := migratepgx.WithInstance(sqlDB, &migratepgx.Config{})
	if err != nil {
		sqlDB.Close()
		return nil, fmt.Errorf("db: migrate: %w", err)
	}
	src, err := iofs.New(migrations.FS, ".")
	if err != nil {
		sqlDB.Close()
		return nil, fmt.Errorf("db: migrate: source: %w", err)
	}
	m, err := migrate.NewWithInstance("iofs", src, "pgx5", drv)
	if err != nil {
		sqlDB.Close()
		return nil, fmt.Errorf("db: migrate: %w", err)
	}
	// Replicas starting together wait for the one migrating, however long a migration
	// takes (golang-migrate's default is to give up after 15 s).
	m.LockTimeout = migrateWait
	return &Migrator{m: m, db: sqlDB, url: url}, nil
}

// Close releases the migrator's connection.
func (mg *Migrator) Close() error {
	srcErr, dbErr := mg.m.Close()
	return errors.Join(srcErr, dbErr, mg.db.Close())
}

// Up applies every pending migration, then River's (the job queue's tables are
// River's to define, in their own versioned line; docs/architecture.md, Who owns which
// tables).
func (mg *Migrator) Up() error {
	if err := mg.m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("db: migrate up: %w", dirtyHint(err))
	}
	return migrateQueue(mg.url, rivermigrate.DirectionUp)
}

// queueSince is the migration that brought the first jobs (executions): below it,
// River's tables go too.
const queueSince = 16

// migrateWait bounds how long a migration may wait for another process's to finish.
const migrateWait = 10 * time.Minute

func migrateQueue(url string, dir rivermigrate.Direction) error {
	ctx, cancel := context.WithTimeout(context.Background(), migrateWait)
	defer cancel()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return fmt.Errorf("db: migrate queue: %w", err)
	}
	cfg.MaxConns = 3 // the lock's, and the migrator's
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("db: migrate queue: %w", err)
	}
	defer pool.Close()
	m, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return fmt.Errorf("db: migrate queue: %w", err)
	}
	opts := &rivermigrate.MigrateOpts{}
	if dir == rivermigrate.DirectionDown {
		opts.TargetVersion = -1 // all of them
	}
	// River's migrator takes no lock of its own: replicas starting together on a fresh
	// database would each create its tables. A lock held on a connection of its own while
	// it runs (not one transaction: a River migration adds an enum value and uses it)
	// lets one do them and the others find them done.
	lock, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("db: migrate queue: %w", err)
	}
	defer lock.Release()
	if _, err := lock.Exec(ctx, `SELECT pg_advisory_lock(hashtextextended('toolwarden.migrate_queue', 0))`); err != nil {
		return fmt.Errorf("db: migrate queue: lock: %w", err)
	}
	defer func() {
		_, _ = lock.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(hashtextextended('toolwarden.migrate_queue', 0))`)
	}()
	if _, err := m.Migrate(ctx, dir, opts); err != nil {
		return fmt.Errorf("db: migrate queue: %w", err)
	}
	return nil
}

// Down rolls back n migrations.
func (mg *Migrator) Down(n int) error {
	if n <= 0 {
		return fmt.Errorf("db: migrate down: need a positive number of steps, got %d", n)
	}
	if err := mg.m.Steps(-n); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("db: migrate down %d: %w", n, dirtyHint(err))
	}
	st, err := mg.Status()
	if err != nil {
		return err
	}
	if st.Version < queueSince {
		return migrateQueue(mg.url, rivermigrate.DirectionDown)
	}
	return nil
}

// dirtyHint is err, saying how to recover when it is golang-migrate's refusal of a
// dirty database (whose own text says "force" without naming the command). A failed up
// of N leaves it dirty at N; a failed down of N, at the migration before N (-1 for none).
func dirtyHint(err error) error {
	var d migrate.ErrDirty
	if !errors.As(err, &d) {
		return err
	}
	at, after := "version "+strconv.Itoa(d.Version), "the first migration"
	var prev, next uint
	if d.Version >= 0 {
		prev, next = previousMigration(uint(d.Version)), nextMigration(uint(d.Version))
	} else {
		at, next = "no version", nextMigration(0)
	}
	choices := fmt.Sprintf("%d if it holds none", prev)
	if d.Version >= 0 {
		choices = fmt.Sprintf("%d if it holds migration %d whole, %d if none of it", d.Version, d.Version, prev)
		after = fmt.Sprintf("migration %d", next)
	}
	if next != 0 {
		choices += fmt.Sprintf(", %d if a down of %s was undone", next, after)
	}
	return fmt.Errorf("the database is marked dirty at %s: a migration failed half way (an up to it, or a down from the "+
		"next), so the schema may hold part of one. Make it match one version by hand (the files in migrations/), then "+
		"run `toolwarden migrate force V`, V the last migration it holds whole: %s: %w", at, choices, err)
}

// previousMigration is the embedded migration before v (0: none).
func previousMigration(v uint) uint {
	prev := uint(0)
	for _, m := range MigrationVersions() {
		if m >= v {
			break
		}
		prev = m
	}
	return prev
}

// nextMigration is the embedded migration after v (0: none).
func nextMigration(v uint) uint {
	for _, m := range MigrationVersions() {
		if m > v {
			return m
		}
	}
	return 0
}

// Force records v as the version the database is at, clean, running nothing: how a
// person marks the state they restored by hand after a migration failed half way.
// v is an embedded migration, or 0 for none applied.
func (mg *Migrator) Force(v uint) error {
	if v != 0 && !slices.Contains(MigrationVersions(), v) {
		return fmt.Errorf("db: migrate force: %d is not a migration of this release (0, or 1 to %d)", v, LatestMigration())
	}
	target := int(v)
	if v == 0 {
		target = database.NilVersion
	}
	if err := mg.m.Force(target); err != nil {
		return fmt.Errorf("db: migrate force %d: %w", v, err)
	}
	return nil
}

// Status reports the current and newest versions.
func (mg *Migrator) Status() (MigrationStatus, error) {
	st := MigrationStatus{Latest: LatestMigration()}
	v, dirty, err := mg.m.Version()
	if errors.Is(err, migrate.ErrNilVersion) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("db: migrate status: %w", err)
	}
	st.Version, st.Dirty = v, dirty
	return st, nil
}

// Migrate applies every pending migration to url.
func Migrate(url string) error {
	mg, err := NewMigrator(url)
	if err != nil {
		return err
	}
	defer mg.Close()
	return mg.Up()
}

var migrationName = regexp.MustCompile(`^(\d+)_.*\.up\.sql$`)

// LatestMigration is the version of the newest embedded migration.
func LatestMigration() uint {
	versions := MigrationVersions()
	if len(versions) == 0 {
		return 0
	}
	return versions[len(versions)-1]
}

// MigrationVersions lists the embedded migration versions in order.
func MigrationVersions() []uint {
	entries, _ := fs.ReadDir(migrations.FS, ".")
	var out []uint
	for _, e := range entries {
		if m := migrationName.FindStringSubmatch(e.Name()); m != nil {
			v, _ := strconv.ParseUint(m[1], 10, 64)
			out = append(out, uint(v))
		}
	}
	slices.Sort(out)
	return out
}

// CurrentMigration reads the migration state straight from golang-migrate's table,
// cheaply enough for a readiness probe.
func CurrentMigration(ctx context.Context, q Querier) (MigrationStatus, error) {
	st := MigrationStatus{Latest: LatestMigration()}
	var v int64
	err := q.QueryRow(ctx, `/* db.CurrentMigration */ SELECT version, dirty FROM schema_migrations LIMIT 1`).Scan(&v, &st.Dirty)
	if errors.Is(err, pgx.ErrNoRows) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("db: migration state: %w", err)
	}
	st.Version = uint(v)
	return st, nil
}

// ServerVersion is the PostgreSQL server's version string ("15.18 (Debian ...)").
func ServerVersion(ctx context.Context, q Querier) (string, error) {
	var v string
	if err := q.QueryRow(ctx, `/* db.ServerVersion */ SHOW server_version`).Scan(&v); err != nil {
		return "", fmt.Errorf("db: server version: %w", err)
	}
	return v, nil
}
