package router

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/usage"
)

// job is what one call has to write at one moment.
type job struct {
	audits []audit.Entry
	drafts []events.Draft
	usage  []usage.Entry
	touch  []string // tool ids whose last_used moves to at
	at     time.Time
	done   chan error // nil: nobody waits (the write after a call)
}

// recorder writes jobs with group commit: one writer takes every job queued while the
// previous transaction was committing and writes them in one transaction, so callers
// do not serialize on the journal lock and a burst of N calls costs about one commit.
// A caller that must not go on before its row is durable (the audit row before a call
// runs, DESIGN §8) waits for its job; the rest is written behind the caller's back.
type recorder struct {
	pool     *pgxpool.Pool
	log      *slog.Logger
	jobs     chan *job
	maxBatch int
	stopped  chan struct{}
}

var errStopped = errors.New("router: not running")

func newRecorder(pool *pgxpool.Pool, log *slog.Logger, maxBatch int) *recorder {
	return &recorder{pool: pool, log: log, jobs: make(chan *job, 8192), maxBatch: maxBatch, stopped: make(chan struct{})}
}

// submit queues j; with wait it returns once j is committed (or failed).
func (w *recorder) submit(ctx context.Context, j *job, wait bool) error {
	if wait {
		j.done = make(chan error, 1)
	}
	select {
	case w.jobs <- j:
	case <-w.stopped:
		return errStopped
	case <-ctx.Done():
		return ctx.Err()
	}
	if !wait {
		return nil
	}
	select {
	case err := <-j.done:
		return err
	case <-w.stopped:
		return errStopped
	}
}

// run writes until ctx ends, then writes what is still queued and returns.
func (w *recorder) run(ctx context.Context) {
	defer close(w.stopped)
	for {
		var first *job
		select {
		case first = <-w.jobs:
		case <-ctx.Done():
			w.drain()
			return
		}
		w.writeBatch(w.collect(first))
	}
}

func (w *recorder) collect(first *job) []*job {
	batch := []*job{first}
	for len(batch) < w.maxBatch {
		select {
		case j := <-w.jobs:
			batch = append(batch, j)
		default:
			return batch
		}
	}
	return batch
}

func (w *recorder) drain() {
	for {
		select {
		case j := <-w.jobs:
			w.writeBatch(w.collect(j))
		default:
			return
		}
	}
}

// writeBatch commits the jobs together; when that fails, each alone, so one bad row
// costs only its own call.
func (w *recorder) writeBatch(batch []*job) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := w.write(ctx, batch)
	if err != nil && len(batch) > 1 {
		for _, j := range batch {
			j.finish(w.write(ctx, []*job{j}), w.log)
		}
		return
	}
	for _, j := range batch {
		j.finish(err, w.log)
	}
}

func (j *job) finish(err error, log *slog.Logger) {
	if j.done != nil {
		j.done <- err
		return
	}
	if err != nil {
		log.Error("router: could not record a finished call", "err", err)
	}
}

func (w *recorder) write(ctx context.Context, batch []*job) error {
	var audits []audit.Entry
	var drafts []events.Draft
	var logs []usage.Entry
	touch := map[time.Time][]string{}
	for _, j := range batch {
		audits = append(audits, j.audits...)
		drafts = append(drafts, j.drafts...)
		logs = append(logs, j.usage...)
		for _, id := range j.touch {
			at := j.at.Truncate(time.Second)
			if !slices.Contains(touch[at], id) {
				touch[at] = append(touch[at], id)
			}
		}
	}
	if len(audits)+len(drafts)+len(logs)+len(touch) == 0 {
		return nil // a flush marker
	}
	return db.WithTx(ctx, w.pool, func(tx pgx.Tx) error {
		if err := usage.Insert(ctx, tx, logs); err != nil {
			return err
		}
		for at, ids := range touch {
			if err := tools.Touch(ctx, tx, ids, at); err != nil {
				return err
			}
		}
		// The journal lock is taken last, so it is held only for the appends.
		if _, err := audit.AppendBatch(ctx, tx, audits); err != nil {
			return err
		}
		return events.PublishBatch(ctx, tx, drafts)
	})
}
