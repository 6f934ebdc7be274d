package audit

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Log reads the audit log for the pages and the API that show it (browse.go), exports
// it (export.go), keeps people's saved views (views.go) and checks the chain on request
// (verify_runs.go).
type Log struct {
	pool *pgxpool.Pool

	mu sync.Mutex
	// run is the check started here that is running, or that ended without a record
	// (so the page can say why) until the next one starts; nil when none.
	run    *Verification
	runEnd *runEnd // tells who waits for run that it ended; the last begun, kept after
	runs   uint64  // how many checks began here (runEnd.seq)
	// checking is held by the check that reads the chain now: one at a time in this
	// process, whoever asked, so checks cannot take every connection of the pool.
	checking chan struct{}
	// checkpoints is where the newest checkpoint is (UseCheckpoints); nil: none configured.
	checkpoints *CheckpointSource
	// exports counts the exports running, in all and by person (export_limit.go).
	exportsMu sync.Mutex
	exports   exportCount
	wg        sync.WaitGroup
	// stop ends a background check when the process stops (Close).
	stop   context.Context
	cancel context.CancelFunc
}

// NewLog is a Log on pool.
func NewLog(pool *pgxpool.Pool) *Log {
	stop, cancel := context.WithCancel(context.Background())
	return &Log{pool: pool, stop: stop, cancel: cancel, checking: make(chan struct{}, 1)}
}

// UseCheckpoints makes every check of the chain from the pages and the API reach the
// newest checkpoint src names, as `toolwarden audit verify` does: without it a database
// superuser who deleted the end of the log, emptied it or rewrote it would see it pass.
// Call it before the Log is used.
func (l *Log) UseCheckpoints(src CheckpointSource) { l.checkpoints = &src }

// Close ends a background check of the chain and waits for it, so the process stops
// with nothing left reading a database that is about to close. The check is not
// recorded; the page's next Verify runs it again.
func (l *Log) Close() {
	l.cancel()
	l.wg.Wait()
}

// Recent returns the newest limit entries, newest first.
func (l *Log) Recent(ctx context.Context, limit int) ([]Record, error) {
	return Recent(ctx, l.pool, limit)
}
