package executions

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/jobs"
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

// InsertOpts puts the expiry on the maintenance queue, one pending at a time: on the
// executions' queue it waited behind steps that hold every worker for an hour (plans
// past their time stayed awaiting approval, counting against the waiting limit), and a
// new one was queued each minute meanwhile.
func (expireArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: jobs.Maintenance, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning, rivertype.JobStateRetryable, rivertype.JobStateScheduled}}}
}

// register puts the execution jobs on q: runs on the default queue (where jobs queued
// by earlier versions wait), and the expiry every minute.
func (s *Service) register(q *jobs.Queue) error {
	if err := jobs.Register(q, &runWorker{s: s}); err != nil {
		return err
	}
	if err := jobs.Register(q, &expireWorker{s: s}); err != nil {
		return err
	}
	q.Queue(river.QueueDefault, s.opts.Workers)
	q.Every(time.Minute, func() (river.JobArgs, *river.InsertOpts) { return expireArgs{}, nil })
	q.BeforeStop(func() { s.stopping.Store(true) })
	return nil
}

// enqueue queues a phase of an execution in tx: it runs once tx commits.
func (s *Service) enqueue(ctx context.Context, tx pgx.Tx, id, phase string) error {
	if err := s.jobs.InsertTx(ctx, tx, runArgs{ExecutionID: id, Phase: phase}, nil); err != nil {
		return fmt.Errorf("executions: queue %s of %s: %w", phase, id, err)
	}
	return nil
}

// queuePhase queues a phase of execution id in tx and forgets its runner: the replica
// that picks the job up records itself, and until then the sweep judges the pickup by
// pickupGrace, not by an earlier runner that is alive but no longer works it.
func (s *Service) queuePhase(ctx context.Context, tx pgx.Tx, id, phase string) error {
	if err := clearRunner(ctx, tx, id, ""); err != nil {
		return err
	}
	return s.enqueue(ctx, tx, id, phase)
}

type runWorker struct {
	river.WorkerDefaults[runArgs]
	s *Service
}

func (w *runWorker) Work(ctx context.Context, job *river.Job[runArgs]) error {
	err := w.runPhase(ctx, job)
	if errors.Is(err, errBusy) {
		return river.JobSnooze(busyRetry)
	}
	if rl := (*rateLimited)(nil); errors.As(err, &rl) {
		// The same job runs the rest later, starting with the step that waited; the
		// execution goes on executing meanwhile.
		return river.JobSnooze(rl.wait)
	}
	if errors.Is(err, errSettledElsewhere) {
		w.s.log.Warn("executions: a step this runner ran was settled as interrupted meanwhile; its result is not recorded",
			"execution", job.Args.ExecutionID)
		return nil
	}
	if err != nil {
		// River retries the job, maybe on another replica: this one, alive, must not
		// stay recorded as the runner, or a sweep would leave to it a retry whose picker
		// died (see queuePhase).
		w.s.forgetRunner(ctx, job.Args.ExecutionID)
	}
	if err != nil && job.Attempt >= job.MaxAttempts && ctx.Err() == nil {
		// River discards the job now: nothing would run the execution again while this
		// replica lives (a sweep leaves a live runner's executions to it).
		if gerr := w.s.giveUp(ctx, job.Args.ExecutionID, job.Args.Phase, err); gerr != nil {
			w.s.log.Error("executions: could not fail an execution its runner gave up on", "execution", job.Args.ExecutionID, "err", gerr)
		}
	}
	return err
}

