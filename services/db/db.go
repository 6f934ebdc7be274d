// Package db owns the PostgreSQL connection: the pgx pool, transactions, the embedded
// cluster used when no DATABASE_URL is given, and the migration runner.
package db

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Querier is what services take when a caller may compose their SQL into a larger
// transaction: both *pgxpool.Pool and pgx.Tx satisfy it.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// TxBeginner starts transactions; *pgxpool.Pool and pgx.Tx (savepoints) satisfy it.
type TxBeginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// WithTx runs fn in a transaction that commits when fn returns nil and rolls back
// otherwise (including on panic, which is re-raised). Once a transaction begun on a
// pool (not a savepoint of another) commits, the functions AfterCommit registered in it
// run, in order, before WithTx returns.
func WithTx(ctx context.Context, b TxBeginner, fn func(tx pgx.Tx) error) (err error) {
	raw, err := b.Begin(ctx)
	if err != nil {
		return fmt.Errorf("db: begin: %w", err)
	}
	// fn gets the transaction wrapped with its hooks, so AfterCommit finds them on the
	// value it is handed. A savepoint of a WithTx transaction shares the outermost one's;
	// rolled back, what it registered goes.
	tx := &hookedTx{Tx: raw, hooks: &hooks{}}
	outer, nested := b.(*hookedTx)
	undo := func() {}
	if nested {
		tx.hooks = outer.hooks
		n := len(outer.hooks.fns)
		undo = func() { outer.hooks.fns = outer.hooks.fns[:n] }
	} else if _, ok := b.(pgx.Tx); ok {
		tx.hooks = nil // a savepoint of a transaction WithTx did not begin: nothing to run
	}
	defer func() {
		if p := recover(); p != nil {
			_ = raw.Rollback(context.WithoutCancel(ctx))
			undo()
			panic(p)
		}
		if err != nil {
			_ = raw.Rollback(context.WithoutCancel(ctx))
			undo()
		}
	}()
	if err = fn(tx); err != nil {
		return err
	}
	if err = raw.Commit(ctx); err != nil {
		return fmt.Errorf("db: commit: %w", err)
	}
	if !nested && tx.hooks != nil {
		for _, f := range tx.hooks.fns {
			f(context.WithoutCancel(ctx), b)
		}
	}
	return nil
}

// txAttempts bounds how often WithTxRetry runs a transaction that lost a deadlock or a
// serialization conflict.
const txAttempts = 4

