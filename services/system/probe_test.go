package system_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/system"
)

// The probes do not wait for the main pool: with all its connections busy (a replica
// under load), /healthz still says the database is up and /readyz can read the
// migration, so a load balancer does not drop the busiest replica.
func TestProbesWhileThePoolIsBusy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	var held []*pgxpool.Conn
	for range pool.Config().MaxConns {
		conn, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, conn)
	}
	defer func() {
		for _, c := range held {
			c.Release()
		}
	}()
	s := system.New(pool, false)
	defer s.Close()

	h := s.Health(ctx)
	if c := h.Components["database"]; c.Status != system.Up || !h.OK {
		t.Errorf("health with the pool busy: database %+v, ok %v; want up", c, h.OK)
	}
	// As /readyz asks it.
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if st, err := s.ProbeMigration(rctx); err != nil || !st.Current() {
		t.Errorf("migration with the pool busy: %+v, %v; want current", st, err)
	}
}
