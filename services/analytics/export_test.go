package analytics

import (
	"context"
	"time"
)

// MaxRollAgain is maxRollAgain, for the tests.
const MaxRollAgain = maxRollAgain

// RollAgain is rollAgain for the tests: it returns how many days this call rolled.
func (s *Service) RollAgain(ctx context.Context, stale []time.Time) (int, error) {
	_, n, err := s.rollAgain(ctx, stale)
	return n, err
}

// RollDay is rollDay, for the benchmark.
func (s *Service) RollDay(ctx context.Context, d time.Time) error { return s.rollDay(ctx, d) }

// HoldAdmitted makes f run in every report ReportBy admits, before it reads; set it
// before the first report.
func (s *Service) HoldAdmitted(f func()) { s.admitted = f }

// OnWaiting makes f run when a report finds no slot free; set it before the first report.
func (s *Service) OnWaiting(f func()) { s.waiting = f }

// HoldReading makes f run in every part of a report once it has its connection's token,
// before it reads; set it before the first report.
func (s *Service) HoldReading(f func()) { s.reading = f }

// ReportConns is how many connections the service's reports use at once.
func (s *Service) ReportConns() int { return cap(s.conns) }

// MovedDays is movedDays (the job's days to roll again), read through q.
func MovedDays(ctx context.Context, q querier, since time.Time) ([]time.Time, error) {
	return movedDays(ctx, q, since)
}
