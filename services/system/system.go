// Package system reports on the database the server runs on, for the dashboard and
// the readiness probe.
package system

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/singleflight"

	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/jobs"
)

// Service answers questions about the database.
type Service struct {
	pool     *pgxpool.Pool
	embedded bool
	cluster  *db.Cluster // the embedded cluster Health reports on (Supervised)
	bus      *events.Bus // the event bus Health reports on (WithBus)
	jobs     *jobs.Queue // the job queue Health reports on (WithJobs)

	// probes is the health and readiness probes' own small pool (made at the first
	// probe): with every connection of pool busy, a probe waiting for one would fail
	// and take a loaded replica for one whose database is down.
	mu     sync.Mutex
	probes *pgxpool.Pool
	closed bool
	// probe shares the probes' checks in flight (ProbeHealth, ProbeReadiness).
	probe singleflight.Group
}

// New is a Service on pool; embedded says whether it is the embedded cluster.
func New(pool *pgxpool.Pool, embedded bool) *Service {
	return &Service{pool: pool, embedded: embedded}
}

// probePool is the probes' pool; pool itself when that cannot be made or after Close.
func (s *Service) probePool(ctx context.Context) *pgxpool.Pool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.probes == nil && !s.closed {
		if p, err := db.SidePool(ctx, s.pool, "probes", 2); err == nil {
			s.probes = p
		}
	}
	if s.probes == nil {
		return s.pool
	}
	return s.probes
}

// Close releases the probes' connections. It is safe to call more than once.
func (s *Service) Close() {
	s.mu.Lock()
	p := s.probes
	s.probes, s.closed = nil, true
	s.mu.Unlock()
	if p != nil {
		p.Close()
	}
}

// Embedded reports whether the database is the embedded cluster.
func (s *Service) Embedded() bool { return s.embedded }

// ServerVersion is PostgreSQL's version, e.g. "17.2".
func (s *Service) ServerVersion(ctx context.Context) (string, error) {
	return db.ServerVersion(ctx, s.pool)
}

// Migration is where the schema stands against the migrations this binary carries,
// read through the main pool (the dashboard shows it).
func (s *Service) Migration(ctx context.Context) (db.MigrationStatus, error) {
	return db.CurrentMigration(ctx, s.pool)
}

// ProbeMigration is Migration through the probes' own connections, for the readiness
// probe: a busy pool, or pages asking, must not make it fail.
func (s *Service) ProbeMigration(ctx context.Context) (db.MigrationStatus, error) {
	return db.CurrentMigration(ctx, s.probePool(ctx))
}
