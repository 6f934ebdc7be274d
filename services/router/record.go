package router

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
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
	flush  bool       // write everything gathered before this job
	// commit is how the job's transaction may commit: db.Asynchronous for a LOW call's
	// records, db.Synchronous (the zero value) for everything else. A transaction of
	// several jobs commits synchronously if any of them must.
	commit db.Commit
}

// recorder writes jobs with group commit. Jobs a caller waits for (the audit row that
// must be committed before a call runs, docs/security.md) go first: every such job queued while
// the previous transaction committed is written in the next one, so a burst of N calls
// costs about one commit and callers do not serialize on the journal lock. What is
// written behind the callers' backs (usage rows, events, completion records) is
// gathered for up to flushEvery and written in one transaction by a second writer
// (runLater), so those writes never hold up a waiting caller. A transaction whose jobs
// are all LOW calls' commits asynchronously (job.commit): it neither waits for the
// disk nor holds the journal lock while the disk flushes.
type recorder struct {
	pool       *pgxpool.Pool
	begin      db.TxBeginner // pool, or its Local
	bus        *events.Bus   // nil: events reach subscribers by NOTIFY only
	log        *slog.Logger
	urgent     chan *job
	later      chan *job
	maxBatch   int
	flushEvery time.Duration
	stopped    chan struct{}
	// gate is held for reading while a job is queued; run takes it to set closed, so a
	// job is either queued before the writers' last drain or refused (errStopped).
	gate   sync.RWMutex
	closed bool
	// deferred are jobs an urgent write left to the gathered writes (run's goroutine only).
	deferred []*job
	// chain remembers the audit chain head the urgent writes wrote last (run's goroutine
	// only). While nobody else appends, it saves the waiting callers' append a round trip.
	chain audit.Appender
}

var errStopped = errors.New("router: not running")

func newRecorder(pool *pgxpool.Pool, begin db.TxBeginner, bus *events.Bus, log *slog.Logger, maxBatch int) *recorder {
	return &recorder{pool: pool, begin: begin, bus: bus, log: log, urgent: make(chan *job, 4096), later: make(chan *job, 16384),
		maxBatch: maxBatch, flushEvery: 20 * time.Millisecond, stopped: make(chan struct{})}
}

// offer queues j if there is room now, and drops it otherwise: for what may be lost
// under load (a progress notification), so a server that floods them cannot block the
// call that reads them.
func (w *recorder) offer(j *job) bool {
	w.gate.RLock()
	defer w.gate.RUnlock()
	if w.closed {
		return false
	}
	select {
	case w.later <- j:
		return true
	default:
		return false
	}
}

// submit queues j; with wait it returns once j is committed (or failed).
func (w *recorder) submit(ctx context.Context, j *job, wait bool) error {
	q := w.later
	if wait {
		j.done = make(chan error, 1)
		q = w.urgent
	}
	w.gate.RLock()
	if w.closed {
		w.gate.RUnlock()
		return errStopped
	}
	select {
	case q <- j:
		w.gate.RUnlock()
	case <-ctx.Done():
		w.gate.RUnlock()
		return ctx.Err()
	}
	if !wait {
		return nil
	}
	select {
	case err := <-j.done:
		return err
	case <-w.stopped:
		select {
		case err := <-j.done: // written as the writer stopped
			return err
		default:
			return errStopped
		}
	}
}

// flush is a job that makes the writer write everything gathered so far first.
func (w *recorder) flush(ctx context.Context) error {
	return w.submit(ctx, &job{flush: true}, true)
}

// run writes until ctx ends, then writes what is still queued and returns. Waiting
// callers' audit rows are written here, and everything else by runLater, on a
// connection of its own: a caller never waits behind a gathered write, and the two
// meet only on the journal lock, which a gathered write takes last.
func (w *recorder) run(ctx context.Context) {
	defer close(w.stopped)
	stop, laterDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(laterDone)
		w.runLater(stop)
	}()
	for {
		select {
		case j := <-w.urgent:
			w.writeUrgent(j)
		case <-ctx.Done():
			// Submitters already past the gate may be waiting for room in a queue: keep
			// writing until the gate is closed, then write what the queues hold.
			closed := make(chan struct{})
			go func() {
				w.gate.Lock()
				w.closed = true
				w.gate.Unlock()
				close(closed)
			}()
			for open := true; open; {
				select {
				case j := <-w.urgent:
					w.writeUrgent(j)
				case <-closed:
					open = false
				}
			}
			// The gate is closed: nothing is queued any more.
			for len(w.urgent) > 0 {
				w.writeUrgent(<-w.urgent)
			}
			close(stop)
			<-laterDone
			return
		}
	}
}

// runLater writes the gathered jobs: up to flushEvery after the first, or at once when
// maxBatch are waiting or a flush asks. When stop closes it writes what is queued and
// returns.
func (w *recorder) runLater(stop <-chan struct{}) {
	var pending []*job
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	armed, flush := false, false
	// writePending writes everything gathered, then tells each flush among it the first
	// error of those writes (each failed job was also logged).
	writePending := func() {
		var flushes []*job
		var first error
		for len(pending) > 0 {
			n := min(len(pending), w.maxBatch)
			var jobs []*job
			for _, j := range pending[:n] {
				if j.flush {
					flushes = append(flushes, j)
				} else {
					jobs = append(jobs, j)
				}
			}
			if err := w.writeBatch(jobs, false); err != nil && first == nil {
				first = err
			}
			pending = pending[n:]
		}
		for _, f := range flushes {
			f.finish(first, w.log)
		}
		pending, flush = nil, false
	}
	for {
		select {
		case j := <-w.later:
			pending = append(pending, j)
			pending = w.drainInto(w.later, pending, 4*w.maxBatch)
			for _, j := range pending {
				flush = flush || j.flush
			}
			if flush || len(pending) >= w.maxBatch {
				writePending()
			} else if !armed {
				timer.Reset(w.flushEvery)
				armed = true
			}
		case <-timer.C:
			armed = false
			writePending()
		case <-stop:
			pending = w.drainInto(w.later, pending, 1<<30)
			writePending()
			return
		}
	}
}

