package executions

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/fault"
)

// Status is where an execution stands (docs/architecture.md, State machines).
type Status string

// The execution states.
const (
	Planning         Status = "planning"
	AwaitingApproval Status = "awaiting_approval"
	Executing        Status = "executing"
	Success          Status = "success"
	Failed           Status = "failed"
	RollingBack      Status = "rolling_back"
	RolledBack       Status = "rolled_back"
	RollbackFailed   Status = "rollback_failed"
	Cancelled        Status = "cancelled"
	Expired          Status = "expired"
)

// Statuses lists every state in lifecycle order.
var Statuses = []Status{Planning, AwaitingApproval, Executing, Success, Failed, RollingBack, RolledBack,
	RollbackFailed, Cancelled, Expired}

// edges are the legal transitions:
//
//	planning → awaiting_approval → executing → success | failed
//	failed → rolling_back → rolled_back | rollback_failed
//	awaiting_approval → cancelled | expired
//	executing → cancelled   (between steps)
//	rolling_back → rollback_failed   (also when its rollback is cancelled)
var edges = map[Status][]Status{
	Planning:         {AwaitingApproval},
	AwaitingApproval: {Executing, Cancelled, Expired},
	Executing:        {Success, Failed, Cancelled},
	Failed:           {RollingBack},
	RollingBack:      {RolledBack, RollbackFailed},
}

// Legal reports whether from → to is a transition of the state machine.
func Legal(from, to Status) bool { return slices.Contains(edges[from], to) }

// Final reports whether nothing more can happen to an execution in s (a failed one may
// still be rolled back, so it is not final).
func Final(s Status) bool { return len(edges[s]) == 0 }

// ErrIllegal is a transition the state machine does not have.
var ErrIllegal = errors.New("executions: illegal transition")

// Found is the details of a conflict: the state the execution was found in.
type Found struct {
	Status Status `json:"status"`
}

// conflict is a transition refused because the execution is not (or no longer) in a
// state it can happen from: someone else decided first, or it moved on. want is what
// was tried, in words.
func conflict(id string, current Status, want string) *fault.Error {
	return fault.Conflict("", fmt.Sprintf("execution %s is %s, so it cannot be %s", shortID(id), strings.ReplaceAll(string(current), "_", " "), want)).
		About("execution").WithDetails(Found{Status: current})
}

// ConflictStatus returns the state a conflict found the execution in; ok is false
// when err is not such a conflict.
func ConflictStatus(err error) (current Status, ok bool) {
	f, isFault := fault.As(err)
	if !isFault || f.Kind != fault.KindConflict {
		return "", false
	}
	found, ok := f.Details.(Found)
	return found.Status, ok
}

func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// change is one transition with what it records: the columns it sets besides status,
// its events (each in the same transaction) and its audit entry.
type change struct {
	from   []Status
	to     Status
	want   string         // "confirmed", "cancelled", ... for the conflict message
	set    map[string]any // extra columns
	event  event          // its events, whose payload the audit entry keeps too
	actor  audit.Actor
	action string // audit action
	// result is the audit result when not resultOf(to): a person's cancel of a
	// rollback succeeded, though it ends the rollback failed.
	result string
}

// event builds a transition's events from what every event says about the execution
// after it (base): their payload, and the events on the execution's topic and on Topic.
type event func(base events.Execution) (payload any, drafts []events.Draft)

// announce is the event of the given kinds (plan.created then approval.requested share
// one payload) with the payload build makes from the base.
func announce[P any](build func(base events.Execution) P, kinds ...events.Kind[P]) event {
	return func(base events.Execution) (any, []events.Draft) {
		p := build(base)
		var drafts []events.Draft
		for _, k := range kinds {
			drafts = append(drafts, k.Draft(TopicOf(base.ExecutionID), p), k.Draft(Topic, p))
		}
		return p, drafts
	}
}

