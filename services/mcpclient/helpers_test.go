package mcpclient_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/secrets"
)

func TestMain(m *testing.M) {
	mcptest.Main()
	dbtest.Main(m)
}

// env is a registry and a running session manager on a fresh database.
type env struct {
	pool *pgxpool.Pool
	reg  *registry.Service
	mgr  *mcpclient.Manager
	opts mcpclient.Options
	// stop ends the manager (as a shutdown of Toolwarden does) and waits for it.
	stop func()
}

// fast are the manager settings for tests: short backoff and debounce.
func fast() *mcpclient.Options {
	return &mcpclient.Options{BackoffInitial: 50 * time.Millisecond, BackoffMax: 300 * time.Millisecond,
		Debounce: 150 * time.Millisecond, BreakerFailures: 50, BreakerCooldown: time.Second}
}

func start(t testing.TB, opts *mcpclient.Options) *env {
	t.Helper()
	return startWith(t, opts, newKeys(t))
}

// newKeys is a keyring of one new key.
func newKeys(t testing.TB) *secrets.Keyring {
	t.Helper()
	key, err := secrets.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	keys, err := secrets.NewKeyring(key)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// startWith is start with the keyring given.
func startWith(t testing.TB, opts *mcpclient.Options, keys *secrets.Keyring) *env {
	t.Helper()
	pool := dbtest.New(t)
	if opts == nil {
		opts = fast()
	}
	opts.InheritEnv = mcpclient.InheritedEnv(os.LookupEnv) // as cmd does
	// Confined as users' servers are, away from this test process's database.
	opts.Confine.Hide = append(opts.Confine.Hide, dbtest.ClusterDir(t))
	reg := registry.New(pool, keys, nil)
	mgr := mcpclient.New(reg, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = mgr.Run(ctx); close(done) }()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	// Run must have started before Refresh does anything.
	testkit.WaitFor(t, 5*time.Second, func() bool { return mgr.Running() }, "manager did not start")
	return &env{pool: pool, reg: reg, mgr: mgr, opts: *opts, stop: stop}
}

func (e *env) create(t testing.TB, sp registry.Spec) registry.Server {
	t.Helper()
	sv, err := e.reg.CreateServer(context.Background(), audit.System, sp)
	if err != nil {
		t.Fatalf("create server: %v", err)
	}
	e.mgr.Refresh(context.Background(), sv.ID)
	return sv
}

func (e *env) server(t testing.TB, id string) registry.Server {
	t.Helper()
	sv, err := e.reg.GetServer(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return sv
}

func (e *env) waitStatus(t testing.TB, id, status string) registry.Server {
	t.Helper()
	var sv registry.Server
	testkit.WaitFor(t, 30*time.Second, func() bool { sv = e.server(t, id); return sv.Status == status },
		"server never reached status "+status)
	return sv
}

// waitStatusEvent waits until server id was announced in status (a server.status
// event) and returns the last error it was announced with: a status the server leaves
// quickly (an error it reconnects from at once) may never be seen by polling the row.
func (e *env) waitStatusEvent(t testing.TB, id, status string) string {
	t.Helper()
	var lastError string
	testkit.WaitFor(t, 30*time.Second, func() bool {
		err := e.pool.QueryRow(context.Background(), `SELECT coalesce(payload->>'last_error', '') FROM events
			WHERE topic = $1 AND kind = 'server.status' AND payload->>'id' = $2 AND payload->>'status' = $3
			ORDER BY id DESC LIMIT 1`, registry.ServersTopic, id, status).Scan(&lastError)
		return err == nil
	}, "server was never announced in status "+status)
	return lastError
}

func (e *env) runs(t testing.TB, id string) []registry.DiscoveryRun {
	t.Helper()
	runs, err := e.reg.DiscoveryRuns(context.Background(), id, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return runs
}

// waitRuns waits for at least n discovery runs and returns them, oldest first.
func (e *env) waitRuns(t testing.TB, id string, n int) []registry.DiscoveryRun {
	t.Helper()
	var runs []registry.DiscoveryRun
	testkit.WaitFor(t, 30*time.Second, func() bool { runs = e.runs(t, id); return len(runs) >= n }, "discovery did not run")
	for i, j := 0, len(runs)-1; i < j; i, j = i+1, j-1 {
		runs[i], runs[j] = runs[j], runs[i]
	}
	return runs
}

// never checks that cond stays false for d: the only way to see that something
// (a second discovery) does not happen.
func never(t testing.TB, d time.Duration, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			t.Fatal(msg)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