// WithTxRetry is WithTx for a transaction that takes many locks in an order other work
// may not share (an import touching many tools while discovery updates them): when
// PostgreSQL ends it as a deadlock's victim or for a serialization conflict, fn runs
// again in a new transaction, up to four times. fn must start from scratch each time.
func WithTxRetry(ctx context.Context, b TxBeginner, fn func(tx pgx.Tx) error) error {
	var err error
	for range txAttempts {
		if err = WithTx(ctx, b, fn); !Retryable(err) || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// Retryable reports whether err ended a transaction that may succeed if run again: a
// deadlock's victim (40P01) or a serialization failure (40001).
func Retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001")
}

// hookedTx is a transaction begun by WithTx: the pgx.Tx with the functions to run once
// its outermost transaction commits.
type hookedTx struct {
	pgx.Tx
	hooks *hooks // nil: not a WithTx transaction's savepoint, nothing runs
}

// hooks are the functions to run once a WithTx transaction commits.
type hooks struct {
	fns []func(context.Context, TxBeginner)
}

// AfterCommit registers fn to run once tx commits, with what WithTx began it on (the
// pool, or a value wrapping it), so a change is visible to this process's caches before
// the caller hears it committed (events announce themselves to the buses of an
// events.Local this way). It does nothing for
// a transaction not begun by WithTx, and fn never runs if tx rolls back. fn must not
// fail the change: it already committed.
func AfterCommit(tx pgx.Tx, fn func(ctx context.Context, b TxBeginner)) {
	if h, ok := tx.(*hookedTx); ok && h.hooks != nil {
		h.hooks.fns = append(h.hooks.fns, fn)
	}
}

// journalLockKey is the advisory lock that orders the audit chain and the event ids.
// One lock for both means they can never deadlock against each other.
const journalLockKey = 0x746f6f6c77617264 // "toolward"

// LockJournal takes the transaction-scoped journal lock. Audit appends and event
// publishes take it before they draw an id, so ids are handed out in commit order:
// the audit chain links rows in id order and a websocket client resuming from event id
// N cannot miss an event that commits later with a smaller id.
func LockJournal(ctx context.Context, q Querier) error {
	if _, err := q.Exec(ctx, LockJournalSQL, JournalLockKey); err != nil {
		return fmt.Errorf("db: journal lock: %w", err)
	}
	return nil
}

// LockJournalSQL is LockJournal as a statement with its argument, for callers that
// pipeline it with other statements (pgx.Batch) inside their transaction.
const LockJournalSQL = `/* db.LockJournal */ SELECT pg_advisory_xact_lock($1)`

// JournalLockKey is LockJournalSQL's argument.
const JournalLockKey int64 = journalLockKey

// Commit is how a transaction's commit waits for its write-ahead log.
type Commit int

const (
	// Synchronous commits return once the WAL is flushed to disk (the server's
	// synchronous_commit, on by default): the change survives any crash.
	Synchronous Commit = iota
	// Asynchronous commits return before the flush (SET LOCAL synchronous_commit = off):
	// the change is committed and visible at once and survives a crash of Toolwarden, but
	// a crash of PostgreSQL or its host within about three wal_writer_delay (600 ms by
	// default) loses it, and every asynchronous commit after it, never one before it: WAL
	// is flushed in order, so a later synchronous commit makes it durable too. For
	// records whose loss in that window costs little (the router's records of LOW calls,
	// docs/security.md, Durability of records); never for approvals, decisions,
	// configuration or secrets.
	Asynchronous
)

// AsyncCommitSQL, run in a transaction, makes it commit asynchronously.
const AsyncCommitSQL = `/* db.AsyncCommit */ SET LOCAL synchronous_commit = off`

// SetCommit makes tx commit as c says: for Asynchronous it runs AsyncCommitSQL (before
// anything else, so even a failing statement leaves no doubt), for Synchronous nothing.
func SetCommit(ctx context.Context, tx pgx.Tx, c Commit) error {
	if c != Asynchronous {
		return nil
	}
	if _, err := tx.Exec(ctx, AsyncCommitSQL); err != nil {
		return fmt.Errorf("db: asynchronous commit: %w", err)
	}
	return nil
}

// IsUniqueViolation reports whether err is a unique_violation, optionally on the named
// constraint or index.
func IsUniqueViolation(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
		return false
	}
	return constraint == "" || pgErr.ConstraintName == constraint
}

// DefaultMaxConns is the pool size unless the URL sets pool_max_conns. pgx's own default
// (4 on a 2-core machine) is too few: the bus keeps one connection listening, and each
// running execution holds one for its lock besides the one its step works with.
const DefaultMaxConns = 32

// sessionSettings are set on each of the pool's connections. A URL that sets one
// (?tcp_keepalives_idle=…) keeps its own.
//
// The keepalives make PostgreSQL notice within seconds that a replica's host died or
// was cut off: such a host sends nothing more, and without them the server keeps its
// sessions, and the execution and advisory locks they hold, until the kernel gives up
// (about two hours), so no surviving replica could take its work over. About 20 s with
// these (10 s idle, then 3 probes 3 s apart; 20 s for data sent and never acknowledged).
// Over a Unix socket PostgreSQL ignores them, and behind a TCP proxy they reach the
// proxy only.
//
// READ COMMITTED is what Toolwarden's transactions are written for (a statement sees
// what committed before it: a count after a lock, a tool's rows removed with it by
// migration 57's trigger), whatever default a database or role was given, unless the
// URL sets default_transaction_isolation itself.
var sessionSettings = [][2]string{
	{"tcp_keepalives_idle", "10"}, {"tcp_keepalives_interval", "3"}, {"tcp_keepalives_count", "3"}, {"tcp_user_timeout", "20000"},
	{"default_transaction_isolation", "read committed"},
}

// sessionSQL sets, in one statement, the sessionSettings the connection's startup
// parameters do not set already ("" when they set them all).
func sessionSQL(startup map[string]string) (string, []any) {
	var sets []string
	var args []any
	for _, kv := range sessionSettings {
		if _, set := startup[kv[0]]; set {
			continue
		}
		args = append(args, kv[0], kv[1])
		sets = append(sets, fmt.Sprintf("set_config($%d, $%d, false)", len(args)-1, len(args)))
	}
	if len(sets) == 0 {
		return "", nil
	}
	return "/* db.session */ SELECT " + strings.Join(sets, ", "), args
}

