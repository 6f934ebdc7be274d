// Package jobs is the one durable job queue of a Toolwarden process: a River client on
// the application's database. Services register their workers and periodic jobs on it
// before it opens; the composition root (package app) runs it. Periodic jobs are
// scheduled by River's elected leader, so on several replicas they run once, not once
// per replica.
package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

// Maintenance is the queue of housekeeping jobs (pruning): one worker, so they never
// take connections from the runs of executions.
const Maintenance = "maintenance"

// Queue collects workers, queues and periodic jobs, then runs them as one River client.
type Queue struct {
	pool     *pgxpool.Pool
	log      *slog.Logger
	workers  *river.Workers
	queues   map[string]river.QueueConfig
	periodic []*river.PeriodicJob
	onStop   []func()
	client   *river.Client[pgx.Tx]

	// Whether River works jobs here, and since when (New: since when it has not), for
	// /healthz; attempted closes once Run first tried to start it.
	mu            sync.Mutex
	started       bool
	since         time.Time
	attempted     chan struct{}
	attemptedOnce sync.Once
}

// New is an empty queue on pool.
func New(pool *pgxpool.Pool, log *slog.Logger) *Queue {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Queue{pool: pool, log: log, workers: river.NewWorkers(),
		queues:    map[string]river.QueueConfig{Maintenance: {MaxWorkers: 1}},
		since:     time.Now(),
		attempted: make(chan struct{})}
}

// Started reports whether the queue works jobs in this process, and since when it has
// (or has not).
func (q *Queue) Started() (bool, time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.started, q.since
}

// Attempted is closed once Run has tried to start the queue, whether or not it started
// (when it did, Started says so already).
func (q *Queue) Attempted() <-chan struct{} { return q.attempted }

