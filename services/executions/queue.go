package executions

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

// The phases a run job works on.
const (
	PhaseRun      = "run"
	PhaseRollback = "rollback"
)

// runArgs is the durable job that runs one phase of one execution.
type runArgs struct {
	ExecutionID string `json:"execution_id"`
	Phase       string `json:"phase"`
}

func (runArgs) Kind() string { return "execution.run" }

// expireArgs is the periodic job that expires plans nobody approved in time.
type expireArgs struct{}

func (expireArgs) Kind() string { return "execution.expire" }

// queue is the River client that runs executions (DESIGN §3).
type queue struct {
	client *river.Client[pgx.Tx]
}

func newQueue(s *Service) (*queue, error) {
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &runWorker{s: s}); err != nil {
		return nil, err
	}
	if err := river.AddWorkerSafely(workers, &expireWorker{s: s}); err != nil {
		return nil, err
	}
	client, err := river.NewClient(riverpgxv5.New(s.pool), &river.Config{
		Logger:  s.log,
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: s.opts.Workers}},
		Workers: workers,
		// A run job may take as long as its steps do; the execution's own lock, not
		// River's timeout, keeps two runners apart (see runWorker).
		JobTimeout:  -1,
		MaxAttempts: 3,
		// A job whose runner died is worked again after this (River's default is an
		// hour). Safe while the first runner still works: the second finds the
		// execution's lock held and leaves it alone.
		RescueStuckJobsAfter: 5 * time.Minute,
		PeriodicJobs: []*river.PeriodicJob{river.NewPeriodicJob(river.PeriodicInterval(time.Minute),
			func() (river.JobArgs, *river.InsertOpts) { return expireArgs{}, nil }, &river.PeriodicJobOpts{RunOnStart: true})},
		FetchCooldown: 20 * time.Millisecond,
	})
	if err != nil {
		return nil, fmt.Errorf("executions: queue: %w", err)
	}
	return &queue{client: client}, nil
}

// enqueue queues a phase of an execution in tx: it runs once tx commits.
func (q *queue) enqueue(ctx context.Context, tx pgx.Tx, id, phase string) error {
	if _, err := q.client.InsertTx(ctx, tx, runArgs{ExecutionID: id, Phase: phase}, nil); err != nil {
		return fmt.Errorf("executions: queue %s of %s: %w", phase, id, err)
	}
	return nil
}

type runWorker struct {
	river.WorkerDefaults[runArgs]
	s *Service
}

func (w *runWorker) Work(ctx context.Context, job *river.Job[runArgs]) error {
	err := w.s.runPhase(ctx, job.Args.ExecutionID, job.Args.Phase)
	if errors.Is(err, errBusy) {
		return river.JobSnooze(busyRetry)
	}
	return err
}

// busyRetry is how soon a job whose execution another runner holds looks again.
const busyRetry = 5 * time.Second

type expireWorker struct {
	river.WorkerDefaults[expireArgs]
	s *Service
}

func (w *expireWorker) Work(ctx context.Context, _ *river.Job[expireArgs]) error {
	_, err := w.s.ExpireDue(ctx)
	return err
}

// Run starts the runner: first it settles executions a previous process left in the
// middle (recover), then it works queued jobs until ctx ends, finishing the steps
// that are running (each ends within its tool's timeout) without starting further
// ones: those are queued again for the next runner. Stop the router after Run returns.
func (s *Service) Run(ctx context.Context) error {
	s.stopping.Store(false)
	if err := s.recover(ctx); err != nil {
		s.log.Error("executions: recovery after restart failed; the runner retries it with each job", "err", err)
	}
	// Jobs inherit Start's context, and River cancels running jobs when it ends: give
	// it one that does not end with ctx, so a stop lets the running steps finish.
	if err := s.queue.client.Start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("executions: start runner: %w", err)
	}
	<-ctx.Done()
	s.stopping.Store(true)
	stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	if err := s.queue.client.Stop(stop); err != nil {
		// A step still runs after the grace period: cancel it (the step fails).
		hard, cancelHard := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancelHard()
		return errors.Join(err, s.queue.client.StopAndCancel(hard))
	}
	return nil
}
