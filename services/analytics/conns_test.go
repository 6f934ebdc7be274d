package analytics_test

import (
	"context"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/analytics"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// The reports running at once read on a quarter of the pool's connections between
// them, sized from pool_max_conns: on a pool of 8 two reports read on 2 at once and
// leave 6 to the tool calls (six a report, fixed, took 12: every connection). Alone on
// a pool of the default size (32) a report still reads its six parts side by side.
func TestReportsLeaveThePoolToCalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name                   string
		url                    string
		conns, reports, atOnce int
	}{
		{"pool of 8, two reports", " pool_max_conns=8", 2, 2, 2},
		{"default pool, one report", "", 8, 1, 6},
	} {
		t.Run(c.name, func(t *testing.T) {
			pool, err := db.NewPool(ctx, dbtest.NewURL(t)+c.url)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			svc := analytics.New(pool)
			if svc.ReportConns() != c.conns {
				t.Errorf("reports use %d of %d connections, want %d", svc.ReportConns(), pool.Config().MaxConns, c.conns)
			}
			// Each part says when it reads, and waits for release.
			reading, release := make(chan struct{}, 16), make(chan struct{})
			svc.HoldReading(func() { reading <- struct{}{}; <-release })
			done := make(chan error, c.reports)
			for range c.reports {
				go func() { _, err := svc.Report(ctx, analytics.LastDays(now, 30), now); done <- err }()
			}
			for i := range c.atOnce {
				select {
				case <-reading:
				case <-time.After(30 * time.Second):
					t.Fatalf("%d parts reading, want %d", i, c.atOnce)
				}
			}
			select {
			case <-reading:
				t.Errorf("more than %d parts of the reports reading at once on a pool of %d", c.atOnce, pool.Config().MaxConns)
			case <-time.After(300 * time.Millisecond):
			}
			close(release)
			for range c.reports {
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