// start starts River, trying again until it starts (true) or ctx ends (false, River
// stopped, err from stopping it). A failed Start leaves the client ready for another.
// The first few failures are logged, then the streak is quiet until it ends.
func (q *Queue) start(ctx context.Context) (bool, error) {
	const loud = 3
	wait := 200 * time.Millisecond
	for failures := 0; ; failures++ {
		ended, err := q.tryStart(ctx)
		if ended {
			return false, err
		}
		if err == nil {
			q.setStarted(true) // before attempted closes: who waits on it sees it started
			q.attemptedOnce.Do(func() { close(q.attempted) })
			if failures > 0 {
				q.log.Info("jobs: queue started", "failed_attempts", failures)
			}
			return true, nil
		}
		q.attemptedOnce.Do(func() { close(q.attempted) })
		if failures < loud {
			msg := "jobs: queue not started; retrying"
			if failures == loud-1 {
				msg = "jobs: queue not started; retrying quietly until it starts"
			}
			q.log.Warn(msg, "err", err, "retry_in", wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return false, nil
		case <-t.C:
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// tryStart is one River Start, given up when ctx ends first (ended true, River
// stopped, err from stopping it). Jobs inherit Start's context, and River cancels
// running jobs when it ends: Start is given one that does not end with ctx, so a stop
// lets the running jobs finish. But Start's first steps are round trips to the
// database bounded by that context alone: to an address that never answers (no
// connect_timeout), a stop waited minutes for TCP to give up.
func (q *Queue) tryStart(ctx context.Context) (ended bool, err error) {
	done := make(chan error, 1)
	go func() { done <- q.client.Start(context.WithoutCancel(ctx)) }()
	select {
	case err := <-done:
		return false, err
	case <-ctx.Done():
	}
	// River's Stop cancels a Start under way (which then returns nil) or stops River if
	// it started meanwhile; one called before Start began does nothing, so it is called
	// again until Start has returned, and once more after (it may have started since).
	// The BeforeStop functions run once, before the first.
	q.beforeStop()
	for {
		err = errors.Join(err, q.stopClient(ctx))
		select {
		case <-done:
			return true, errors.Join(err, q.stopClient(ctx))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (q *Queue) setStarted(on bool) {
	q.mu.Lock()
	q.started, q.since = on, time.Now()
	q.mu.Unlock()
}

// Register adds a worker for jobs of kind T. Call it before Open.
func Register[T river.JobArgs](q *Queue, w river.Worker[T]) error {
	if q.client != nil {
		return errors.New("jobs: register after open")
	}
	return river.AddWorkerSafely(q.workers, w)
}

// Queue declares a named queue worked by up to maxWorkers jobs at once in this process
// (the largest of several declarations wins).
func (q *Queue) Queue(name string, maxWorkers int) {
	if c, ok := q.queues[name]; !ok || c.MaxWorkers < maxWorkers {
		q.queues[name] = river.QueueConfig{MaxWorkers: maxWorkers}
	}
}

// Every schedules a job made by args every interval, the first on start.
func (q *Queue) Every(interval time.Duration, args func() (river.JobArgs, *river.InsertOpts)) {
	q.periodic = append(q.periodic, river.NewPeriodicJob(river.PeriodicInterval(interval), args, &river.PeriodicJobOpts{RunOnStart: true}))
}

// BeforeStop runs f when Run's context ends, before running jobs are waited for (so a
// long job can be told to start nothing further).
func (q *Queue) BeforeStop(f func()) { q.onStop = append(q.onStop, f) }

// Open builds the River client from what was registered.
func (q *Queue) Open() error {
	if q.client != nil {
		return nil
	}
	client, err := river.NewClient(riverpgxv5.New(q.pool), &river.Config{
		Logger:  q.log,
		Queues:  q.queues,
		Workers: q.workers,
		// A run job may take as long as its steps do; an execution's own lock, not
		// River's timeout, keeps two runners apart.
		JobTimeout:  -1,
		MaxAttempts: 3,
		// A job whose worker died is worked again after this (River's default is an
		// hour). River's rescuer leaves alone the jobs of no timeout (JobTimeout -1, so
		// execution runs): their rows stay marked running after a replica died, and the
		// executions sweep, not River, settles the execution and queues a new run.
		RescueStuckJobsAfter: 5 * time.Minute,
		PeriodicJobs:         q.periodic,
		FetchCooldown:        20 * time.Millisecond,
		// A job is fetched at once through the insert's NOTIFY, but River sends one
		// NOTIFY per queue and FetchCooldown: a second job inserted in that window and
		// committed after the first one's fetch waits for the poll. The default second
		// showed as approvals whose run began a second late (P9's p99 1 s); this bounds
		// that wait at a tenth of a second, for about ten cheap queries a second per
		// queue.
		FetchPollInterval: 100 * time.Millisecond,
	})
	if err != nil {
		return fmt.Errorf("jobs: open: %w", err)
	}
	q.client = client
	return nil
}

// InsertTx queues a job in tx: it runs once tx commits.
func (q *Queue) InsertTx(ctx context.Context, tx pgx.Tx, args river.JobArgs, opts *river.InsertOpts) error {
	if q.client == nil {
		return errors.New("jobs: insert before open")
	}
	_, err := q.client.InsertTx(ctx, tx, args, opts)
	return err
}

// Insert queues a job outside any transaction.
func (q *Queue) Insert(ctx context.Context, args river.JobArgs, opts *river.InsertOpts) error {
	if q.client == nil {
		return errors.New("jobs: insert before open")
	}
	_, err := q.client.Insert(ctx, args, opts)
	return err
}

// waitingStates are the states of a job that waits to be worked. A job marked running
// is left out: it may be a dead process's, which River rescues only much later.
const waitingStates = "'available', 'pending', 'scheduled', 'retryable'"

// Waiting is the set of values its args have under key among the jobs of kind that wait
// to be worked ("execution_id" of the execution runs waiting), and the set among those
// marked running (a live process's, or a dead one's).
func (q *Queue) Waiting(ctx context.Context, kind, key string) (waiting, running map[string]bool, err error) {
	waiting, since, err := q.WaitingSince(ctx, kind, key)
	if err != nil {
		return nil, nil, err
	}
	running = make(map[string]bool, len(since))
	for value := range since {
		running[value] = true
	}
	return waiting, running, nil
}

// WaitingSince is Waiting, with for each value among the jobs marked running how long
// ago the latest of them was picked up (its attempted_at, by the database's clock, which
// River sets it by): River never rescues a job of no timeout whose process died.
func (q *Queue) WaitingSince(ctx context.Context, kind, key string) (waiting map[string]bool, running map[string]time.Duration, err error) {
	rows, err := q.pool.Query(ctx, `/* jobs.waiting */ SELECT args->>$2, state = 'running',
		coalesce(extract(epoch FROM now() - max(attempted_at)), 0)::float8 FROM river_job
		WHERE kind = $1 AND state IN (`+waitingStates+`, 'running') AND args ? $2 GROUP BY 1, 2`, kind, key)
	if err != nil {
		return nil, nil, fmt.Errorf("jobs: waiting %s: %w", kind, err)
	}
	waiting, running = map[string]bool{}, map[string]time.Duration{}
	var value string
	var isRunning bool
	var ago float64
	_, err = pgx.ForEachRow(rows, []any{&value, &isRunning, &ago}, func() error {
		if isRunning {
			running[value] = time.Duration(ago * float64(time.Second))
		} else {
			waiting[value] = true
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("jobs: waiting %s: %w", kind, err)
	}
	return waiting, running, nil
}

// WaitingFor reports whether a job of kind whose args have value under key waits to be
// worked.
func (q *Queue) WaitingFor(ctx context.Context, kind, key, value string) (bool, error) {
	var ok bool
	err := q.pool.QueryRow(ctx, `/* jobs.waiting_for */ SELECT EXISTS (SELECT 1 FROM river_job
		WHERE kind = $1 AND args @> jsonb_build_object($2::text, $3::text) AND state IN (`+waitingStates+`))`,
		kind, key, value).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("jobs: is a %s job waiting: %w", kind, err)
	}
	return ok, nil
}

// DiscardDead marks discarded, in tx, the jobs of kind whose args have value under key
// and that were marked running more than olderThan ago: a dead replica's, which River
// never finalizes (a job of no timeout) and which would count as working it for good.
func DiscardDead(ctx context.Context, tx pgx.Tx, kind, key, value string, olderThan time.Duration) error {
	if _, err := tx.Exec(ctx, `/* jobs.discard_dead */ UPDATE river_job SET state = 'discarded', finalized_at = now()
		WHERE kind = $1 AND args @> jsonb_build_object($2::text, $3::text) AND state = 'running'
		AND attempted_at < now() - make_interval(secs => $4)`, kind, key, value, olderThan.Seconds()); err != nil {
		return fmt.Errorf("jobs: discard the dead %s jobs: %w", kind, err)
	}
	return nil
}

// Run works jobs until ctx ends, then lets running jobs finish for up to two minutes
// before cancelling them. While River cannot start (its first step is a round trip to
// the database) Run tries again, backing off from 200 ms to 5 s.
func (q *Queue) Run(ctx context.Context) error {
	// Whatever ends Run, those waiting for its first start attempt are let go.
	defer q.attemptedOnce.Do(func() { close(q.attempted) })
	if err := q.Open(); err != nil {
		return err
	}
	if started, err := q.start(ctx); !started {
		return err
	}
	defer q.setStarted(false)
	<-ctx.Done()
	return q.shutdown(ctx)
}

// shutdown stops River once ctx has ended: the BeforeStop functions run, then running
// jobs may finish for up to two minutes before they are cancelled.
func (q *Queue) shutdown(ctx context.Context) error {
	q.beforeStop()
	return q.stopClient(ctx)
}

func (q *Queue) beforeStop() {
	for _, f := range q.onStop {
		f()
	}
}

// stopClient stops River, letting running jobs finish for up to two minutes before
// cancelling them.
func (q *Queue) stopClient(ctx context.Context) error {
	stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	if err := q.client.Stop(stop); err != nil {
		// A job still runs after the grace period: cancel it.
		hard, cancelHard := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancelHard()
		return errors.Join(err, q.client.StopAndCancel(hard))
	}
	return nil
}
