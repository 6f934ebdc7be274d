package executions

import "context"

// Get reads one execution (tests only: the service has no public reader yet).
func Get(ctx context.Context, s *Service, id string) (*Execution, error) {
	return s.get(ctx, s.pool, id)
}

// GiveUp is what the run job does on its last failed attempt (tests only).
func GiveUp(ctx context.Context, s *Service, id, phase string, cause error) error {
	return s.giveUp(ctx, id, phase, cause)
}