// writeUrgent writes the waiting callers' audit rows of first and of the waiting jobs
// queued behind it in one transaction. The rest of those jobs (their events, and the
// chain's announcements) and any flush go to runLater before the callers are told, so a
// call's later records always follow them there.
func (w *recorder) writeUrgent(first *job) {
	var jobs, flushes []*job
	for _, j := range w.drainInto(w.urgent, []*job{first}, w.maxBatch) {
		if j.flush {
			flushes = append(flushes, j)
		} else {
			jobs = append(jobs, j)
		}
	}
	if len(jobs) > 0 {
		w.writeBatch(jobs, true)
	}
	for _, f := range flushes {
		w.later <- f
	}
}

// drainInto appends to batch what q holds now, up to limit jobs in all.
func (w *recorder) drainInto(q chan *job, batch []*job, limit int) []*job {
	for len(batch) < limit {
		select {
		case j := <-q:
			batch = append(batch, j)
		default:
			return batch
		}
	}
	return batch
}

// writeBatch commits the jobs together; when that fails, each alone, so one bad row
// costs only its own call.
func (w *recorder) writeBatch(batch []*job, urgent bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := w.write(ctx, batch, urgent)
	if err != nil && len(batch) > 1 {
		var first error
		for _, j := range batch {
			err := w.write(ctx, []*job{j}, urgent)
			if err != nil && usage.MissingTool(err) {
				err = w.withoutUsage(ctx, j, urgent)
			}
			if err != nil && first == nil {
				first = err
			}
			w.handOff(urgent)
			j.finish(err, w.log)
		}
		return first
	}
	if err != nil && len(batch) == 1 && usage.MissingTool(err) {
		err = w.withoutUsage(ctx, batch[0], urgent)
	}
	w.handOff(urgent)
	for _, j := range batch {
		j.finish(err, w.log)
	}
	return err
}

// withoutUsage writes j without its usage rows, which name a tool deleted meanwhile
// (its server was deleted during the call): they can never be written, and the call's
// audit rows and events must not be lost with them. The normal case keeps its one COPY.
func (w *recorder) withoutUsage(ctx context.Context, j *job, urgent bool) error {
	for _, u := range j.usage {
		w.log.Warn("router: a call's usage row was not written: its tool was deleted during the call",
			"tool_id", u.ToolID, "metadata", string(u.Metadata))
	}
	rest := *j
	rest.usage = nil
	return w.write(ctx, []*job{&rest}, urgent)
}

// handOff queues for runLater what an urgent write left to it.
func (w *recorder) handOff(urgent bool) {
	if !urgent {
		return
	}
	for _, d := range w.deferred {
		w.later <- d
	}
	w.deferred = nil
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

// commitOf is how a transaction of batch commits: asynchronously only when every job
// in it may (flush markers write nothing and do not count).
func commitOf(batch []*job) db.Commit {
	for _, j := range batch {
		if j.commit == db.Synchronous && !j.flush {
			return db.Synchronous
		}
	}
	return db.Asynchronous
}

// write commits batch. Waiting callers' audit rows go alone (audit.Appender.Append),
// their events deferred to the next gathered write.
func (w *recorder) write(ctx context.Context, batch []*job, urgent bool) error {
	var audits []audit.Entry
	var drafts []events.Draft
	var logs []usage.Entry
	touch := map[time.Time][]string{}
	commit := commitOf(batch)
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
	if urgent {
		// Only the audit rows are written for the waiting callers. The rest follows in
		// a gathered write (runLater), so NOTIFY and the work every replica's bus does
		// for it stay off their path, and events are published by one writer only.
		announce, err := w.chain.Append(ctx, w.pool, audits, commit)
		if err == nil && len(drafts)+len(announce)+len(logs)+len(touch) > 0 {
			var rest []*job
			for _, j := range batch {
				if len(j.usage)+len(j.touch) > 0 {
					rest = append(rest, &job{usage: j.usage, touch: j.touch, at: j.at, commit: commit})
				}
			}
			w.deferred = append(w.deferred, append(rest, &job{drafts: append(drafts, announce...), commit: commit})...)
		}
		return err
	}
	// The gathered writes leave the chain head the urgent writes remember alone: when
	// one appends, the next urgent append finds the head moved and reads it.
	var published *events.Published
	err := db.WithTx(ctx, w.begin, func(tx pgx.Tx) error {
		if err := db.SetCommit(ctx, tx, commit); err != nil {
			return err
		}
		if err := usage.Insert(ctx, tx, logs); err != nil {
			return err
		}
		for at, ids := range touch {
			if err := tools.Touch(ctx, tx, ids, at); err != nil {
				return err
			}
		}
		// The journal lock is taken last, so it is held only for the appends. The
		// entries' announcements go out with the other events, in one publication.
		_, announce, err := audit.AppendBatchQuiet(ctx, tx, audits)
		if err != nil {
			return err
		}
		drafts = append(drafts, announce...)
		if w.bus == nil {
			_, err := events.PublishBatch(ctx, tx, drafts)
			return err
		}
		// This replica's subscribers get them from memory (Deliver below); the
		// NOTIFY is for the others.
		published, err = w.bus.PublishBatch(ctx, tx, drafts)
		return err
	})
	published.Deliver(err)
	return err
}
