package executions

import "context"

// Get reads one execution (tests only: the service has no public reader yet).
func Get(ctx context.Context, s *Service, id string) (*Execution, error) {
	return s.get(ctx, s.pool, id)
}