// just is the event of a kind whose payload is the base alone.
func just(kind events.Kind[events.Execution]) event {
	return announce(func(b events.Execution) events.Execution { return b }, kind)
}

// apply moves execution id along c inside tx with a conditional update, so of many
// concurrent transitions from the same state exactly one wins; the others get a
// conflict. The events and the audit row commit with the change.
func (s *Service) apply(ctx context.Context, tx pgx.Tx, id string, c change) (*Execution, error) {
	for _, f := range c.from {
		if !Legal(f, c.to) {
			return nil, fmt.Errorf("%w: %s → %s", ErrIllegal, f, c.to)
		}
	}
	sets := []string{"status = $2", "updated_at = now()"}
	args := []any{id, string(c.to)}
	cols := make([]string, 0, len(c.set))
	for k := range c.set {
		cols = append(cols, k)
	}
	slices.Sort(cols)
	for _, k := range cols {
		args = append(args, c.set[k])
		if k == "started_at" || k == "finished_at" || k == "approved_at" {
			sets = append(sets, fmt.Sprintf("%s = coalesce(%s, $%d)", k, k, len(args)))
			continue
		}
		sets = append(sets, fmt.Sprintf("%s = $%d", k, len(args)))
	}
	from := make([]string, len(c.from))
	for i, f := range c.from {
		from[i] = string(f)
	}
	args = append(args, from)
	rows, err := tx.Query(ctx, `/* executions.apply */ UPDATE executions SET `+strings.Join(sets, ", ")+`
		WHERE id = $1 AND status = ANY($`+fmt.Sprint(len(args))+`) RETURNING `+columns, args...)
	if err != nil {
		return nil, fmt.Errorf("executions: %s: %w", c.to, err)
	}
	ex, err := pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByName[Execution])
	if errors.Is(err, pgx.ErrNoRows) {
		cur, gerr := s.get(ctx, tx, id)
		if gerr != nil {
			return nil, gerr
		}
		return nil, conflict(id, cur.Status, c.want)
	}
	if err != nil {
		return nil, fmt.Errorf("executions: %s: %w", c.to, err)
	}
	// Nothing more of the phase it ends starts: its waiting steps say so at once (a
	// runner between steps finds them no longer pending and stops). Skipped here, with
	// the transition, never before it: steps skipped under an execution still running
	// would let the next runner find nothing left to run and end it a success.
	phase := ""
	switch c.to {
	case Cancelled, Expired, Failed:
		phase = PhaseRun
	case RollbackFailed:
		phase = PhaseRollback // a rollback cancelled, or one that failed
	}
	if phase != "" {
		if err := skipPending(ctx, tx, id, phase); err != nil {
			return nil, fmt.Errorf("executions: skip the %s steps of %s: %w", phase, id, err)
		}
	}
	payload, drafts := c.event(ex.summary(c.from))
	if _, err := events.PublishBatch(ctx, tx, drafts); err != nil {
		return nil, err
	}
	result := c.result
	if result == "" {
		result = resultOf(c.to)
	}
	if _, err := audit.Append(ctx, tx, audit.Entry{Actor: c.actor, Action: c.action, TargetType: "execution", TargetID: id,
		TargetName: ex.Title(), Payload: payload, Result: result}); err != nil {
		return nil, err
	}
	return ex, nil
}

// resultOf is an execution transition's audit result: one that ends it failed (its run
// failed, was interrupted or refused before a step, or its rollback failed) reads
// "failure", not the "success" of having recorded it.
func resultOf(to Status) string {
	if to == Failed || to == RollbackFailed {
		return audit.ResultFailure
	}
	return audit.ResultSuccess
}

// decided is the event of a rejection or cancellation: why, and by whom.
func decided(kind events.Kind[events.ExecutionDecided], reason, by string) event {
	return announce(func(b events.Execution) events.ExecutionDecided {
		return events.ExecutionDecided{Execution: b, Reason: reason, By: by}
	}, kind)
}
