package executions

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/internal/textcheck"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/grants"
	"github.com/toolwarden/toolwarden/services/jobs"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/usage"
)

// errBusy: another runner holds the execution's lock. Its job waits and looks again:
// the holder may be a runner that just queued it (recovery) or one whose connection
// PostgreSQL has not yet noticed is dead; when the holder finishes the execution, the
// job finds nothing left to do.
var errBusy = errors.New("executions: another runner holds this execution")

// errSettledElsewhere: the step this runner ran was settled by another (marked
// interrupted while its lock's connection was gone); the runner stops, its job done.
var errSettledElsewhere = errors.New("executions: the step was settled by another runner")

// errTakenOver: the step this runner was about to start is no longer its to start,
// though the execution still runs: another runner took the execution over (it was
// settled or queued again while this one's lock's connection was gone, a frozen host
// say). The runner stops before the step, its job done, and leaves the rest to that one.
var errTakenOver = errors.New("executions: another runner took the execution over")

// lockExecution takes execution id's runner lock on a connection of its own, held
// until release. Whoever holds it is the one runner of that execution; the lock dies
// with its connection, so a crashed runner's steps can be recognised as interrupted
// (docs/architecture.md, State machines). ok is false when another live runner holds it.
func (s *Service) lockExecution(ctx context.Context, id string) (release func(), ok bool, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("executions: lock: %w", err)
	}
	if err := conn.QueryRow(ctx, `/* executions.lock */ SELECT pg_try_advisory_lock(hashtextextended($1, 7))`, id).Scan(&ok); err != nil || !ok {
		conn.Release()
		if err != nil {
			return nil, false, fmt.Errorf("executions: lock: %w", err)
		}
		return nil, false, nil
	}
	// This process holds it, whatever becomes of the connection: a sweep here never
	// takes a lock a database restart dropped under a runner that goes on.
	s.held.Store(id, struct{}{})
	return func() { s.held.Delete(id); unlock(conn, id) }, true, nil
}

