package system

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// A flood of anonymous probes does not cost one check per request: the probes that
// arrive together wait for the check in flight and share its report. Checks are counted
// as acquisitions from the probes' pool.
func TestProbesShareTheirChecks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	s := New(pool, false)
	defer s.Close()
	acquired := func() int64 { return s.probePool(ctx).Stat().AcquireCount() }

	// What one real check of each costs, run uncached.
	n0 := acquired()
	s.Health(ctx)
	n1 := acquired()
	if _, err := s.ProbeMigration(ctx); err != nil {
		t.Fatal(err)
	}
	perHealth, perReady := n1-n0, acquired()-n1
	if perHealth < 1 || perReady < 1 {
		t.Fatalf("a check acquired nothing from the probes' pool (health %d, readiness %d)", perHealth, perReady)
	}

	const probes = 200
	before := acquired()
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range probes {
		wg.Go(func() {
			<-start
			if h := s.ProbeHealth(ctx); !h.OK {
				t.Errorf("health: %+v, want ok", h)
			}
			if st, err := s.ProbeReadiness(ctx); err != nil || !st.Current() {
				t.Errorf("readiness: %+v, %v; want current", st, err)
			}
		})
	}
	close(start)
	wg.Wait()
	// Released together, most wait for a check another started (one per request was
	// 400 acquisitions); half as many checks as probes is far past what sharing allows.
	got, limit := acquired()-before, int64(probes/2)*(perHealth+perReady)
	if got > limit {
		t.Fatalf("%d probes of each kind acquired %d connections from the probes' pool; want at most %d",
			probes, got, limit)
	}
}

// A finished check is not reused: the database going away shows in the probes, and so
// does its return.
func TestProbesSeeTheDatabaseGoAndComeBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	name := pool.Config().ConnConfig.Database
	admin, err := pgx.Connect(ctx, dbtest.Cluster(t).URLFor("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	allow := func(on bool) {
		t.Helper()
		if _, err := admin.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s ALLOW_CONNECTIONS %t", pgx.Identifier{name}.Sanitize(), on)); err != nil {
			t.Fatal(err)
		}
	}
	s := New(pool, false)
	defer s.Close()
	database := func() string { return s.ProbeHealth(ctx).Components["database"].Status }
	ready := func() bool { _, err := s.ProbeReadiness(ctx); return err == nil }

	if got := database(); got != Up || !ready() {
		t.Fatalf("before: database %q, ready %v; want up and ready", got, ready())
	}
	// Down: no new connections, and those open are ended.
	allow(false)
	defer allow(true)
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, name); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 30*time.Second, func() bool {
		h := s.ProbeHealth(ctx)
		return h.Components["database"].Status == Down && !h.OK && h.Status == "degraded" && !ready()
	}, "the probes never said the database was down")

	allow(true)
	testkit.WaitFor(t, 30*time.Second, func() bool {
		return database() == Up && ready()
	}, "the probes never said the database was back")
}

// Probes that share a database check each read what the process knows of its other
// components when they answer, into their own report: a shared report carried states
// read before a joiner arrived (up to the check's second), in one map for all.
func TestProbesSharingACheckGetTheirOwnReports(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := New(dbtest.New(t), false)
	defer s.Close()
	// The probes' connections held: the shared check waits for one.
	probes := s.probePool(ctx)
	var held []interface{ Release() }
	for range probes.Config().MaxConns {
		c, err := probes.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	reports := make([]Health, 4)
	var wg sync.WaitGroup
	for i := range reports {
		wg.Go(func() { reports[i] = s.ProbeHealth(ctx) })
	}
	// The first check waits for a connection; the others join it (the check gives up
	// waiting after a second).
	time.Sleep(300 * time.Millisecond)
	for _, c := range held {
		c.Release()
	}
	wg.Wait()
	seen := map[uintptr]bool{}
	for _, h := range reports {
		p := reflect.ValueOf(h.Components).Pointer()
		if seen[p] {
			t.Fatal("two probes got one report's components: a joiner's states were read before it asked")
		}
		seen[p] = true
	}
}
