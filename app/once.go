package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/jobs"
	"github.com/toolwarden/toolwarden/services/memory"
)

// onceArgs is the periodic job of a Once component, by name.
type onceArgs struct {
	Component string `json:"component"`
}

func (onceArgs) Kind() string { return "app.once" }

// InsertOpts keeps one pending job per component: a replica that starts while one is
// queued adds no second.
func (a onceArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: jobs.Maintenance, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning, rivertype.JobStateRetryable, rivertype.JobStateScheduled}}}
}

type onceWorker struct {
	river.WorkerDefaults[onceArgs]
	a *App
}

func (w *onceWorker) Work(ctx context.Context, job *river.Job[onceArgs]) error {
	for _, c := range w.a.components {
		if c.Scope == Once && c.Name == job.Args.Component {
			if skipped(w.a.cfg.Skip, c.Name) {
				return nil
			}
			return c.Job(ctx)
		}
	}
	// A job queued by a version that had this component: nothing to do.
	return river.JobCancel(fmt.Errorf("no periodic component %q", job.Args.Component))
}

// Timeout bounds a periodic job (the queue's default is none, for executions).
func (w *onceWorker) Timeout(*river.Job[onceArgs]) time.Duration { return 5 * time.Minute }

// registerOnce makes every Once component a periodic job on the queue.
func (a *App) registerOnce() error {
	if err := jobs.Register(a.Jobs, &onceWorker{a: a}); err != nil {
		return err
	}
	for _, c := range a.components {
		if c.Scope != Once {
			continue
		}
		name := c.Name
		a.Jobs.Every(c.Every, func() (river.JobArgs, *river.InsertOpts) { return onceArgs{Component: name}, nil })
	}
	return nil
}

// healthRetention is how long server health checks are kept.
const healthRetention = 7 * 24 * time.Hour

// discoveriesKept and discoveryRetention bound the record of a server's discoveries:
// its newest 500, and of those only the last one past 30 days.
const (
	discoveriesKept    = 500
	discoveryRetention = 30 * 24 * time.Hour
)

// eventRetention is how long events are kept for websocket clients to catch up on,
// except an execution's own, which are its log.
const eventRetention = 7 * 24 * time.Hour

// conversationRetention is how long an assistant conversation nobody wrote in is kept.
const conversationRetention = 90 * 24 * time.Hour

// prune removes ended sessions, old sign-in failures, old health checks and discovery
// records, old events, old assistant conversations, todo lists unchanged for 90 days and
// the rows of replicas long dead.
// Each step runs whatever the others did: one that keeps failing does not keep the
// rest from their work.
func (a *App) prune(ctx context.Context) error {
	drop := func(_ int64, err error) error { return err }
	steps := []struct {
		what string
		run  func() error
	}{
		{"sessions", func() error { return a.Auth.Prune(ctx) }},
		{"health checks", func() error { return drop(a.Registry.PruneHealth(ctx, healthRetention)) }},
		{"discoveries", func() error { return drop(a.Registry.PruneDiscoveries(ctx, discoveriesKept, discoveryRetention)) }},
		{"grants", func() error { return drop(a.Grants.Prune(ctx)) }},
		{"events", func() error {
			return drop(events.Prune(ctx, a.Pool, time.Now().Add(-eventRetention), executions.TopicOf("")))
		}},
		{"conversations", func() error { return drop(a.Assistant.Prune(ctx, conversationRetention)) }},
		// The person-wide todo limit's refusal promises this (services/memory).
		{"todo lists", func() error { return drop(a.Memory.PruneTodos(ctx, memory.TodosKept)) }},
		{"replicas", func() error { return a.Replicas.Prune(ctx) }},
	}
	var errs []error
	for _, st := range steps {
		if err := st.run(); err != nil {
			errs = append(errs, fmt.Errorf("prune %s: %w", st.what, err))
		}
	}
	return errors.Join(errs...)
}

// rollup adds up the calls of the days that ended (services/analytics).
func (a *App) rollup(ctx context.Context) error {
	if _, err := a.Analytics.RollUp(ctx, time.Now()); err != nil {
		return fmt.Errorf("roll up usage: %w", err)
	}
	return nil
}
