package app

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/toolwarden/toolwarden/services/system"
)

// What /healthz learns from the App beyond the system service's checks: whether this
// replica's heartbeats reach the database, and which components panicked.
//
// A component marked Restart (the loops of independent passes: audit-search,
// executions' sweep, disabled-users, terminals, checkpoints) is run again after a
// panic: serve going down with it would end every terminal, stdio server and call of
// the replica for one failed pass. The others (database, bus, replicas, router, mcp,
// jobs) are crash-only: their Run holds what a second Run cannot take over (the bus
// announces it listens once, the router's recorder and the sessions' states end with
// their Run), so a panic there ends serve and its supervisor starts it again.

// restartFirst is the pause before a component that panicked runs again, doubling up
// to restartMax; a run that lasted restartMax starts the doubling over.
var restartFirst, restartMax = time.Second, time.Minute

// componentHealth is what Health reports of the components: those that panicked, and
// the heartbeat's start.
type componentHealth struct {
	mu      sync.Mutex
	crashed map[string]system.Component // by component name, once it panicked
	beating time.Time                   // when the replicas component started; zero when it does not run
}

// runComponent runs c.Run until it returns, and again after a panic when c.Restart.
func (a *App) runComponent(ctx context.Context, c Component) error {
	pause := restartFirst
	for {
		began := time.Now()
		err, p, stack := runRecovering(ctx, c)
		if stack == nil {
			return err
		}
		if time.Since(began) >= restartMax {
			pause = restartFirst
		}
		a.log.Error("component panicked; it runs again after a pause", "component", c.Name, "panic", fmt.Sprint(p),
			"stack", string(stack), "in", pause)
		a.health.set(c.Name, func(h *system.Component) {
			now := time.Now()
			h.Status, h.Since = system.Down, &now
			h.Problem = fmt.Sprintf("it failed (a panic, in the log) and runs again in %s", pause)
		})
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(pause):
		}
		a.health.set(c.Name, func(h *system.Component) {
			now, n := time.Now(), 1
			if h.Restarts != nil {
				n = *h.Restarts + 1
			}
			h.Status, h.Since, h.Restarts, h.Problem = system.Up, &now, &n, ""
		})
		pause = min(pause*2, restartMax)
	}
}

// runRecovering is c.Run(ctx), its panic recovered (p, with the stack) when c.Restart.
func runRecovering(ctx context.Context, c Component) (err error, p any, stack []byte) {
	if c.Restart {
		defer func() {
			if v := recover(); v != nil {
				p, stack = v, debug.Stack()
			}
		}()
	}
	return c.Run(ctx), nil, nil
}

func (h *componentHealth) set(name string, f func(*system.Component)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.crashed == nil {
		h.crashed = map[string]system.Component{}
	}
	c := h.crashed[name]
	f(&c)
	h.crashed[name] = c
}

// beat is the replicas component: the heartbeat, with its start noted for Health.
func (a *App) beat(ctx context.Context) error {
	a.health.mu.Lock()
	a.health.beating = time.Now()
	a.health.mu.Unlock()
	defer func() {
		a.health.mu.Lock()
		a.health.beating = time.Time{}
		a.health.mu.Unlock()
	}()
	return a.Replicas.Run(ctx)
}

// Health is what /healthz reports of this App beyond the system service's checks, by
// name: replica_heartbeat while the replicas component runs, and every component that
// panicked (its name with underscores), down until it runs again, then up with its
// restarts counted.
//
// replica_heartbeat is down when this replica's heartbeats have not reached the database
// steadily (replicas.Service.Steady: the last one returned more than two beats ago, or
// one failed within the time after which replicas are taken for dead): the probes'
// own connections may work meanwhile, and the other replicas take this one for stopped
// (they end its terminals' records and stop forwarding to it) while it serves. Not
// judged until that time has passed since the heartbeat started.
func (a *App) Health() map[string]system.Component {
	a.health.mu.Lock()
	defer a.health.mu.Unlock()
	out := make(map[string]system.Component, len(a.health.crashed)+1)
	for name, c := range a.health.crashed {
		out[strings.ReplaceAll(name, "-", "_")] = c
	}
	if since := a.health.beating; !since.IsZero() && a.Replicas != nil {
		c := system.Component{Status: system.Up}
		grace := a.Replicas.DeadAfter() + a.Replicas.Every()
		if time.Since(since) > grace && !a.Replicas.Steady() {
			c.Status = system.Down
			c.Problem = "this replica's heartbeats are not reaching the database: other replicas may take it for stopped " +
				"(ending its terminals' records, no longer forwarding to it)"
		}
		out["replica_heartbeat"] = c
	}
	return out
}
