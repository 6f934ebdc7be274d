package audit

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// An export is a snapshot of the log at its start: an entry that commits while it runs
// is in none of its batches. In time order one could sort into a later batch (an entry's
// time is taken before it waits for its place in the chain), here one timed before
// every other entry, committed after the first batch.
func TestExportIsASnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	late, err := NewBatch([]Entry{{Actor: System, Action: "test.late"}}) // its time taken now
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond)
	const n = exportFirstBatch + 50
	appendWords(t, pool, "early", n)
	l := NewLog(pool)
	t.Cleanup(l.Close)
	var ids []int64
	batches := 0
	f := Filter{From: time.Now().Add(-time.Hour)} // time order
	err = l.each(ctx, f, func(r Record) error { ids = append(ids, r.ID); return nil }, func() error {
		if batches++; batches > 1 {
			return nil
		}
		return db.WithTx(ctx, pool, func(tx pgx.Tx) error {
			if err := db.LockJournal(ctx, tx); err != nil {
				return err
			}
			var head Head
			sql, args := late.HeadQuery()
			if err := tx.QueryRow(ctx, sql, args...).Scan(&head.ID, &head.Hash); err != nil {
				return err
			}
			late.Seal(head)
			sql, args = late.InsertQuery()
			_, err := tx.Exec(ctx, sql, args...)
			return err
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if batches < 2 || len(ids) != n || slices.Contains(ids, n+1) {
		t.Fatalf("export in time order: %d batches, %d entries (entry %d among them: %v); want the %d there at its start",
			batches, len(ids), n+1, slices.Contains(ids, n+1), n)
	}
}

// Each statement of an export's batches stops after exportStatementTimeout, here one
// waiting for a lock that is never given up: the export fails saying so, long before
// its context would end it.
func TestExportStatementTimeout(t *testing.T) {
	// Not parallel: it lowers exportStatementTimeout.
	defer func(d time.Duration) { exportStatementTimeout = d }(exportStatementTimeout)
	exportStatementTimeout = 300 * time.Millisecond
	ctx := context.Background()
	pool := dbtest.New(t)
	appendWords(t, pool, "locked", 5)
	l := NewLog(pool)
	t.Cleanup(l.Close)
	locker, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Rollback(ctx) //nolint:errcheck
	if _, err := locker.Exec(ctx, `LOCK TABLE audit_log IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	long, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	start := time.Now()
	err = l.Each(long, Filter{}, func(Record) error { return nil })
	if err == nil || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "took longer than") || time.Since(start) > 10*time.Second {
		t.Fatalf("export behind a lock: %v after %s; want it stopped by the statement timeout", err, time.Since(start))
	}
}
