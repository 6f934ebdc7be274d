package audit

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/events"
)

// Appender is the chain's append for a writer that makes most of the appends (the
// router's recorder): it remembers the head it wrote last, so an append in a
// transaction of its own usually costs one round trip. It is not safe for concurrent
// use; its zero value knows no head.
type Appender struct {
	head *Head
}

// Append writes entries in a transaction of its own on a connection from pool and
// returns their audit.appended events for the caller to publish (later, off the path
// of whoever waits for the append). It is the fixed cost every tool call pays before it
// runs (docs/architecture.md, Performance). Knowing the chain head it is one round trip: BEGIN, the journal
// lock, an insert that only happens if that head is still the last entry, and COMMIT.
// Otherwise, or when someone else appended meanwhile, it is two: BEGIN, the lock and
// the head; then the insert and COMMIT.
//
// commit says whether the transaction waits for its WAL flush (db.Synchronous) or not
// (db.Asynchronous). Either way the chain stays whole: appends are ordered by the
// journal lock and WAL is flushed in order, so a crash can only lose a tail of
// asynchronous appends, which leaves a chain that verifies.
func (a *Appender) Append(ctx context.Context, pool *pgxpool.Pool, entries []Entry, commit db.Commit) (announce []events.Draft, err error) {
	ab, err := NewBatch(entries)
	if err != nil || ab.Len() == 0 {
		return nil, err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("audit: append: %w", err)
	}
	defer func() {
		if err != nil {
			a.head = nil
			if conn.Conn().PgConn().TxStatus() != 'I' {
				if _, rerr := conn.Exec(context.WithoutCancel(ctx), "ROLLBACK"); rerr != nil {
					_ = conn.Conn().Close(context.WithoutCancel(ctx)) // never hand back a connection mid-transaction
				}
			}
		}
		conn.Release()
	}()
	if a.head != nil {
		ab.Seal(*a.head)
		var inserted int64
		b := &pgx.Batch{}
		b.Queue("BEGIN")
		if commit == db.Asynchronous {
			b.Queue(db.AsyncCommitSQL)
		}
		b.Queue(db.LockJournalSQL, db.JournalLockKey)
		sql, args := ab.InsertAfterQuery(*a.head)
		b.Queue(sql, args...).Exec(func(tag pgconn.CommandTag) error {
			inserted = tag.RowsAffected()
			return nil
		})
		b.Queue("COMMIT")
		if err := conn.SendBatch(ctx, b).Close(); err != nil {
			return nil, fmt.Errorf("audit: append: %w", err)
		}
		if inserted == int64(ab.Len()) {
			last := ab.Last()
			a.head = &last
			return ab.Announcements(), nil
		}
		// Someone else appended: read the head and seal again.
	}
	first := &pgx.Batch{}
	first.Queue("BEGIN")
	if commit == db.Asynchronous {
		first.Queue(db.AsyncCommitSQL)
	}
	first.Queue(db.LockJournalSQL, db.JournalLockKey)
	var head Head
	sql, args := ab.HeadQuery()
	first.Queue(sql, args...).QueryRow(func(row pgx.Row) error { return row.Scan(&head.ID, &head.Hash) })
	if err := conn.SendBatch(ctx, first).Close(); err != nil {
		return nil, fmt.Errorf("audit: append: %w", err)
	}
	ab.Seal(head)
	second := &pgx.Batch{}
	sql, args = ab.InsertQuery()
	second.Queue(sql, args...)
	second.Queue("COMMIT")
	if err := conn.SendBatch(ctx, second).Close(); err != nil {
		return nil, fmt.Errorf("audit: append: %w", err)
	}
	last := ab.Last()
	a.head = &last
	return ab.Announcements(), nil
}
