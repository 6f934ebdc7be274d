package mcpclient

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/secrets"
)

// queryHook acts on the queries whose text contains sql, run under a context that
// carries it (withHook): start may replace the context a query runs with (one already
// cancelled fails it), end runs once the query is over. n counts such queries, from 1.
type queryHook struct {
	sql   string
	start func(n int, ctx context.Context) context.Context
	end   func(n int)
	n     atomic.Int32
}

type hookKey struct{}
type hookNKey struct{}

func withHook(ctx context.Context, h *queryHook) context.Context {
	return context.WithValue(ctx, hookKey{}, h)
}

// hookTracer runs the queryHook of each query's context: a real database whose reads
// fail or whose callers go away exactly where a test needs it.
type hookTracer struct{}

func (hookTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	h, _ := ctx.Value(hookKey{}).(*queryHook)
	if h == nil || !strings.Contains(d.SQL, h.sql) {
		return ctx
	}
	n := int(h.n.Add(1))
	ctx = context.WithValue(ctx, hookNKey{}, n)
	if h.start != nil {
		ctx = h.start(n, ctx)
	}
	return ctx
}

func (hookTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	h, _ := ctx.Value(hookKey{}).(*queryHook)
	n, ok := ctx.Value(hookNKey{}).(int)
	if h != nil && ok && h.end != nil {
		h.end(n)
	}
}

// cancelled is ctx already cancelled: a query run with it fails as a dropped database
// connection would, whatever its caller's context.
func cancelled(ctx context.Context) context.Context {
	c, cancel := context.WithCancelCause(ctx)
	cancel(errors.New("the database connection was lost"))
	return c
}

// traced is a registry on a pool that runs queryHooks, and a running manager over it.
type traced struct {
	pool *pgxpool.Pool
	reg  *registry.Service
	mgr  *Manager
	bus  *events.Bus // nil: none
}

// startTraced starts a manager (Run with runCtx, which may carry a queryHook) over a
// registry on a fresh database whose pool runs queryHooks; keys nil: a new keyring.
func startTraced(t *testing.T, runCtx context.Context, opts *Options, keys *secrets.Keyring) *traced {
	t.Helper()
	return startTracedBus(t, runCtx, opts, keys, 0)
}

