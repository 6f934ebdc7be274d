package usage

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Service reads tools' usage for the tool page.
type Service struct{ pool *pgxpool.Pool }

// New is a Service on pool.
func New(pool *pgxpool.Pool) *Service { return &Service{pool: pool} }

// Summary is Summary on the service's database.
func (s *Service) Summary(ctx context.Context, toolID string, from, to time.Time) (Stats, error) {
	return Summary(ctx, s.pool, toolID, from, to)
}

// Series is Series on the service's database.
func (s *Service) Series(ctx context.Context, toolID string, from, to time.Time, buckets int) ([]Bucket, error) {
	return Series(ctx, s.pool, toolID, from, to, buckets)
}

// RecentOf is usage.RecentOf on the service's pool.
func (s *Service) RecentOf(ctx context.Context, toolID string, userID *string, beforeID int64, limit int) ([]Log, int64, error) {
	return RecentOf(ctx, s.pool, toolID, userID, beforeID, limit)
}
