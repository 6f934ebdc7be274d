// Package system reports on the database the server runs on, for the dashboard and
// the readiness probe.
package system

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/events"
)

// Service answers questions about the database.
type Service struct {
	pool     *pgxpool.Pool
	embedded bool
	cluster  *db.Cluster // the embedded cluster Health reports on (Supervised)
	bus      *events.Bus // the event bus Health reports on (WithBus)
}

// New is a Service on pool; embedded says whether it is the embedded cluster.
func New(pool *pgxpool.Pool, embedded bool) *Service {
	return &Service{pool: pool, embedded: embedded}
}

// Embedded reports whether the database is the embedded cluster.
func (s *Service) Embedded() bool { return s.embedded }

// ServerVersion is PostgreSQL's version, e.g. "17.2".
func (s *Service) ServerVersion(ctx context.Context) (string, error) {
	return db.ServerVersion(ctx, s.pool)
}

// Migration is where the schema stands against the migrations this binary carries.
func (s *Service) Migration(ctx context.Context) (db.MigrationStatus, error) {
	return db.CurrentMigration(ctx, s.pool)
}
