package executions

import (
	"context"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// Get reads one execution (tests only: the service has no public reader yet).
func Get(ctx context.Context, s *Service, id string) (*Execution, error) {
	return s.get(ctx, s.pool, id)
}

// WorkRun works a run job of execution id as River would at attempt of max (tests only).
func WorkRun(ctx context.Context, s *Service, id string, attempt, max int) error {
	w := &runWorker{s: s}
	return w.Work(ctx, &river.Job[runArgs]{JobRow: &rivertype.JobRow{Attempt: attempt, MaxAttempts: max},
		Args: runArgs{ExecutionID: id, Phase: PhaseRun}})
}

// WorkRollback works a rollback job of execution id as River would at attempt of max
// (tests only).
func WorkRollback(ctx context.Context, s *Service, id string, attempt, max int) error {
	w := &runWorker{s: s}
	return w.Work(ctx, &river.Job[runArgs]{JobRow: &rivertype.JobRow{Attempt: attempt, MaxAttempts: max},
		Args: runArgs{ExecutionID: id, Phase: PhaseRollback}})
}