// runPhase is Service.runPhase with a panic made the attempt's error (its stack
// logged): River would turn it into a failed attempt too, but past Work's give-up path,
// so on the last attempt the execution stayed executing with this live replica as its
// runner, which no sweep takes over, until the replica restarted.
func (w *runWorker) runPhase(ctx context.Context, job *river.Job[runArgs]) (err error) {
	defer func() {
		if p := recover(); p != nil {
			w.s.log.Error("executions: running a phase panicked", "execution", job.Args.ExecutionID, "phase", job.Args.Phase,
				"attempt", job.Attempt, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			// What it panicked with is for the log: the error is shown on the execution.
			err = fmt.Errorf("executions: the %s phase failed unexpectedly (a panic; the server's log has the details)", job.Args.Phase)
		}
	}()
	return w.s.runPhase(ctx, job.Args.ExecutionID, job.Args.Phase)
}

// forgetRunner clears the runner of execution id if it is this replica (a failed
// attempt's); a failure to is logged.
func (s *Service) forgetRunner(ctx context.Context, id string) {
	if s.opts.RunnerID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := clearRunner(ctx, s.pool, id, s.opts.RunnerID); err != nil {
		s.log.Warn("executions: could not forget this replica as the runner of an execution whose job is retried; a sweep leaves it to this replica while it lives",
			"execution", id, "err", err)
	}
}

// clearRunner forgets the runner recorded on execution id, in q; with onlyIf given,
// only when that is the runner recorded. updated_at says when: a sweep leaves a job
// still marked running alone for pickupGrace after its runner let it go (settleOrphans).
func clearRunner(ctx context.Context, q db.Querier, id, onlyIf string) error {
	var err error
	if onlyIf == "" {
		_, err = q.Exec(ctx, `/* executions.runner.forget */ UPDATE executions SET runner_id = NULL, updated_at = now() WHERE id = $1`, id)
	} else {
		_, err = q.Exec(ctx, `/* executions.runner.forget_own */ UPDATE executions SET runner_id = NULL, updated_at = now()
			WHERE id = $1 AND runner_id = $2::uuid`, id, onlyIf)
	}
	if err != nil {
		return fmt.Errorf("executions: forget the runner of %s: %w", id, err)
	}
	return nil
}

// giveUp ends an execution whose phase failed to run as many times as its job may try:
// a step found running is interrupted, and the execution fails (or its rollback does)
// saying why.
func (s *Service) giveUp(ctx context.Context, id, phase string, cause error) error {
	return s.settleLocked(ctx, id, func(ex *Execution) error {
		return s.finish(context.WithoutCancel(ctx), ex, phase, "Toolwarden could not run it: "+cause.Error())
	})
}

// busyRetry is how soon a job whose execution another runner holds looks again.
const busyRetry = 5 * time.Second

type expireWorker struct {
	river.WorkerDefaults[expireArgs]
	s *Service
}

// Timeout bounds the expiry (the executions' queue has none): a job left running by a
// replica that died is taken up again.
func (w *expireWorker) Timeout(*river.Job[expireArgs]) time.Duration { return time.Minute }

func (w *expireWorker) Work(ctx context.Context, _ *river.Job[expireArgs]) error {
	_, err := w.s.ExpireDue(ctx)
	return err
}

// Recover settles executions a previous process left in the middle. Call it before
// the job queue starts working.
func (s *Service) Recover(ctx context.Context) {
	s.stopping.Store(false)
	if err := s.recover(ctx); err != nil {
		s.log.Error("executions: recovery after restart failed; the runner retries it with each job", "err", err)
	}
}

// Watch settles, every SweepEvery until ctx ends, the executions whose runner died
// while this process runs: another replica killed in the middle of a step leaves the
// step running and its lock free; the step ends interrupted and the execution failed
// within seconds, as Recover does after a restart (docs/architecture.md, Several replicas).
func (s *Service) Watch(ctx context.Context) error {
	t := time.NewTicker(s.opts.SweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if s.stopping.Load() || s.opts.Steady != nil && !s.opts.Steady() {
				continue
			}
			if err := s.settleOrphans(ctx, true); err != nil && ctx.Err() == nil {
				s.log.Warn("executions: sweep for executions whose runner died", "err", err)
			}
		}
	}
}

// jobWaiting reports whether a run job of execution id waits to be worked (a job
// marked running may be a dead replica's, which River rescues only much later).
func (s *Service) jobWaiting(ctx context.Context, id string) (bool, error) {
	return s.jobs.WaitingFor(ctx, runArgs{}.Kind(), "execution_id", id)
}

// Run is the runner of a service on a queue of its own (Options.Jobs nil): it recovers,
// then works queued jobs until ctx ends, finishing the steps that are running (each
// ends within its tool's timeout) without starting further ones: those are queued
// again for the next runner. Stop the router after Run returns. A service on a shared
// queue is run by whoever runs that queue, after Recover.
func (s *Service) Run(ctx context.Context) error {
	if !s.ownJobs {
		return errors.New("executions: Run on a shared job queue; run the queue after Recover")
	}
	s.Recover(ctx)
	return s.jobs.Run(ctx)
}
