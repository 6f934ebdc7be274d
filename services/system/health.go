package system

import (
	"context"
	"time"

	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/jobs"
)

// Component states in a Health report.
const (
	Up   = "up"
	Down = "down"
)

// Component is the state of one part /healthz reports on.
type Component struct {
	Status string `json:"status"` // up or down
	// Since is when an embedded cluster or the event bus last came up or went down.
	Since *time.Time `json:"since,omitempty"`
	// Restarts counts the embedded cluster's restarts since the process started.
	Restarts *int `json:"restarts,omitempty"`
	// Problem says what is wrong, in words safe for anonymous callers (no paths, no
	// role names: the detail goes to the log).
	Problem string `json:"problem,omitempty"`
}

// Health is the state of the process's dependencies: OK when all are up.
type Health struct {
	OK         bool                 `json:"-"`
	Status     string               `json:"status"` // ok, or degraded when a component is down
	Components map[string]Component `json:"components"`
	Down       []string             `json:"down,omitempty"` // the names of the components that are down
}

// Supervised makes Health report on the embedded cluster c (nil: an external database).
func (s *Service) Supervised(c *db.Cluster) *Service {
	s.cluster = c
	return s
}

// WithBus makes Health report on the event bus b: whether it listens for the events of
// other replicas (nil: not reported).
func (s *Service) WithBus(b *events.Bus) *Service {
	s.bus = b
	return s
}

// WithJobs makes Health report on the job queue q: whether it works jobs in this
// process (not called: not reported).
func (s *Service) WithJobs(q *jobs.Queue) *Service {
	s.jobs = q
	return s
}

// Health checks the database (a round trip, at most a second, through the probes' own
// connections) and, when embedded, what the cluster's supervisor knows, and whether the
// event bus listens.
func (s *Service) Health(ctx context.Context) Health {
	return s.health(s.pingDatabase(ctx))
}

// pingDatabase is Health's database check: whether it answers within a second.
func (s *Service) pingDatabase(ctx context.Context) bool {
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return s.probePool(pctx).Ping(pctx) == nil
}

// health is the report with the database's check done (dbUp): the other components are
// what this process knows now, read after that check, so a report is as fresh as its
// answer even when the check was shared.
func (s *Service) health(dbUp bool) Health {
	h := Health{OK: true, Status: "ok", Components: map[string]Component{}}
	add := func(name string, c Component) {
		h.Components[name] = c
		if c.Status != Up {
			h.OK, h.Status = false, "degraded"
			h.Down = append(h.Down, name)
		}
	}
	if s.cluster != nil {
		st := s.cluster.State()
		c := Component{Status: Up, Since: &st.Since, Restarts: &st.Restarts}
		if !st.Up {
			c.Status, c.Problem = Down, "the embedded PostgreSQL is not running; it is being restarted"
		}
		add("embedded_postgres", c)
	}
	if s.bus != nil {
		// A bus that does not listen still delivers this replica's changes (events.Local),
		// but the pages it serves miss the other replicas' until it is back.
		on, since := s.bus.Listening()
		c := Component{Status: Up, Since: &since}
		if !on {
			c.Status, c.Problem = Down, "live updates from other replicas are paused: the event listener is not connected"
		}
		add("event_bus", c)
	}
	if s.jobs != nil {
		// Other replicas may still work the queued jobs; alone, nothing does.
		on, since := s.jobs.Started()
		c := Component{Status: Up, Since: &since}
		if !on {
			c.Status, c.Problem = Down, "this replica works no queued jobs: the job queue has not started (its database did not answer); it keeps trying"
		}
		add("job_queue", c)
	}
	if dbUp {
		add("database", Component{Status: Up})
	} else {
		add("database", Component{Status: Down, Problem: "the database does not answer"})
	}
	return h
}

// ProbeHealth is Health for /healthz, its database check shared by the probes that ask
// while it runs: a flood of anonymous probes runs one check at a time, on one of the
// probes' two connections, and cannot queue the orchestrator's probe behind its own (it
// joins the check in flight). A check is never reused once it ended: an outage of a
// moment shows. What the process knows of its other components is read per probe.
func (s *Service) ProbeHealth(ctx context.Context) Health {
	// The check runs for every waiting probe, so the first one's leaving must not end it.
	up, _, _ := s.probe.Do("health", func() (any, error) { return s.pingDatabase(context.WithoutCancel(ctx)), nil })
	return s.health(up.(bool))
}

// ProbeReadiness is ProbeMigration for /readyz, within two seconds, shared as
// ProbeHealth's check is.
func (s *Service) ProbeReadiness(ctx context.Context) (db.MigrationStatus, error) {
	r, _, _ := s.probe.Do("ready", func() (any, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		st, err := s.ProbeMigration(ctx)
		return readiness{st, err}, nil
	})
	return r.(readiness).st, r.(readiness).err
}

type readiness struct {
	st  db.MigrationStatus
	err error
}