func unlock(conn *pgxpool.Conn, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock(hashtextextended($1, 7))`, id); err != nil {
		_ = conn.Conn().Close(ctx) // the lock goes with the connection
	}
	conn.Release()
}

// pickupGrace is how long after River picks up a run job its runner may take to record
// itself on the execution (runner_id, forgotten whenever a phase is queued: queuePhase);
// a sweep takes one that has not by then as dropped by a replica that died.
const pickupGrace = time.Minute

// recover settles executions a stopped process left mid-way: a step found running
// was interrupted, so its execution fails (or its rollback fails) and nothing runs it
// again; one between steps continues with its next step.
func (s *Service) recover(ctx context.Context) error {
	return s.settleOrphans(ctx, false)
}

// settleOrphans settles every unfinished execution no live runner holds, and queues
// one left between steps to go on (unless a job for it waits already). At start (sweep
// false) every unfinished execution is looked at; in a sweep (Watch) only those that
// may be orphaned. At start, only those no runner took or this process's; in a sweep,
// never one whose runner is this process or a replica seen alive: a runner whose lock's
// connection broke (a database restart) goes on, and must not be declared dead. An
// execution that cannot be settled is logged and the rest still are.
func (s *Service) settleOrphans(ctx context.Context, sweep bool) error {
	// Two arms, each an index's: the unfinished executions, and the cancelled ones (or
	// whose rollback was cancelled, rollback_failed) with a step still running (from the
	// running steps, tool_calls_running_idx, not from every execution ever cancelled).
	rows, err := s.pool.Query(ctx, `/* executions.unfinished */ SELECT id, runner, step_running, quiet FROM (
		SELECT e.id, coalesce(e.runner_id::text, '') AS runner, e.created_at,
			EXISTS (SELECT 1 FROM tool_calls c WHERE c.execution_id = e.id AND c.status = 'running') AS step_running,
			extract(epoch FROM now() - e.updated_at)::float8 AS quiet
		FROM executions e WHERE e.status IN ('executing', 'rolling_back')
		UNION
		SELECT e.id, coalesce(e.runner_id::text, ''), e.created_at, true, extract(epoch FROM now() - e.updated_at)::float8
		FROM (SELECT DISTINCT execution_id FROM tool_calls WHERE status = 'running') r
		JOIN executions e ON e.id = r.execution_id WHERE e.status IN ('cancelled', 'rollback_failed')
		) u ORDER BY created_at`)
	if err != nil {
		return fmt.Errorf("executions: unfinished: %w", err)
	}
	type orphan struct {
		id, runner  string
		stepRunning bool
		quiet       time.Duration // since the row last changed (updated_at): the runner forgotten, say
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (orphan, error) {
		var o orphan
		var quiet float64
		err := r.Scan(&o.id, &o.runner, &o.stepRunning, &quiet)
		o.quiet = time.Duration(quiet * float64(time.Second))
		return o, err
	})
	if err != nil {
		return fmt.Errorf("executions: unfinished: %w", err)
	}
	var waiting map[string]bool
	var running map[string]time.Duration
	if sweep && len(list) > 0 {
		// Only what may be orphaned: a step running (its lock tells whether its runner
		// lives), or no job waiting. One just approved, whose job waits to be picked up,
		// is left alone: taking its lock could make its runner wait.
		if waiting, running, err = s.jobs.WaitingSince(ctx, runArgs{}.Kind(), "execution_id"); err != nil {
			return err
		}
	}
	var failed error
	for _, o := range list {
		if sweep && !o.stepRunning && waiting[o.id] {
			continue
		}
		// A job marked running with no runner recorded (queuing a phase forgets it): a
		// replica picked it up and is about to take the lock (the lock being free then
		// proves nothing), and a second job would only wait to settle that runner's step.
		// Past pickupGrace, that replica died first (River never rescues a run job: it has
		// no timeout), and it is settled and queued again; the lock still keeps out a
		// runner that was merely slow.
		//
		// Nor is one whose runner was forgotten less than pickupGrace ago: a live runner
		// that lets its job go (snoozed for a rate limit: waitForLimit; failed, for River
		// to retry: forgetRunner) frees the lock before River records the job's end, its
		// row marked running meanwhile with the old pickup's time. Discarded then, the
		// job's wait was skipped by the one queued instead. A picker that died picked
		// its job up after the runner was last forgotten, so this delays no settling.
		picked, isRunning := running[o.id]
		if sweep && o.runner == "" && isRunning && (picked < pickupGrace || o.quiet < pickupGrace) {
			continue
		}
		// No job at all, not even one marked running, and no step running: its runner,
		// even alive, is not working it (its last attempt could not fail it), and it is
		// queued again.
		idle := sweep && !o.stepRunning && !isRunning
		if err := s.settleOrphan(ctx, o.id, o.runner, sweep, idle); err != nil {
			if ctx.Err() != nil {
				return err
			}
			s.log.Warn("executions: settle an execution whose runner stopped", "execution", o.id, "err", err)
			failed = err
		}
	}
	return failed
}

// settleOrphan is settleOrphans for one execution.
func (s *Service) settleOrphan(ctx context.Context, id, runner string, sweep, idle bool) error {
	if _, mine := s.held.Load(id); mine {
		return nil
	}
	// How long ago a job marked running must have been picked up to be taken for a dead
	// replica's: a picker may take pickupGrace to record itself.
	olderThan := pickupGrace
	if runner != "" && s.opts.RunnerAlive != nil {
		if !sweep && runner != s.opts.RunnerID {
			// At start, another runner's (another replica's, or this one's before a
			// restart) is left to the sweep, which judges runners only once this replica
			// is steady: starting as the database comes back from a restart, every
			// runner looks dead and every lock is free, live runners' too.
			return nil
		}
		if sweep && !idle {
			if s.opts.RunnerAlive(ctx, runner) {
				return nil
			}
			// Its runner recorded itself, so picked its job up, and died: its job's row,
			// however young, is dead, and kept would count as working the execution for
			// good. A live picker of another job of it cannot run it while the lock is
			// held below, and River's end of that job leaves a discarded row as it is.
			olderThan = 0
		}
	}
	discard := func() error {
		return db.WithTx(ctx, s.begin, func(tx pgx.Tx) error {
			olderThan := olderThan
			if olderThan == 0 {
				// runner was read before the lock was taken: one that took the execution
				// over since (recording itself) picked its job up a moment ago.
				var still bool
				if err := tx.QueryRow(ctx, `/* executions.runner.still */ SELECT EXISTS (SELECT 1
					FROM executions WHERE id = $1 AND runner_id::text = $2)`, id, runner).Scan(&still); err != nil {
					return fmt.Errorf("executions: the runner of %s: %w", id, err)
				}
				if !still {
					olderThan = pickupGrace
				}
			}
			if err := jobs.DiscardDead(ctx, tx, runArgs{}.Kind(), "execution_id", id, olderThan); err != nil {
				return fmt.Errorf("executions: finalize the dead jobs of %s: %w", id, err)
			}
			return nil
		})
	}
	return s.settleLockedThen(ctx, id, discard, func(ex *Execution) error {
		phase := PhaseRun
		if ex.Status == RollingBack {
			phase = PhaseRollback
		}
		if waiting, err := s.jobWaiting(ctx, id); err != nil || waiting {
			return err
		}
		return db.WithTx(ctx, s.begin, func(tx pgx.Tx) error { return s.queuePhase(ctx, tx, id, phase) })
	})
}

// settleLocked takes the execution's lock (doing nothing when a runner holds it),
// settles a step found running (settleInterrupted), and calls then while the
// execution still executes or rolls back, the lock still held.
func (s *Service) settleLocked(ctx context.Context, id string, then func(ex *Execution) error) error {
	return s.settleLockedThen(ctx, id, nil, then)
}

// settleLockedThen is settleLocked calling first, when not nil, once the lock is held,
// whatever the execution's status: the dead jobs of an execution about to fail as
// interrupted are finalized too (River's cleaner deletes only finalized rows).
func (s *Service) settleLockedThen(ctx context.Context, id string, first func() error, then func(ex *Execution) error) error {
	release, ok, err := s.lockExecution(ctx, id)
	if err != nil || !ok {
		return err
	}
	defer release()
	if first != nil {
		if err := first(); err != nil {
			return err
		}
	}
	ex, err := s.get(ctx, s.pool, id)
	if err != nil {
		return err
	}
	if err := s.settleInterrupted(ctx, ex); err != nil {
		return err
	}
	if ex.Status != Executing && ex.Status != RollingBack {
		return nil
	}
	return then(ex)
}

// settleInterrupted marks the steps of ex found running as interrupted and fails ex;
// ex.Status is updated. Only call it holding the execution's lock.
func (s *Service) settleInterrupted(ctx context.Context, ex *Execution) error {
	phase, to, kind := PhaseRun, Failed, events.ExecutionFailed
	on := runnerOn(ex)
	switch ex.Status {
	case RollingBack:
		phase, to, kind = PhaseRollback, RollbackFailed, events.RollbackFailed
	case Cancelled, RollbackFailed:
		// A step left running by a cancel (of the run, or of the rollback: the only way a
		// rollback ends failed with a step still running).
		return s.settleCancelledStep(ctx, ex, on)
	case Executing:
	default:
		return nil
	}
	return db.WithTx(ctx, s.begin, func(tx pgx.Tx) error {
		positions, err := s.interruptSteps(ctx, tx, ex, on, `/* executions.interrupted */
			UPDATE tool_calls SET status = 'interrupted', finished_at = now(),
			       error = $3
			WHERE execution_id = $1 AND phase = $2 AND status = 'running' RETURNING position, coalesce(call_id::text, '')`, ex.ID, phase,
			"Toolwarden"+on+" stopped while this step ran; it may or may not have taken effect, and it is not run again")
		if err != nil || len(positions) == 0 {
			return err
		}
		// The steps after it never run: they are skipped, as after any failed step.
		if err := skipPending(ctx, tx, ex.ID, phase); err != nil {
			return fmt.Errorf("executions: skip after an interrupted step: %w", err)
		}
		msg := fmt.Sprintf("interrupted: Toolwarden%s stopped while %s %d ran", on, stepWord(phase), positions[0]+1)
		out, err := s.apply(ctx, tx, ex.ID, change{from: []Status{ex.Status}, to: to, want: "failed",
			set: map[string]any{"error": msg, "finished_at": s.opts.Now()}, actor: audit.System, action: "execution.interrupted",
			event: announce(func(b events.Execution) events.ExecutionEnded {
				return events.ExecutionEnded{Execution: b, Error: msg, Step: &positions[0]}
			}, kind)})
		if err == nil {
			*ex = *out
		}
		return err
	})
}

// runnerOn names ex's runner as the words about a stop say it: which replica, with
// several the one that died ("" when none is recorded).
func runnerOn(ex *Execution) string {
	if ex.Runner == "" {
		return ""
	}
	return " (replica " + ex.Runner + ")"
}

// settleCancelledStep marks the step of a cancelled execution (or of a cancelled
// rollback) that was left to finish on its own, and whose runner stopped first, as
// interrupted (the execution stays cancelled, or rollback_failed); audited, as a step
// that ends is.
func (s *Service) settleCancelledStep(ctx context.Context, ex *Execution, on string) error {
	what := "the execution"
	if ex.Status == RollbackFailed {
		what = "its rollback"
	}
	return db.WithTx(ctx, s.begin, func(tx pgx.Tx) error {
		positions, err := s.interruptSteps(ctx, tx, ex, on, `/* executions.interrupted.cancelled */
			UPDATE tool_calls SET status = 'interrupted', finished_at = now(), error = $2
			WHERE execution_id = $1 AND status = 'running' RETURNING position, coalesce(call_id::text, '')`, ex.ID,
			"Toolwarden"+on+" stopped while this step ran, after "+what+" was cancelled; it may or may not have taken effect")
		if err != nil || len(positions) == 0 {
			return err
		}
		_, err = audit.Append(ctx, tx, audit.Entry{Actor: audit.System, Action: "execution.step_interrupted", TargetType: "execution",
			TargetID: ex.ID, TargetName: ex.Title(), Payload: map[string]any{"step": positions[0] + 1, "status": string(ex.Status)}})
		return err
	})
}

// interruptSteps runs update, which marks steps of ex interrupted returning their
// positions and call ids, in tx, and cancels the questions those steps still wait an
// answer to (user_collaboration): nobody waits for the answer any more, and an approving
// one would grant something for a plan that already ended. Cancelled here, in the same
// transaction, not a minute later by the grants prune.
func (s *Service) interruptSteps(ctx context.Context, tx pgx.Tx, ex *Execution, on, update string, args ...any) ([]int, error) {
	rows, err := tx.Query(ctx, update, args...)
	if err != nil {
		return nil, fmt.Errorf("executions: interrupted: %w", err)
	}
	var positions []int
	var calls []string
	var pos int
	var call string
	if _, err := pgx.ForEachRow(rows, []any{&pos, &call}, func() error {
		positions, calls = append(positions, pos), append(calls, call)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("executions: interrupted: %w", err)
	}
	if err := grants.CancelForCallsTx(ctx, tx, ex.ID, calls, "the step that asked it was interrupted: Toolwarden"+on+" stopped while it waited"); err != nil {
		return nil, err
	}
	return positions, nil
}

// runPhase runs the pending steps of one phase in order, holding the execution's lock.
func (s *Service) runPhase(ctx context.Context, id, phase string) error {
	if _, mine := s.held.Load(id); mine {
		return errBusy // a runner of this process works it (its lock may have dropped under it)
	}
	release, ok, err := s.lockExecution(ctx, id)
	if err != nil {
		return err
	}
	if !ok {
		return errBusy
	}
	defer release()
	ex, err := s.get(ctx, s.pool, id)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if elsewhere, err := s.runsElsewhere(ctx, id); err != nil || elsewhere {
		if err != nil {
			return err
		}
		return errBusy
	}
	want := Executing
	if phase == PhaseRollback {
		want = RollingBack
	}
	if s.opts.RunnerID != "" && ex.Status == want {
		// Which replica runs it: the page shows its name, and a sweep leaves the steps
		// of a replica seen alive to it. Only by a job of the phase it is in: a stray job
		// of the other phase (a retry, a duplicate that waited) runs nothing, and
		// recorded as its runner would keep the sweep from queueing the phase again.
		if _, err := s.pool.Exec(ctx, `/* executions.runner */ UPDATE executions SET runner = $2, runner_id = $3
			WHERE id = $1 AND runner_id IS DISTINCT FROM $3::uuid`, id, s.opts.Runner, s.opts.RunnerID); err != nil {
			return fmt.Errorf("executions: record the runner: %w", err)
		}
	}
	if err := s.settleInterrupted(ctx, ex); err != nil {
		return err
	}
	if ex.Status == Cancelled && phase == PhaseRun || ex.Status == RollbackFailed && phase == PhaseRollback {
		// Cancelled before its first step, or the step that waited was handed over
		// (stopDuring) as the cancel came: no step of it is left pending.
		return s.skipRest(ctx, id, phase)
	}
	if ex.Status != want {
		return nil // decided, finished or cancelled meanwhile
	}
	steps, err := s.StepsBrief(ctx, id)
	if err != nil {
		return err
	}
	for _, st := range steps {
		if st.Phase != phase {
			continue
		}
		if st.Status == StepFailed {
			// A step failed and the runner stopped before it failed the execution:
			// the rest must not run.
			return s.finish(context.WithoutCancel(ctx), ex, phase,
				fmt.Sprintf("%s failed: %s", stepLabel(st), st.Error))
		}
		if st.Status != StepPending {
			continue
		}
		if s.stopping.Load() {
			return s.handOver(ctx, id, phase) // the runner stops: no further step starts here
		}
		cur, err := s.get(ctx, s.pool, id)
		if err != nil {
			return err
		}
		if cur.Status != want {
			return s.skipRest(ctx, id, phase) // cancelled between steps
		}
		// What runs now must be what was approved, asked for by someone who still may.
		who, verified, b, err := s.checkBinding(ctx, cur, phase)
		if err != nil {
			return err
		}
		if b != nil && b.transient {
			// Nothing about the plan changed (a tool disabled for a moment, its server not
			// offering it while it restarts): the step waits for it, as for a rate limit.
			return s.waitTransient(ctx, cur, st, b)
		}
		if b != nil {
			return s.finishWith(context.WithoutCancel(ctx), cur, phase, notRun(st, b), b.action)
		}
		// What runs is the step as it was just verified, not as first read.
		now, ok := verified[st.ID]
		if !ok {
			continue // no longer pending
		}
		if msg, err := s.staleFile(ctx, cur, now); err != nil {
			return err
		} else if msg != "" {
			return s.finishWith(context.WithoutCancel(ctx), cur, phase, stepLabel(st)+" was not run: "+msg, actionStale)
		}
		if failure, err := s.runStep(ctx, cur, now, who); err != nil || failure != "" {
			if errors.Is(err, errStopped) {
				return nil // the step is settled (or handed over): the job is done
			}
			if errors.Is(err, errTakenOver) {
				// Nothing of the phase is this runner's any more: no later step starts here
				// and the phase is not ended here; the runner that took it over does both.
				s.log.Warn("executions: another runner took this execution over; this one stops before its next step",
					"execution", id, "phase", phase, "step", st.Position+1)
				return nil
			}
			if tr := (*transientRefused)(nil); errors.As(err, &tr) {
				return s.waitTransient(ctx, cur, st, tr.b)
			}
			if sr := (*staleRefused)(nil); errors.As(err, &sr) {
				// Refused by the router before its tool saw it: the plan is stale, as
				// when checkBinding finds it so.
				return s.finishWith(context.WithoutCancel(ctx), cur, phase, stepLabel(st)+" was not run: "+sr.reason, actionStale)
			}
			if err != nil {
				return err
			}
			return s.finish(context.WithoutCancel(ctx), cur, phase, failure)
		}
	}
	cur, err := s.get(ctx, s.pool, id)
	if err != nil {
		return err
	}
	return s.finish(ctx, cur, phase, "")
}

// notRun is the failure of a phase that stopped before step st for breach b: st named
// once, then the breach's reason, which names the step it is about when that is
// another (a later step's tool changed) and is said without it when that is st.
func notRun(st Step, b *breach) string {
	if b.step != nil && b.step.ID == st.ID {
		return stepLabel(st) + " was not run: " + b.detail
	}
	return stepLabel(st) + " was not run: " + b.reason
}

// transientWait bounds how long a phase waits before step st for a tool the router
// refuses for a reason that may pass (breach.transient), counted from the first such
// refusal. No existing timeout fits: a tool's timeout bounds a call, the approval's
// expiry a plan not yet approved. Ten minutes covers a server's restart and reconnect,
// or an administrator's brief maintenance, and still ends a rollback that cannot go on
// while someone is likely still looking.
const transientWait = 10 * time.Minute

// transientRetry is how often a step waiting for its tool (waitTransient) looks again.
const transientRetry = 5 * time.Second

// waitingPrefix begins the error of a pending step that waits for its tool, followed by
// when the wait began (RFC 3339): stored with the step, the deadline holds across a
// restart and whichever replica picks the snoozed job up. It goes when the step starts
// (startStep) or is skipped (skipPending): neither waits any more.
const waitingPrefix = "waiting since "

// waitingSince is when pending step st began to wait for its tool (ok false when it
// does not wait).
func waitingSince(st Step) (time.Time, bool) {
	rest, ok := strings.CutPrefix(st.Error, waitingPrefix)
	if !ok || st.Status != StepPending {
		return time.Time{}, false
	}
	stamp, _, _ := strings.Cut(rest, " ")
	t, err := time.Parse(time.RFC3339Nano, stamp)
	return t, err == nil
}

// waitTransient makes pending step st wait for the tool that breach b (transient)
// found cannot be called now: the step stays pending, noted as waiting and since when,
// and the *rateLimited returned snoozes its job (the runner forgotten, as waitForLimit
// does). Past transientWait since the first refusal, the phase fails saying how long it
// waited for what, audited as the failure it is (failed, rollback_failed), not as a
// stale plan: nothing about the plan changed.
func (s *Service) waitTransient(ctx context.Context, ex *Execution, st Step, b *breach) error {
	bg := context.WithoutCancel(ctx)
	why, tool := b.reason, st.Tool
	if b.step != nil {
		tool = b.step.Tool
		if b.step.ID == st.ID {
			why = b.detail
		}
	}
	now := s.opts.Now()
	since, waiting := waitingSince(st)
	if !waiting || since.After(now) {
		since = now
	}
	if waited := now.Sub(since); waited >= transientWait {
		return s.finishWith(bg, ex, st.Phase, fmt.Sprintf("%s was not run: %s could still not be called after Toolwarden waited %s for it: %s",
			stepLabel(st), tool, waited.Round(time.Second), why), "")
	}
	note := storableText(fmt.Sprintf("%s%s for %s to be callable again (at most %s): %s", waitingPrefix,
		since.UTC().Format(time.RFC3339), tool, transientWait, why), maxStepError)
	err := db.WithTx(bg, s.begin, func(tx pgx.Tx) error {
		// Written only when it changes (the first refusal, or another tool or reason): the
		// re-check every transientRetry leaves the row, and the page, as they are.
		tag, err := tx.Exec(bg, `/* executions.step.waiting */ UPDATE tool_calls SET error = $2
			WHERE id = $1 AND status = 'pending' AND error <> $2`, st.ID, note)
		if err != nil {
			return fmt.Errorf("executions: note a waiting step: %w", err)
		}
		if tag.RowsAffected() == 1 {
			if err := s.announceWaiting(bg, tx, ex, st, b, tool, note); err != nil {
				return err
			}
		}
		// Only this runner is forgotten: one that took the execution over meanwhile
		// (startStep) keeps working it, and this job, back, finds its lock held.
		return clearRunner(bg, tx, ex.ID, s.opts.RunnerID)
	})
	if err != nil {
		return err
	}
	level := slog.LevelDebug
	if !waiting {
		level = slog.LevelInfo
	}
	s.log.Log(bg, level, "executions: a step waits for its tool to be callable again", "execution", ex.ID, "phase", st.Phase,
		"step", st.Position+1, "tool", tool, "since", since, "reason", why)
	return &rateLimited{wait: transientRetry, why: tool + " to be callable again"}
}

// announceWaiting publishes, in tx, that step st of ex now waits for tool (note, its
// error as stored): on the execution's own topic only, so an open page re-renders the
// step and logs why, as for a call of it the router refused (tool.failed, the router's
// code tool_disabled). Not on the router's topic: no call was made, so no tool's card
// or statistics change. A refusal's end needs no event of its own: the step's run, or
// the transition that skips it, announces it.
func (s *Service) announceWaiting(ctx context.Context, tx pgx.Tx, ex *Execution, st Step, b *breach, tool, note string) error {
	at := st
	if b.step != nil {
		at = *b.step
	}
	toolID := ""
	if at.ToolID != nil {
		toolID = *at.ToolID
	}
	_, err := events.ToolFailed.Publish(ctx, tx, TopicOf(ex.ID), events.CallFailed{
		Call: events.Call{ToolID: toolID, Tool: tool, Source: router.SourceExecution, Actor: ex.RequesterName,
			Risk: at.Risk, ConversationID: ex.ConversationID},
		Code: router.CodeToolDisabled, Message: note})
	return err
}

// runsElsewhere reports whether a step of execution id runs on another replica that
// is alive (or cannot be judged: this replica is just back from a database outage),
// though its lock was free: that runner's lock's connection broke and it goes on, so
// its step is not settled as interrupted here, as a sweep would not either.
func (s *Service) runsElsewhere(ctx context.Context, id string) (bool, error) {
	if s.opts.RunnerAlive == nil {
		return false, nil
	}
	var runner string
	var stepRunning bool
	err := s.pool.QueryRow(ctx, `/* executions.runs_elsewhere */ SELECT coalesce(runner_id::text, ''),
		EXISTS (SELECT 1 FROM tool_calls WHERE execution_id = $1 AND status = 'running') FROM executions WHERE id = $1`,
		id).Scan(&runner, &stepRunning)
	if err != nil {
		return false, fmt.Errorf("executions: whose step runs: %w", err)
	}
	if !stepRunning || runner == "" || runner == s.opts.RunnerID {
		return false, nil
	}
	return s.opts.Steady != nil && !s.opts.Steady() || s.opts.RunnerAlive(ctx, runner), nil
}

// runStep runs one step through the router; failure says why it failed ("" when it
// succeeded). err is for what stops the runner itself (the database).
func (s *Service) runStep(ctx context.Context, ex *Execution, st Step, requester Caller) (failure string, err error) {
	callID := uuid.NewString()
	now := s.opts.Now()
	blocking := router.Blocking(st.Tool)
	if blocking {
		// Room is made before the step is marked running: a step refused here never ran,
		// and stays pending whatever fails (a step found running is settled interrupted).
		if s.blocking.Add(1) > s.blockingRoom() {
			s.blocking.Add(-1)
			return "", s.waitForLimit(ctx, ex, st, fmt.Sprintf("%d steps already wait for an answer on this server, half its workers", s.blockingRoom()), blockingRetry, false)
		}
		defer s.blocking.Add(-1)
	}
	started, over, err := s.startStep(ctx, ex, st, callID, now, blocking)
	switch {
	case err != nil:
		return "", err
	case over:
		return "", s.waitForLimit(ctx, ex, st, fmt.Sprintf("%d steps of the requester's plans already wait for an answer", maxBlockingSteps), blockingRetry, false)
	case !started:
		return "", s.notStarted(ctx, ex, st)
	}
	pin := s.pinOf(ex, st)
	toolRef := st.Tool
	if st.ToolID != nil {
		toolRef = *st.ToolID
	}
	callCtx := ctx
	if blocking {
		// It may wait a day for a person: it ends when its execution is cancelled.
		want := Executing
		if st.Phase == PhaseRollback {
			want = RollingBack
		}
		var stop func()
		callCtx, stop = s.whileRunning(ctx, ex.ID, want)
		defer stop()
	}
	res, callErr := s.router.Call(callCtx, router.Call{Tool: toolRef, Arguments: st.Arguments, Actor: requester.Actor,
		Role: requester.Role, Source: router.SourceExecution, Approval: router.Approval{Execution: ex.ID}, ConversationID: ex.ConversationID, Expect: expectOf(ex, st),
		ID: callID, Topic: TopicOf(ex.ID), Pin: pin})
	status, result, msg := StepSucceeded, json.RawMessage(nil), ""
	var dur float64
	switch {
	case callErr != nil && ctx.Err() != nil:
		// The runner stops: River cancelled its job, still running past the stop's grace.
		return "", s.stopDuring(ctx, ex, st, callID)
	case callErr != nil && ctx.Err() == nil && leftPhase(callCtx):
		// Stopped because the execution was cancelled: not the tool failing (as a step
		// of a cancelled execution whose runner stopped, it is interrupted).
		status, msg = StepInterrupted, fmt.Sprintf("stopped: %v while this step ran", context.Cause(callCtx))
		dur = float64(s.opts.Now().Sub(now).Microseconds()) / 1000
	case callErr != nil:
		status, msg = StepFailed, callErr.Error()
		var re *router.Error
		if errors.As(callErr, &re) {
			msg = re.Message
			if re.Code == router.CodeRateLimited {
				// The tool never saw the call: the step waits for the limit, pending again.
				return "", s.waitForLimit(ctx, ex, st, re.Message, re.RetryAfter, true)
			}
			if re.Code == router.CodeStale && !re.Ran {
				// The tool, its server's connection or its risk changed after checkBinding
				// looked, and the tool never saw the call: a stale plan, not a failed step.
				return "", s.refusedStale(ctx, ex, st, storableText(usage.RedactText(re.Message), maxStepError))
			}
			if re.Code == router.CodeToolDisabled && !re.Ran {
				// Disabled (or its server not offering it) after checkBinding looked: the
				// step waits for its tool, as when checkBinding finds it so.
				return "", s.refusedTransient(ctx, ex, st, storableText(usage.RedactText(re.Message), maxStepError))
			}
			if re.Ran {
				// Its server got the call (a timeout, an error after sending): a rollback
				// must name it (mayHaveRun), not pass over it as a step that did nothing.
				msg = ranNote + msg
			}
		}
		dur = float64(s.opts.Now().Sub(now).Microseconds()) / 1000
	default:
		result, _ = json.Marshal(map[string]any{"content": res.Content, "structured_content": res.StructuredContent,
			"is_error": res.IsError})
		result = storableJSON(result)
		dur = res.DurationMS
		switch {
		case res.IsError && PrivateResult(st.Tool):
			// Its output is the requester's (a command's, a file's): the error every
			// viewer of the execution reads does not carry it; the result, withheld
			// from them, does.
			status, msg = StepFailed, toolErrorNote+" (what it said is in the step's result)"
		case res.IsError:
			status, msg = StepFailed, toolErrorNote+": "+router.TextOfMax(res.Content, maxStepError)
		}
	}
	// The error is shown to every viewer, in the log and in the audit: what looks like
	// a credential in a tool's words is masked, as the router masks it in its records.
	msg = storableText(usage.RedactText(msg), maxStepError)
	// An undo step's end and its step's "compensated" commit together: a crash between
	// them would leave the undone step shown in effect for good (the retried job finds
	// the undo step ended and goes on). A failed step whose partial write was undone
	// stays failed: that is how it ended.
	settled, bg := false, context.WithoutCancel(ctx)
	err = db.WithTx(bg, s.begin, func(tx pgx.Tx) error {
		tag, err := tx.Exec(bg, `/* executions.step.finish */
			UPDATE tool_calls SET status = $2, result = $3, error = $4, finished_at = now(), duration_ms = $5
			WHERE id = $1 AND status = 'running'`,
			st.ID, status, result, msg, dur)
		if err != nil {
			return fmt.Errorf("executions: finish step: %w", err)
		}
		if settled = tag.RowsAffected() == 0; settled {
			return nil
		}
		if status == StepInterrupted {
			_, err := audit.Append(bg, tx, audit.Entry{Actor: audit.System, Action: "execution.step_interrupted", TargetType: "execution",
				TargetID: ex.ID, TargetName: ex.Title(), Payload: map[string]any{"step": st.Position + 1, "reason": msg}})
			return err
		}
		if status == StepFailed || st.Phase != PhaseRollback || st.Undoes == nil {
			return nil
		}
		if _, err := tx.Exec(bg, `/* executions.step.compensated */
			UPDATE tool_calls SET status = 'compensated' WHERE execution_id = $1 AND phase = 'run' AND position = $2
			AND status = 'succeeded'`,
			ex.ID, *st.Undoes); err != nil {
			return fmt.Errorf("executions: mark compensated: %w", err)
		}
		return nil
	})
	switch {
	case err != nil:
		return "", err
	case settled:
		// Settled meanwhile as interrupted (its runner was taken for dead): what is
		// recorded stands, and this runner stops.
		return "", errSettledElsewhere
	case status == StepFailed:
		return fmt.Sprintf("%s failed: %s", stepLabel(st), msg), nil
	}
	return "", nil
}

// notStarted is runStep's answer for step st that startStep did not mark running: nil
// when its execution left the phase's status (cancelled, or ended: its pending steps
// were skipped, and runPhase finds so before the next step), errTakenOver when it still
// runs, so that another runner started the step or took the execution over.
func (s *Service) notStarted(ctx context.Context, ex *Execution, st Step) error {
	want := Executing
	if st.Phase == PhaseRollback {
		want = RollingBack
	}
	var status Status
	if err := s.pool.QueryRow(ctx, `/* executions.step.not_started */ SELECT status FROM executions WHERE id = $1`,
		ex.ID).Scan(&status); err != nil {
		return fmt.Errorf("executions: the status of %s: %w", ex.ID, err)
	}
	if status != want || s.opts.RunnerID == "" {
		// Without runner ids (one process, no replicas) no other runner can have taken
		// the execution over: a step no longer pending is passed, as before.
		return nil
	}
	return errTakenOver
}

// startStep marks pending step st running as call callID (started false when it is no
// longer pending, or no longer this runner's to start). A blocking step is counted
// against its requester's limit in the transaction that marks it (over: it is not
// marked): refused, or failing, it stays pending, never left running without its call
// sent, which its next runner would take for a step that may have taken effect
// (settleInterrupted).
//
// With replicas, a step starts only while this runner is still the execution's
// recorded runner: the lock's connection may have broken under it (a frozen host its
// keepalives gave up on) and another replica settled the execution or took it over,
// which first forgets the runner (queuePhase) and then records its own. The
// execution's row is read FOR SHARE, so a take-over committing meanwhile is waited for
// and seen, not missed by this statement's snapshot.
func (s *Service) startStep(ctx context.Context, ex *Execution, st Step, callID string, now time.Time, blocking bool) (started, over bool, err error) {
	start := func(q db.Querier) error {
		owned, args := "", []any{st.ID, callID, now, waitingPrefix}
		if s.opts.RunnerID != "" {
			owned = ` AND EXISTS (SELECT 1 FROM executions WHERE id = $5 AND runner_id = $6::uuid FOR SHARE)`
			args = append(args, ex.ID, s.opts.RunnerID)
		}
		tag, err := q.Exec(ctx, `/* executions.step.start */
			UPDATE tool_calls SET status = 'running', call_id = $2, started_at = $3,
			       error = CASE WHEN starts_with(error, $4) THEN '' ELSE error END
			WHERE id = $1 AND status = 'pending'`+owned, args...)
		if err != nil {
			return fmt.Errorf("executions: start step: %w", err)
		}
		started = tag.RowsAffected() == 1
		return nil
	}
	if !blocking {
		err = start(s.pool)
		return started, false, err
	}
	err = db.WithTx(ctx, s.begin, func(tx pgx.Tx) error {
		started = false
		var err error
		if over, err = blockingOverLimit(ctx, tx, ex, st); err != nil || over {
			return err
		}
		return start(tx)
	})
	return started && err == nil, over && err == nil, err
}

// errStopped: the runner stopped during a step and settled it (stopDuring); runPhase
// ends its job as done.
var errStopped = errors.New("executions: the runner stopped during a step")

// stopDuring settles step st, whose call ended because the runner's own context did
// (the process stops), as a crash would be: the step interrupted and the execution
// failed (settleInterrupted; a cancelled one stays cancelled), never failed by the
// cancel. A step that waited for a person's answer (router.Blocking) took no effect
// unanswered: it is pending again and handed over, and the next runner asks again
// (handOverWaiting).
func (s *Service) stopDuring(ctx context.Context, ex *Execution, st Step, callID string) error {
	bg := context.WithoutCancel(ctx)
	if router.Blocking(st.Tool) {
		handed, err := s.handOverWaiting(bg, ex, st, callID)
		if err != nil {
			return err
		}
		if handed {
			s.log.Info("executions: the runner stops; a step waiting for an answer is handed over", "execution", ex.ID, "step", st.Position+1)
			return errStopped
		}
	}
	// The call's events first, so the execution's log ends with how it ended.
	if err := s.router.Flush(bg); err != nil {
		s.log.Warn("executions: the last steps' events were not written before the end", "execution", ex.ID, "err", err)
	}
	cur, err := s.get(bg, s.pool, ex.ID)
	if err != nil {
		return err
	}
	if err := s.settleInterrupted(bg, cur); err != nil {
		return err
	}
	return errStopped
}

// handOverWaiting puts blocking step st back to pending, withdraws its question and
// queues its phase again, unless the question was answered as the runner stopped (the
// answer may have granted something: the step is then interrupted like any other).
func (s *Service) handOverWaiting(ctx context.Context, ex *Execution, st Step, callID string) (handed bool, err error) {
	err = db.WithTx(ctx, s.begin, func(tx pgx.Tx) error {
		handed = false
		// Its questions locked, as an answer locks them (grants.RespondAs): an answer
		// committing meanwhile is read here, and one coming later finds the question
		// cancelled. Read unlocked, an answer committed between this look and the cancel
		// below was lost, its grant live, and the person asked again. The step's row is
		// locked before them, in the order interruptSteps takes the two.
		if _, err := tx.Exec(ctx, `/* executions.step.hand_over.lock */ SELECT 1 FROM tool_calls WHERE id = $1 FOR UPDATE`, st.ID); err != nil {
			return fmt.Errorf("executions: lock a waiting step: %w", err)
		}
		var answered bool
		if err := tx.QueryRow(ctx, `/* executions.step.hand_over.answered */ SELECT coalesce(bool_or(status IN ('answered', 'declined')), false)
			FROM (SELECT status FROM collaborations WHERE execution_id = $1 AND call_id = $2 FOR UPDATE) q`, ex.ID, callID).Scan(&answered); err != nil {
			return fmt.Errorf("executions: was a waiting step answered: %w", err)
		}
		if answered {
			return nil
		}
		if err := putBack(ctx, tx, st.ID); err != nil {
			return err
		}
		// Its question goes now, not when its waiting call notices: the next runner asks anew.
		if err := grants.CancelForCallsTx(ctx, tx, ex.ID, []string{callID}, "Toolwarden"+runnerOn(ex)+
			" stopped while the step waited; the next runner asks again"); err != nil {
			return err
		}
		handed = true
		return s.queuePhase(ctx, tx, ex.ID, st.Phase)
	})
	return handed && err == nil, err
}

// putBack makes running step id pending again, to be run anew (errSettledElsewhere
// when it no longer runs).
func putBack(ctx context.Context, tx pgx.Tx, id string) error {
	tag, err := tx.Exec(ctx, `/* executions.step.put_back */
		UPDATE tool_calls SET status = 'pending', call_id = NULL, started_at = NULL WHERE id = $1 AND status = 'running'`, id)
	if err != nil {
		return fmt.Errorf("executions: put a step back: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return errSettledElsewhere
	}
	return nil
}

// rateLimited is runStep's answer for a step the router refused for a rate limit (and
// runPhase's for one whose tool cannot be called for a while: waitTransient): the step
// is pending again, and its job runs it after wait.
type rateLimited struct {
	wait time.Duration
	why  string // what it waits for ("" a rate limit)
}

func (r *rateLimited) Error() string {
	why := r.why
	if why == "" {
		why = "a rate limit"
	}
	return fmt.Sprintf("executions: a step waits %s for %s", r.wait, why)
}

// waitForLimit puts step st, refused by a limit (reason), back to pending when running
// (unless it was settled meanwhile) and returns the *rateLimited that makes its job
// wait. The runner is forgotten: the snoozed job may be picked up by another replica
// (see queuePhase).
func (s *Service) waitForLimit(ctx context.Context, ex *Execution, st Step, reason string, wait time.Duration, running bool) error {
	bg := context.WithoutCancel(ctx)
	err := db.WithTx(bg, s.begin, func(tx pgx.Tx) error {
		if running {
			if err := putBack(bg, tx, st.ID); err != nil {
				return err
			}
		}
		return clearRunner(bg, tx, ex.ID, s.opts.RunnerID) // only this one: see waitTransient
	})
	if err != nil {
		return err
	}
	s.log.Info("executions: a step waits for a rate limit", "execution", ex.ID, "step", st.Position+1,
		"tool", st.Tool, "wait", wait, "reason", reason)
	return &rateLimited{wait: max(wait, 100*time.Millisecond)}
}

// staleRefused is runStep's answer for a step the router refused as stale_plan at its
// call: runPhase ends the phase as for a breach checkBinding finds (actionStale).
type staleRefused struct{ reason string }

func (r *staleRefused) Error() string {
	return "executions: a step was refused as stale: " + r.reason
}

// transientRefused is runStep's answer for a step the router refused at its call for a
// reason that may pass (tool_disabled): b is the breach runPhase waits on.
type transientRefused struct{ b *breach }

func (r *transientRefused) Error() string {
	return "executions: a step's tool cannot be called for now: " + r.b.detail
}

// refusedTransient leaves step st, refused by the router as tool_disabled (reason), as
// refusedStale leaves a stale one, pending, for runPhase to wait for its tool.
func (s *Service) refusedTransient(ctx context.Context, ex *Execution, st Step, reason string) error {
	if err := s.putBack(ctx, ex, st); err != nil {
		return err
	}
	at := st
	return &transientRefused{b: &breach{action: actionStale, reason: stepLabel(st) + ": " + reason, step: &at, detail: reason, transient: true}}
}

// refusedStale leaves step st, refused by the router as stale (reason), as a breach
// found by checkBinding leaves it: pending (its call id kept, naming the refused
// call's records), for the transition that ends the phase to skip with the rest, or
// for a retried job to refuse again should that transition not commit.
func (s *Service) refusedStale(ctx context.Context, ex *Execution, st Step, reason string) error {
	if err := s.putBack(ctx, ex, st); err != nil {
		return err
	}
	s.log.Info("executions: the router refused a step as stale", "execution", ex.ID, "step", st.Position+1,
		"tool", st.Tool, "reason", reason)
	return &staleRefused{reason: reason}
}

// putBack makes running step st, refused by the router before its tool saw it, pending
// again; a cancel that committed first has the phase's pending steps skipped with it.
func (s *Service) putBack(ctx context.Context, ex *Execution, st Step) error {
	bg := context.WithoutCancel(ctx)
	want := Executing
	if st.Phase == PhaseRollback {
		want = RollingBack
	}
	// The execution's row first, as a cancel takes it before the steps: a cancel that
	// committed first is read here (it skipped the phase's pending steps without this
	// one, which is skipped here), and one that comes later skips it.
	err := db.WithTxRetry(bg, s.begin, func(tx pgx.Tx) error {
		var status Status
		if err := tx.QueryRow(bg, `/* executions.step.stale.status */ SELECT status FROM executions WHERE id = $1 FOR SHARE`,
			ex.ID).Scan(&status); err != nil {
			return fmt.Errorf("executions: the status of %s: %w", ex.ID, err)
		}
		tag, err := tx.Exec(bg, `/* executions.step.stale */
			UPDATE tool_calls SET status = 'pending', started_at = NULL WHERE id = $1 AND status = 'running'`, st.ID)
		if err != nil {
			return fmt.Errorf("executions: put a stale step back: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return errSettledElsewhere
		}
		if status != want {
			return skipPending(bg, tx, ex.ID, st.Phase)
		}
		return nil
	})
	return err
}

// ranNote begins the error of a step that failed after its server got the call, which
// may have taken effect. At the start, the text is Toolwarden's alone: a tool's words
// cannot forge it, nor a clipped error lose it.
const ranNote = "the server got the call, so it may have taken effect: "

// mayHaveRun reports whether failed step st failed after its server got the call (ranNote).
func mayHaveRun(st Step) bool {
	return st.Status == StepFailed && strings.HasPrefix(st.Error, ranNote)
}

// toolErrorNote begins the error of a step whose tool answered with its own error
// result (isError): its server ran the call, which may have done part of its work
// (toolFailed). Toolwarden's words, before any of the tool's.
const toolErrorNote = "the tool reported an error"

// toolFailed reports whether failed step st failed with its tool's own error result.
func toolFailed(st Step) bool {
	return st.Status == StepFailed && strings.HasPrefix(st.Error, toolErrorNote)
}

// maxStepError bounds a step's error as stored and announced (tool_calls.error, the
// execution's error, its events and audit): a tool's error text may be any length.
const maxStepError = 4 << 10

// storableText is s as a text column takes it (a NUL or bytes that are not UTF-8
// replaced by U+FFFD), clipped to n bytes.
func storableText(s string, n int) string {
	return textcheck.Clip(textcheck.Storable(strings.ToValidUTF8(s, "\uFFFD")), n, "…")
}

// storableJSON is raw as jsonb takes it: a string (or key) holding a NUL, bytes that
// are not UTF-8 or a lone surrogate escape has them replaced by U+FFFD. A tool's
// output may hold any of them (a file read with a NUL in it); refused, the step's end
// could not be recorded.
func storableJSON(raw json.RawMessage) json.RawMessage {
	if _, _, bad := textcheck.JSON(raw); !bad {
		return raw
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return raw
	}
	out, err := json.Marshal(cleanJSON(v))
	if err != nil {
		return raw
	}
	return out
}

// cleanJSON replaces the NULs in the strings and keys of a decoded JSON value (decoding
// already replaced bytes that are not UTF-8 and lone surrogates).
func cleanJSON(v any) any {
	switch x := v.(type) {
	case string:
		return textcheck.Storable(x)
	case []any:
		for i := range x {
			x[i] = cleanJSON(x[i])
		}
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[textcheck.Storable(k)] = cleanJSON(e)
		}
		return out
	}
	return v
}

// pinOf is what step st was approved against, with the risk level it was approved at
// (an undo step's own, from the rollback plan): the router refuses the call if the
// tool's risk rose since checkBinding looked (pinChange), as it skips the approval.
func (s *Service) pinOf(ex *Execution, st Step) *router.Pin {
	list := ex.Plan.Steps
	if st.Phase == PhaseRollback {
		// Rollback steps are prepared and pinned when the rollback is asked for.
		list = nil
		if ex.RollbackPlan != nil {
			list = ex.RollbackPlan.Steps
		}
	}
	if st.Position < len(list) {
		p := list[st.Position].Pin
		p.MaxRisk = list[st.Position].Risk.Level
		return &p
	}
	return nil
}

// handOver leaves the rest of a phase to another runner (or this process's next
// start): it queues the phase again, and the runner that takes it continues with the
// next pending step.
func (s *Service) handOver(ctx context.Context, id, phase string) error {
	bg := context.WithoutCancel(ctx)
	if err := db.WithTx(bg, s.begin, func(tx pgx.Tx) error { return s.queuePhase(bg, tx, id, phase) }); err != nil {
		return fmt.Errorf("executions: hand over %s of %s: %w", phase, id, err)
	}
	return nil
}

// skipRest marks the pending steps of a phase skipped (the execution was cancelled).
func (s *Service) skipRest(ctx context.Context, id, phase string) error {
	return skipPending(ctx, s.pool, id, phase)
}

// skipPending marks the pending steps of execution id's phase skipped, on q. A step
// that waited for its tool (waitTransient) loses its note, which said it would run once
// the tool is back: skipped, it never will. Any other error it carries stays.
func skipPending(ctx context.Context, q db.Querier, id, phase string) error {
	_, err := q.Exec(ctx, `/* executions.skip */
		UPDATE tool_calls SET status = 'skipped', error = CASE WHEN starts_with(error, $3) THEN '' ELSE error END
		WHERE execution_id = $1 AND phase = $2 AND status = 'pending'`, id, phase, waitingPrefix)
	return err
}

// finish ends a phase: success or rolled back when failure is "" and every step of it
// succeeded, else failed or rollback failed (the remaining steps skipped, by the
// transition: apply).
func (s *Service) finish(ctx context.Context, ex *Execution, phase, failure string) error {
	return s.finishWith(ctx, ex, phase, failure, "")
}

// notSucceeded is why phase did not succeed when one of its steps did not ("" when all did).
func notSucceeded(steps []Step, phase string) string {
	what := "plan"
	if phase == PhaseRollback {
		what = "rollback"
	}
	for _, st := range steps {
		if st.Phase == phase && st.Status != StepSucceeded {
			return fmt.Sprintf("%s is %s, not succeeded, so the %s did not complete", stepLabel(st), st.Status, what)
		}
	}
	return ""
}

// finishWith is finish with the audit action of the transition given ("" for the
// usual one): a plan refused before a step (checkBinding) is audited as what it was.
func (s *Service) finishWith(ctx context.Context, ex *Execution, phase, failure, action string) error {
	// The router writes its call events (started, progress, completed) a little behind
	// the calls; write them first, so the execution's log ends with how it ended.
	if err := s.router.Flush(ctx); err != nil {
		s.log.Warn("executions: the last steps' events were not written before the end", "execution", ex.ID, "err", err)
	}
	steps, err := s.StepsBrief(ctx, ex.ID)
	if err != nil {
		return err
	}
	if failure == "" {
		// A phase whose steps did not all succeed (skipped by a failure whose transition
		// never committed, in a release that skipped them first) is no success.
		failure = notSucceeded(steps, phase)
	}
	results := []events.StepResult{}
	for _, st := range steps {
		if st.Phase == phase {
			status := st.Status
			if failure != "" && status == StepPending {
				// The transition below skips it, in its own transaction (apply): a failure
				// that does not commit leaves it pending, to be run or refused again.
				// Skipped, it no longer waits for its tool: its note goes, as skipPending's.
				status = StepSkipped
				if strings.HasPrefix(st.Error, waitingPrefix) {
					st.Error = ""
				}
			}
			results = append(results, events.StepResult{Position: st.Position, Tool: st.Tool, Status: status,
				DurationMS: st.DurationMS, Error: st.Error})
		}
	}
	c := change{set: map[string]any{"finished_at": s.opts.Now()}, actor: audit.System}
	var kind events.Kind[events.ExecutionEnded]
	switch {
	case phase == PhaseRun && failure == "":
		c.from, c.to, c.want, kind, c.action = []Status{Executing}, Success, "finished", events.ExecutionSucceeded, "execution.success"
	case phase == PhaseRun:
		c.from, c.to, c.want, kind, c.action = []Status{Executing}, Failed, "failed", events.ExecutionFailed, "execution.failed"
	case failure == "":
		c.from, c.to, c.want, kind, c.action = []Status{RollingBack}, RolledBack, "rolled back", events.RollbackCompleted, "execution.rolled_back"
	default:
		c.from, c.to, c.want, kind, c.action = []Status{RollingBack}, RollbackFailed, "failed", events.RollbackFailed, "execution.rollback_failed"
	}
	if failure != "" {
		c.set["error"] = failure
	}
	c.event = announce(func(b events.Execution) events.ExecutionEnded {
		return events.ExecutionEnded{Execution: b, Results: results, Error: failure}
	}, kind)
	if action != "" {
		c.action = action
	}
	_, err = s.decide(ctx, Caller{Actor: audit.System}, ex.ID, c)
	if _, ok := ConflictStatus(err); ok {
		return nil // cancelled while the last step ran: the cancellation stands
	}
	return err
}
