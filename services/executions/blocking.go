package executions

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// blockingPoll is how often a step that waits for a person (router.Blocking) looks
// whether its execution still runs: the cancel may be handled on another replica.
const blockingPoll = 2 * time.Second

// errLeftPhase is the cause of a blocking step's context ending because its execution
// left the status its phase runs in (it was cancelled, or settled elsewhere).
type errLeftPhase struct{ status Status }

func (e *errLeftPhase) Error() string {
	if e.status == RollbackFailed {
		// A rollback leaves rolling_back under a running step only when cancelled (a
		// settle elsewhere interrupts the step first, and this is never recorded).
		return "the rollback was cancelled"
	}
	return fmt.Sprintf("the execution was %s", e.status)
}

// whileRunning returns ctx, cancelled (with an *errLeftPhase cause) once execution id
// is no longer in status want; stop ends the watch. A blocking step otherwise holds a
// worker, and its question stays open, for up to a day after a cancel.
func (s *Service) whileRunning(ctx context.Context, id string, want Status) (context.Context, func()) {
	cctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(blockingPoll)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-cctx.Done():
				return
			case <-t.C:
			}
			var st Status
			err := s.pool.QueryRow(cctx, `/* executions.blocking.status */ SELECT status FROM executions WHERE id = $1`, id).Scan(&st)
			switch {
			case err == nil && st != want:
				cancel(&errLeftPhase{status: st})
				return
			case err != nil && cctx.Err() == nil:
				// The database is away: the step goes on, and this looks again.
				s.log.Warn("executions: look whether a waiting step's execution still runs", "execution", id, "err", err)
			}
		}
	}()
	return cctx, func() { close(done); cancel(nil) }
}

// leftPhase reports whether ctx ended because its execution left its phase's status.
func leftPhase(ctx context.Context) bool {
	var lp *errLeftPhase
	return errors.As(context.Cause(ctx), &lp)
}

// maxBlockingSteps is how many steps of one person's plans may wait for an answer at
// once (each holds a worker, of Options.Workers); another waits, pending, for one of
// them to end, and is looked at again every blockingRetry.
const (
	maxBlockingSteps = 2
	blockingRetry    = 5 * time.Second
)

// blockingRoom is how many of this process's workers steps waiting for an answer may
// hold at once, whoever asked: half, so that however many people's plans wait, the other
// half still runs everyone's steps (the per-person limit alone let four people hold the
// eight default workers).
func (s *Service) blockingRoom() int32 { return int32(max(1, s.opts.Workers/2)) }

// blockingOverLimit reports whether step st, about to be marked running in tx, would
// make more than maxBlockingSteps blocking steps of its requester's plans run. It takes,
// until tx ends, the lock of the requester's steps of that tool: steps starting at once
// are counted one after the other, so none runs past the limit and none gives way for
// nothing.
func blockingOverLimit(ctx context.Context, tx pgx.Tx, ex *Execution, st Step) (bool, error) {
	if ex.RequestedBy == nil {
		return false, nil
	}
	if _, err := tx.Exec(ctx, `/* executions.blocking.lock */ SELECT pg_advisory_xact_lock(hashtextextended('executions.blocking:' || $1 || ':' || $2, 0))`,
		*ex.RequestedBy, st.Tool); err != nil {
		return false, fmt.Errorf("executions: lock the requester's waiting steps: %w", err)
	}
	var n int
	if err := tx.QueryRow(ctx, `/* executions.blocking.count */ SELECT count(*) FROM tool_calls c
		JOIN executions e ON e.id = c.execution_id
		WHERE c.status = 'running' AND c.tool_name = $2 AND e.requested_by = $1`, *ex.RequestedBy, st.Tool).Scan(&n); err != nil {
		return false, fmt.Errorf("executions: count the requester's waiting steps: %w", err)
	}
	return n >= maxBlockingSteps, nil
}
