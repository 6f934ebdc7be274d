package mcpclient_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/secrets"
)

// A person's Reconnect reaches every replica: each runs its own copy of a stdio server,
// and the one that answered the request is not the only one whose copy may hang. Two
// managers on one database, each with its own bus, stand for two replicas; each
// session's process writes "started pid" on its standard error once per start. The
// replica that was asked restarts its process once, not again on its own event.
func TestReconnectReachesEveryReplica(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	key, err := secrets.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	keys, err := secrets.NewKeyring(key)
	if err != nil {
		t.Fatal(err)
	}
	reg := registry.New(pool, keys, nil)
	a, b := busManager(t, pool, reg, "replica-a"), busManager(t, pool, reg, "replica-b")
	spec, _ := stdioSpec(t, "hangs", &mcptest.Options{Name: "hangs"})
	sv, err := reg.CreateServer(context.Background(), audit.System, spec)
	if err != nil {
		t.Fatal(err)
	}
	starts := func(m *mcpclient.Manager) int {
		n := 0
		for _, line := range m.Snapshot(sv.ID).Stderr {
			if strings.Contains(line, "mcptest: hangs started pid") {
				n++
			}
		}
		return n
	}
	for _, m := range []*mcpclient.Manager{a, b} {
		m.Refresh(context.Background(), sv.ID)
		testkit.WaitFor(t, 30*time.Second, func() bool { return starts(m) == 1 && m.Snapshot(sv.ID).Status == registry.StatusConnected },
			"a replica's session never opened")
	}

	// As the handlers do on the replica the request reached.
	if _, err := a.ReconnectAsked(context.Background(), audit.System, sv.ID); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 30*time.Second, func() bool { return starts(b) == 2 },
		"the other replica's process was never started again")
	testkit.WaitFor(t, 30*time.Second, func() bool { return starts(a) >= 2 }, "the asked replica's process was never started again")
	// b heard the event; a, which heard it too, must not start its process a third time.
	never(t, time.Second, func() bool { return starts(a) > 2 }, "the asked replica restarted its process again on its own event")
}

// busManager is a running manager of the servers of reg that hears the registry's
// events on a bus of its own, as a replica's does; replica names it ("" for none).
func busManager(t *testing.T, pool *pgxpool.Pool, reg *registry.Service, replica string) *mcpclient.Manager {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	bus := events.NewBus(pool, nil)
	busDone := make(chan struct{})
	go func() { _ = bus.Run(ctx); close(busDone) }()
	opts := fast()
	opts.Bus, opts.Replica = bus, replica
	opts.InheritEnv = mcpclient.InheritedEnv(os.LookupEnv)
	opts.Confine.Hide = append(opts.Confine.Hide, dbtest.ClusterDir(t))
	mgr := mcpclient.New(reg, opts)
	done := make(chan struct{})
	go func() { _ = mgr.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; <-busDone })
	testkit.WaitFor(t, 5*time.Second, func() bool { return mgr.Running() }, "manager did not start")
	select {
	case <-bus.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("the bus never listened")
	}
	return mgr
}
