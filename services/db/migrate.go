package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	migratepgx "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
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
	log *slog.Logger
}

// NewMigrator connects a golang-migrate instance to url. Close it when done.
func NewMigrator(url string) (*Migrator, error) {
	return newMigrator(context.Background(), url, nil, false)
}

// newMigrator is NewMigrator; with hold, it first takes the migration lock for the
// migrator's life, waiting for another process's migration only as long as ctx lasts.
func newMigrator(ctx context.Context, url string, log *slog.Logger, hold bool) (*Migrator, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cc, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("db: migrate: parse url: %w", err)
	}
	cc.BuildContextWatcherHandler = cancelAtServer
	sqlDB := stdlib.OpenDB(*cc)
	if hold {
		if err := holdMigrationLock(ctx, sqlDB, log); err != nil {
			sqlDB.Close()
			return nil, err
		}
	}
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
	return &Migrator{m: m, db: sqlDB, url: url, log: log}, nil
}

// cancelAtServer makes an ended context cancel the connection's statement at the server;
// pgx's default drops the connection, and the server's session waits on for the lock.
func cancelAtServer(c *pgconn.PgConn) ctxwatch.Handler {
	return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: 5 * time.Second}
}

// holdMigrationLock takes golang-migrate's migration lock on sqlDB's only session, which
// golang-migrate's driver then makes its own: its waits for the lock cannot be stopped
// (its pgx driver locks with context.Background()), this one ends with ctx. Advisory
// locks are counted per session, so the driver's own locks then succeed at once; the
// lock goes with the session when the migrator closes.
func holdMigrationLock(ctx context.Context, sqlDB *sql.DB, log *slog.Logger) error {
	sqlDB.SetMaxOpenConns(1)
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return fmt.Errorf("db: migrate: %w", err)
	}
	defer conn.Close() // back to the pool, for the driver
	var dbName, schema sql.NullString
	if err := conn.QueryRowContext(ctx, `SELECT current_database(), current_schema()`).Scan(&dbName, &schema); err != nil {
		return fmt.Errorf("db: migrate: %w", err)
	}
	if !schema.Valid {
		return nil // golang-migrate's driver refuses it, saying so
	}
	// The driver's lock: the same one as other releases' and the migrate CLI's.
	id, _ := database.GenerateAdvisoryLockId(dbName.String, schema.String, migratepgx.DefaultMigrationsTable)
	var got bool
	if err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock($1::bigint)`, id).Scan(&got); err != nil {
		return fmt.Errorf("db: migrate: lock: %w", err)
	}
	if got {
		return nil
	}
	log.Info("database: waiting for another process's migration to finish")
	// At most migrateWait, as golang-migrate's own wait was: a holder that hangs must
	// fail this start, saying so, not keep it waiting silently.
	wctx, cancel := context.WithTimeout(ctx, migrateWait)
	defer cancel()
	if _, err := conn.ExecContext(wctx, `SELECT pg_advisory_lock($1::bigint)`, id); err != nil {
		if ctx.Err() == nil && wctx.Err() != nil {
			return fmt.Errorf("db: migrate: another process has held the migration lock for %s; is a migration stuck? "+
				"(pg_locks shows the session holding it)", migrateWait)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("db: migrate: stopped while waiting for another process's migration, having applied none; "+
				"they run at the next start: %w", ctx.Err())
		}
		return fmt.Errorf("db: migrate: lock: %w", err)
	}
	return nil
}

// Close releases the migrator's connection.
func (mg *Migrator) Close() error {
	srcErr, dbErr := mg.m.Close()
	return errors.Join(srcErr, dbErr, mg.db.Close())
}

// Up applies every pending migration, then River's (the job queue's tables are
// River's to define, in their own versioned line; docs/architecture.md, Who owns which
// tables).
func (mg *Migrator) Up() error { return mg.up(context.Background()) }

// up applies the pending migrations one at a time, stopping between two once ctx ends:
// golang-migrate marks the version dirty while one runs, and one killed half way leaves
// it so, for a person to repair. (Not Up with GracefulStop: golang-migrate reads that
// from two goroutines through an unsynchronised flag, and says nothing before each.)
func (mg *Migrator) up(ctx context.Context) error {
	newDatabase := false
	for first := true; ; first = false {
		st, err := mg.Status()
		if err != nil {
			return err
		}
		if first {
			newDatabase = st.Version == 0
		}
		if st.Dirty || (st.Version != 0 && !slices.Contains(MigrationVersions(), st.Version)) {
			// golang-migrate's own refusal, of a dirty database or a newer release's version.
			if err := mg.m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
				return fmt.Errorf("db: migrate up: %w", dirtyHint(err))
			}
			continue
		}
		next := nextMigration(st.Version)
		if next == 0 {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("db: migrate: stopped at version %d of %d, before migration %d, as the process is stopping; "+
				"the rest run at the next start: %w", st.Version, st.Latest, next, ctx.Err())
		}
		mg.announce(first, newDatabase, next, st.Latest)
		slow := time.AfterFunc(slowMigration, func() {
			mg.log.Info(fmt.Sprintf("database: migration %d (%s) is still running after %s; one that rewrites a large table "+
				"(the audit log) may take minutes", next, migrationFile(next), slowMigration), "version", next)
		})
		err = mg.m.Steps(1)
		slow.Stop()
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue // another process applied the rest meanwhile: the next status says so
			}
			return fmt.Errorf("db: migrate up: %w", dirtyHint(err))
		}
	}
	return migrateQueue(ctx, mg.url, rivermigrate.DirectionUp)
}

// slowMigration is how long a migration runs before the log says it still does.
const slowMigration = 5 * time.Second

// announce logs the migration about to run: a new database's schema as one line (the
// first), not one per migration; an upgrade's each.
func (mg *Migrator) announce(first, newDatabase bool, next, latest uint) {
	switch {
	case newDatabase && first:
		mg.log.Info(fmt.Sprintf("database: applying migrations %d to %d to a new database", next, latest), "version", next)
	case newDatabase:
		mg.log.Debug(fmt.Sprintf("database: applying migration %d (%s)", next, migrationFile(next)), "version", next)
	default:
		mg.log.Info(fmt.Sprintf("database: applying migration %d (%s)", next, migrationFile(next)), "version", next)
	}
}

// queueSince is the migration that brought the first jobs (executions): below it,
// River's tables go too.
const queueSince = 16

// migrateWait bounds how long a migration may wait for another process's to finish.
const migrateWait = 10 * time.Minute

// migrateQueue runs River's migrations. River applies each in a transaction with its
// version row, so ctx ending within one rolls it back whole.
func migrateQueue(ctx context.Context, url string, dir rivermigrate.Direction) (err error) {
	stopping := ctx
	ctx, cancel := context.WithTimeout(ctx, migrateWait)
	defer cancel()
	defer func() {
		if err != nil && stopping.Err() != nil {
			err = fmt.Errorf("db: migrate queue: stopped as the process is stopping; the rest run at the next start: %w", err)
		}
	}()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return fmt.Errorf("db: migrate queue: %w", err)
	}
	cfg.ConnConfig.BuildContextWatcherHandler = cancelAtServer
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

// Down rolls back n migrations. It refuses, running nothing, more than the embedded
// migrations applied: golang-migrate's Steps(-n) would roll back every one of them
// (the audit log, users, secrets) before failing short.
func (mg *Migrator) Down(n int) error {
	target, err := mg.DownTarget(n)
	if err != nil {
		return err
	}
	return mg.downTo(fmt.Sprintf("down %d", n), target)
}

// DownTarget is the version a rollback of n migrations would leave the database at (0:
// none), or why it cannot run. Version numbers have gaps, so n is counted in the
// embedded migrations, not in numbers.
func (mg *Migrator) DownTarget(n int) (uint, error) {
	if n <= 0 {
		return 0, fmt.Errorf("db: migrate down: need a positive number of steps, got %d", n)
	}
	what := fmt.Sprintf("down %d", n)
	applied, err := mg.applied(what)
	if err != nil {
		return 0, err
	}
	if n > len(applied) {
		return 0, fmt.Errorf("db: migrate %s: the database is at version %d, and %d migrations are applied (%d to %d): "+
			"at most %d can be rolled back (all of them, leaving no schema); nothing was rolled back",
			what, applied[len(applied)-1], len(applied), applied[0], applied[len(applied)-1], len(applied))
	}
	if n == len(applied) {
		return 0, nil
	}
	return applied[len(applied)-n-1], nil
}

// DownTo rolls back every migration above v: v is an embedded migration below the
// database's version, or 0 for all of them. It refuses any other v, running nothing.
func (mg *Migrator) DownTo(v uint) error { return mg.downTo(fmt.Sprintf("down --to %d", v), v) }

func (mg *Migrator) downTo(what string, v uint) error {
	applied, err := mg.applied(what)
	if err != nil {
		return err
	}
	cur := applied[len(applied)-1]
	switch {
	case v >= cur:
		return fmt.Errorf("db: migrate %s: the database is at version %d: the version to roll back to must be below it", what, cur)
	case v != 0 && !slices.Contains(applied, v):
		return fmt.Errorf("db: migrate %s: %d is not a migration of this release (version numbers have gaps): "+
			"the nearest below it is %d, above it %d; nothing was rolled back", what, v, previousMigration(v), nextMigration(v))
	}
	n := 0
	for _, m := range applied {
		if m > v {
			n++
		}
	}
	if err := mg.m.Steps(-n); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("db: migrate %s: %w", what, dirtyHint(err))
	}
	if v < queueSince {
		return migrateQueue(context.Background(), mg.url, rivermigrate.DirectionDown)
	}
	return nil
}

// applied lists the embedded migrations at or below the database's version, oldest
// first, refusing a database no rollback can start from.
func (mg *Migrator) applied(what string) ([]uint, error) {
	st, err := mg.Status()
	if err != nil {
		return nil, err
	}
	switch {
	case st.Dirty:
		return nil, fmt.Errorf("db: migrate %s: %w", what, dirtyHint(migrate.ErrDirty{Version: int(st.Version)}))
	case st.Version == 0:
		return nil, fmt.Errorf("db: migrate %s: no migration is applied: nothing to roll back", what)
	case !slices.Contains(MigrationVersions(), st.Version):
		return nil, fmt.Errorf("db: migrate %s: the database is at version %d, which this release does not have (a later one "+
			"migrated it): roll it back with that release's `toolwarden migrate down`", what, st.Version)
	}
	var out []uint
	for _, m := range MigrationVersions() {
		if m <= st.Version {
			out = append(out, m)
		}
	}
	return out, nil
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
func Migrate(url string) error { return MigrateContext(context.Background(), url, nil) }

// MigrateContext applies every pending migration to url, logging each to log (nil: not
// at all) before it runs. When ctx ends (the process is told to stop), it stops waiting
// for another process's migration at once, or stops after the migration running, never
// inside one, and says so.
func MigrateContext(ctx context.Context, url string, log *slog.Logger) error {
	mg, err := newMigrator(ctx, url, log, true)
	if err != nil {
		return err
	}
	defer mg.Close()
	return mg.up(ctx)
}

// migrationFile is migration v's name, without its version and direction.
func migrationFile(v uint) string {
	entries, _ := fs.ReadDir(migrations.FS, ".")
	for _, e := range entries {
		if m := migrationName.FindStringSubmatch(e.Name()); m != nil {
			if n, _ := strconv.ParseUint(m[1], 10, 64); uint(n) == v {
				name := strings.TrimSuffix(e.Name(), ".up.sql")
				return name[len(m[1])+1:]
			}
		}
	}
	return ""
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
// cheaply enough for a readiness probe. A database without that table (an empty one,
// never migrated: golang-migrate creates it on its first run) is at version 0; q is
// best a pool, as the failed read would abort a transaction.
func CurrentMigration(ctx context.Context, q Querier) (MigrationStatus, error) {
	st := MigrationStatus{Latest: LatestMigration()}
	var v int64
	err := q.QueryRow(ctx, `/* db.CurrentMigration */ SELECT version, dirty FROM schema_migrations LIMIT 1`).Scan(&v, &st.Dirty)
	var pgErr *pgconn.PgError
	if errors.Is(err, pgx.ErrNoRows) || errors.As(err, &pgErr) && pgErr.Code == undefinedTable {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("db: migration state: %w", err)
	}
	st.Version = uint(v)
	return st, nil
}

// undefinedTable is PostgreSQL's SQLSTATE for a relation that does not exist.
const undefinedTable = "42P01"

// ServerVersion is the PostgreSQL server's version string ("15.18 (Debian ...)").
func ServerVersion(ctx context.Context, q Querier) (string, error) {
	var v string
	if err := q.QueryRow(ctx, `/* db.ServerVersion */ SHOW server_version`).Scan(&v); err != nil {
		return "", fmt.Errorf("db: server version: %w", err)
	}
	return v, nil
}