// startTracedBus is startTraced with the manager following a bus on the database whose
// subscriptions queue busBuffer events (0: no bus).
func startTracedBus(t *testing.T, runCtx context.Context, opts *Options, keys *secrets.Keyring, busBuffer int) *traced {
	t.Helper()
	cfg := dbtest.New(t).Config()
	cfg.ConnConfig.Tracer = hookTracer{}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if keys == nil {
		keys = testKeys(t)
	}
	if opts == nil {
		opts = &Options{}
	}
	opts.BackoffInitial, opts.BackoffMax, opts.Debounce = 50*time.Millisecond, 300*time.Millisecond, 150*time.Millisecond
	opts.BreakerFailures, opts.BreakerCooldown = 50, time.Second
	var bus *events.Bus
	if busBuffer > 0 {
		bctx, bcancel := context.WithCancel(context.Background())
		bus = events.NewBus(pool, &events.BusOptions{Buffer: busBuffer})
		bdone := make(chan struct{})
		go func() { _ = bus.Run(bctx); close(bdone) }()
		t.Cleanup(func() { bcancel(); <-bdone })
		select {
		case <-bus.Ready():
		case <-time.After(10 * time.Second):
			t.Fatal("the bus never listened")
		}
		opts.Bus = bus
	}
	reg := registry.New(pool, keys, nil)
	mgr := New(reg, opts)
	ctx, cancel := context.WithCancel(runCtx)
	done := make(chan struct{})
	go func() { _ = mgr.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	testkit.WaitFor(t, 5*time.Second, mgr.Running, "manager did not start")
	return &traced{pool: pool, reg: reg, mgr: mgr, bus: bus}
}

func testKeys(t *testing.T) *secrets.Keyring {
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

// connected creates an enabled streamable HTTP server named name on hs and waits for its
// session.
func (tr *traced) connected(t *testing.T, name string, hs *mcptest.HTTPServer) registry.Server {
	t.Helper()
	sv, err := tr.reg.CreateServer(context.Background(), audit.System, registry.Spec{Name: name, Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	tr.mgr.Refresh(context.Background(), sv.ID)
	testkit.WaitFor(t, 30*time.Second, func() bool { _, err := tr.mgr.Session(sv.ID); return err == nil }, name+" never connected")
	return sv
}

// Refresh reads the server twice (GetServer, then Connection): a second read that fails
// (the database, or a caller whose context ended between the two) says nothing about the
// server, and leaves its session as a failed first read does, instead of ending it with
// nothing to start it again.
func TestRefreshKeepsSessionWhenReadFails(t *testing.T) {
	t.Parallel()
	tr := startTraced(t, context.Background(), nil, nil)
	sv := tr.connected(t, "steady", mcptest.StartHTTP(t, &mcptest.Options{Name: "steady"}))
	before, _ := tr.mgr.Session(sv.ID)

	// The database fails the second read.
	failing := &queryHook{sql: "/* registry.GetServer */", start: func(n int, ctx context.Context) context.Context {
		if n == 2 {
			return cancelled(ctx)
		}
		return ctx
	}}
	tr.mgr.Refresh(withHook(context.Background(), failing), sv.ID)
	if n := failing.n.Load(); n != 2 {
		t.Fatalf("Refresh read the server %d times, want 2 (the test no longer checks what it says)", n)
	}
	if cs, err := tr.mgr.Session(sv.ID); err != nil || cs != before {
		t.Fatalf("after a Refresh whose second read failed: session %p (%v), want the one before, %p", cs, err, before)
	}

	// The caller's context ends after the first read.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	leaving := &queryHook{sql: "/* registry.GetServer */", end: func(n int) {
		if n == 1 {
			cancel()
		}
	}}
	tr.mgr.Refresh(withHook(ctx, leaving), sv.ID)
	if ctx.Err() == nil {
		t.Fatal("the caller's context did not end (the test no longer checks what it says)")
	}
	if cs, err := tr.mgr.Session(sv.ID); err != nil || cs != before {
		t.Fatalf("after a Refresh whose caller went away between its reads: session %p (%v), want the one before, %p", cs, err, before)
	}
	if got := tr.mgr.Snapshot(sv.ID).Status; got != registry.StatusConnected {
		t.Fatalf("live status %q, want connected", got)
	}
}

// A server whose secrets this process cannot decrypt has no session, and its row says
// why even when the caller that asked went away meanwhile.
func TestRefreshRecordsUnreadableSecrets(t *testing.T) {
	t.Parallel()
	tr := startTraced(t, context.Background(), nil, nil)
	// Saved by a process with another key: this one cannot read the token.
	other := registry.New(tr.pool, testKeys(t), nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "sealed"})
	sv, err := other.CreateServer(context.Background(), audit.System, registry.Spec{Name: "sealed", Type: registry.TypeStreamableHTTP,
		URL: hs.URL(), AuthType: registry.AuthBearer, AuthToken: "sk-sealed", Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	leaving := &queryHook{sql: "/* registry.GetServer */", end: func(n int) {
		if n == 2 { // Connection has read the row; decrypting it fails
			cancel()
		}
	}}
	tr.mgr.Refresh(withHook(ctx, leaving), sv.ID)
	if ctx.Err() == nil {
		t.Fatal("the caller's context did not end (the test no longer checks what it says)")
	}
	if _, err := tr.mgr.Session(sv.ID); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("a server whose token cannot be decrypted: session error %v, want ErrNotConnected", err)
	}
	got, err := tr.reg.GetServer(context.Background(), sv.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != registry.StatusError || got.LastError == nil || !strings.Contains(*got.LastError, "cannot decrypt") {
		t.Fatalf("the server's row: status %q, error %v; want error, saying the token cannot be decrypted", got.Status, got.LastError)
	}
}

// The per-server locks are kept only while in use: ids that name no server (any text a
// request carries) and servers deleted leave nothing behind.
func TestServerLocksNotKept(t *testing.T) {
	t.Parallel()
	tr := startTraced(t, context.Background(), nil, nil)
	locks := func() int {
		tr.mgr.mu.Lock()
		defer tr.mgr.mu.Unlock()
		return len(tr.mgr.refreshing)
	}
	junk := strings.Repeat("x", 1<<20)
	for _, id := range []string{junk, strings.ToUpper(uuid.NewString()), uuid.NewString()} {
		if _, err := tr.mgr.Discover(context.Background(), id, audit.System); !errors.Is(err, registry.ErrNotFound) {
			t.Fatalf("Discover of an id that names no server: %v, want ErrNotFound", err)
		}
		tr.mgr.Refresh(context.Background(), id)
	}
	if n := locks(); n != 0 {
		t.Fatalf("%d server locks kept after requests for ids that name no server, want 0", n)
	}
	sv := tr.connected(t, "gone", mcptest.StartHTTP(t, &mcptest.Options{Name: "gone"}))
	if err := tr.mgr.Reconnect(context.Background(), sv.ID); err != nil {
		t.Fatal(err)
	}
	if err := tr.reg.DeleteServer(context.Background(), audit.System, sv.ID); err != nil {
		t.Fatal(err)
	}
	tr.mgr.Refresh(context.Background(), sv.ID)
	if _, err := tr.mgr.Discover(context.Background(), sv.ID, audit.System); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("Discover of a deleted server: %v, want ErrNotFound", err)
	}
	if n := locks(); n != 0 {
		t.Fatalf("%d server locks kept after the server was deleted, want 0", n)
	}
}

// A subscription the bus dropped (the manager fell behind) is made again and every
// server looked at; a look whose read fails is tried again until one succeeds: a server
// disabled while no event reached the manager has its session ended.
func TestReconcileTriedAgainAfterDrop(t *testing.T) {
	t.Parallel()
	var failing atomic.Int32
	hook := &queryHook{sql: "/* registry.EnabledServerIDs */", start: func(_ int, ctx context.Context) context.Context {
		if failing.Add(-1) >= 0 {
			return cancelled(ctx)
		}
		return ctx
	}}
	// One event queued fills the manager's subscription; the next drops it.
	tr := startTracedBus(t, withHook(context.Background(), hook), nil, nil, 1)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "up"})
	filler := tr.connected(t, "filler", hs)
	lost := tr.connected(t, "lost", hs)
	bg := context.Background()

	// In one transaction: lost disabled with no event of its own, and more events than
	// the subscription holds, delivered together, so the manager's loop (which hands each
	// server's work off at once) cannot take them as fast as they come, and is dropped.
	failing.Store(2)
	if err := pgx.BeginFunc(bg, tr.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(bg, `UPDATE mcp_servers SET enabled = false WHERE id = $1`, lost.ID); err != nil {
			return err
		}
		for range 50 {
			if _, err := events.ServerChanged.Publish(bg, tx, registry.ServersTopic, events.ServerStatus{ID: filler.ID, Name: filler.Name}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// Both failing reads are made (each a look at every server, the second after the
	// first failed) and then lost's session ends: only a look at every server finds it.
	testkit.WaitFor(t, 30*time.Second, func() bool { return tr.mgr.Snapshot(lost.ID).Status == "" && failing.Load() <= 0 },
		"the failed read of every server was not tried again (or the disabled server's session never ended)")
}

// Reconnect reads the server's settings before it ends the session: a read that fails
// then leaves the session as it was, and the caller is told. One that fails once the
// session is gone leaves none: the caller is told (no audited success), and the server's
// row says why, not "connected".
func TestReconnectWithAFailedRead(t *testing.T) {
	t.Parallel()
	tr := startTraced(t, context.Background(), nil, nil)
	sv := tr.connected(t, "blip", mcptest.StartHTTP(t, &mcptest.Options{Name: "blip"}))
	before, _ := tr.mgr.Session(sv.ID)
	failOn := func(at int) *queryHook {
		return &queryHook{sql: "/* registry.GetServer */", start: func(n int, ctx context.Context) context.Context {
			if n == at {
				return cancelled(ctx)
			}
			return ctx
		}}
	}
	// The second read (its settings, before the stop) fails.
	if err := tr.mgr.Reconnect(withHook(context.Background(), failOn(2)), sv.ID); err == nil {
		t.Fatal("a Reconnect whose read failed said nothing")
	}
	if cs, err := tr.mgr.Session(sv.ID); err != nil || cs != before {
		t.Fatalf("after a Reconnect whose read failed before the stop: session %p (%v), want the one before, %p", cs, err, before)
	}
	// The third (the restart's, after the stop) fails.
	if err := tr.mgr.Reconnect(withHook(context.Background(), failOn(3)), sv.ID); err == nil {
		t.Fatal("a Reconnect that left no session said nothing")
	}
	row, err := tr.reg.GetServer(context.Background(), sv.ID)
	if err != nil {
		t.Fatal(err)
	}
	if row.Status != registry.StatusError || row.LastError == nil || !strings.Contains(*row.LastError, "could not read the server's settings") {
		t.Fatalf("the row of a server left with no session: %q %v, want error saying why", row.Status, row.LastError)
	}
}

// A reconcile whose read of one server failed says so, so that Run tries it again: the
// server may have been disabled meanwhile, its session to end.
func TestReconcileReportsAFailedServerRead(t *testing.T) {
	t.Parallel()
	tr := startTraced(t, context.Background(), nil, nil)
	tr.connected(t, "one", mcptest.StartHTTP(t, &mcptest.Options{Name: "one"}))
	failing := &queryHook{sql: "/* registry.GetServer */", start: func(n int, ctx context.Context) context.Context {
		if n == 1 {
			return cancelled(ctx)
		}
		return ctx
	}}
	if err := tr.mgr.reconcileAll(withHook(context.Background(), failing)); err == nil {
		t.Fatal("a reconcile whose read of a server failed said nothing")
	}
	if err := tr.mgr.reconcileAll(context.Background()); err != nil {
		t.Fatalf("a reconcile whose reads all went through: %v", err)
	}
}