// NewPool opens a pgx pool for url and checks it answers.
func NewPool(ctx context.Context, url string) (*pgxpool.Pool, error) {
	return newPool(ctx, url, nil)
}

// newPool is NewPool, with dial (when not nil) wrapping the connections' dial function.
func newPool(ctx context.Context, url string, dial func(pgconn.DialFunc) pgconn.DialFunc) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("db: parse database url: %w", err)
	}
	if dial != nil {
		cfg.ConnConfig.DialFunc = dial(cfg.ConnConfig.DialFunc)
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = DefaultMaxConns
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = "toolwarden"
	if sql, args := sessionSQL(cfg.ConnConfig.RuntimeParams); sql != "" {
		// Set once connected, not in the startup message: poolers (PgBouncer) refuse
		// startup parameters they do not know. One that refuses the statement leaves the
		// session as it was: the isolation level, which the transactions rely on, is then
		// set on its own.
		_, ownIsolation := cfg.ConnConfig.RuntimeParams["default_transaction_isolation"]
		cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
			if _, err := c.Exec(ctx, sql, args...); err != nil && !ownIsolation {
				_, _ = c.Exec(ctx, `/* db.session.isolation */ SET default_transaction_isolation = 'read committed'`)
			}
			return nil
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("db: connect: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("db: connect to %s: %w", redact(cfg.ConnConfig), err)
	}
	return pool, nil
}

// SidePool is a small pool of n connections to main's database, with main's settings,
// for work that must not wait behind main's busy connections (a replica's heartbeat,
// whose lateness makes the others take it for dead). A connection it finds broken is
// dropped after a ping of at most 2 s, not waited on.
func SidePool(ctx context.Context, main *pgxpool.Pool, name string, n int32) (*pgxpool.Pool, error) {
	cfg := main.Config()
	cfg.MaxConns, cfg.MinConns, cfg.MinIdleConns, cfg.PingTimeout = n, 0, 0, 2*time.Second
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = "toolwarden " + name
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("db: %s pool: %w", name, err)
	}
	return pool, nil
}

// redact describes a connection without its password, for error messages.
func redact(c *pgx.ConnConfig) string {
	return fmt.Sprintf("host=%s port=%d user=%s dbname=%s", c.Host, c.Port, c.User, c.Database)
}

// All runs a query and scans every row into T by column name
// (pgx.RowToStructByName); what names the query in errors ("registry: list servers").
func All[T any](ctx context.Context, q Querier, what, sql string, args ...any) ([]T, error) {
	return collect(ctx, q, pgx.RowToStructByName[T], what, sql, args...)
}

// Column runs a query of one column and scans it into T (ids, numbers).
func Column[T any](ctx context.Context, q Querier, what, sql string, args ...any) ([]T, error) {
	return collect(ctx, q, pgx.RowTo[T], what, sql, args...)
}

func collect[T any](ctx context.Context, q Querier, to pgx.RowToFunc[T], what, sql string, args ...any) ([]T, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	list, err := pgx.CollectRows(rows, to)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return list, nil
}

// EscapeLike makes s match literally inside a LIKE or ILIKE pattern.
func EscapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// EncodeCursor turns the position after a page's last row (any JSON-encodable sort
// key) into the opaque next_cursor token lists give out.
func EncodeCursor(v any) string {
	b, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(b)
}

// NextPage trims rows fetched with LIMIT limit+1 to a page of limit and returns the
// cursor after its last row (key gives that row's sort key), or "" on the last page.
func NextPage[T any](rows []T, limit int, key func(T) any) ([]T, string) {
	if len(rows) <= limit {
		return rows, ""
	}
	rows = rows[:limit]
	return rows, EncodeCursor(key(rows[limit-1]))
}

// DecodeCursor reads a token EncodeCursor made into v; false when s is not one.
func DecodeCursor(s string, v any) bool {
	b, err := base64.RawURLEncoding.DecodeString(s)
	return err == nil && json.Unmarshal(b, v) == nil
}
