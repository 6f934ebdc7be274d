package router_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/internal/confine"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/secrets"
	"github.com/toolwarden/toolwarden/services/tools"
)

func TestMain(m *testing.M) {
	mcptest.Main()
	dbtest.Main(m)
}

var admin = audit.Actor{Kind: audit.ActorUser, Name: "admin"}

// env is a database, a running session manager, bus and router.
type env struct {
	t     testing.TB
	ctx   context.Context
	pool  *pgxpool.Pool
	reg   *registry.Service
	mgr   *mcpclient.Manager
	tools *tools.Service
	r     *router.Router
	auth  *auth.Service
}

func start(t testing.TB, opts *router.Options) *env {
	t.Helper()
	return startWith(t, opts, nil)
}

// startWith is start with the session manager's options changed by mopts.
func startWith(t testing.TB, opts *router.Options, mopts func(*mcpclient.Options)) *env {
	t.Helper()
	pool := dbtest.New(t)
	key, err := secrets.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	keys, err := secrets.NewKeyring(key)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	bus := events.NewBus(pool, nil)
	busDone := make(chan struct{})
	go func() { _ = bus.Run(ctx); close(busDone) }()
	<-bus.Ready()
	reg := registry.New(pool, keys, nil)
	mo := &mcpclient.Options{BackoffInitial: 50 * time.Millisecond, BackoffMax: 300 * time.Millisecond,
		Debounce: 50 * time.Millisecond, BreakerFailures: 50, BreakerCooldown: time.Second, InheritEnv: mcpclient.InheritedEnv(os.LookupEnv),
		// Confined as users' servers are, away from this test process's database.
		Confine: confine.Spec{Hide: []string{dbtest.ClusterDir(t)}}}
	if mopts != nil {
		mopts(mo)
	}
	mgr := mcpclient.New(reg, mo)
	mgrDone := make(chan struct{})
	go func() { _ = mgr.Run(ctx); close(mgrDone) }()
	ts := tools.New(pool, keys, nil)
	if opts == nil {
		opts = &router.Options{}
	}
	opts.Bus = bus
	r := router.New(pool, ts, mgr, opts)
	rDone := make(chan struct{})
	go func() { _ = r.Run(ctx); close(rDone) }()
	t.Cleanup(func() { cancel(); <-rDone; <-mgrDone; <-busDone })
	waitFor(t, 5*time.Second, mgr.Running, "manager did not start")
	e := &env{t: t, ctx: context.Background(), pool: pool, reg: reg, mgr: mgr, tools: ts, r: r, auth: auth.New(pool, nil)}
	waitFor(t, 5*time.Second, r.Running, "router did not start")
	return e
}

// server registers an mcptest server over streamable HTTP, waits for its tools and
// enables the named ones.
func (e *env) server(name string, trusted bool, enable ...string) *mcptest.HTTPServer {
	e.t.Helper()
	hs := mcptest.StartHTTP(e.t, &mcptest.Options{Name: name})
	e.register(registry.Spec{Name: name, Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true, Trusted: trusted}, enable...)
	return hs
}

func (e *env) register(spec registry.Spec, enable ...string) registry.Server {
	e.t.Helper()
	sv, err := e.reg.CreateServer(e.ctx, audit.System, spec)
	if err != nil {
		e.t.Fatalf("create server: %v", err)
	}
	e.mgr.Refresh(e.ctx, sv.ID)
	waitFor(e.t, 30*time.Second, func() bool {
		got, err := e.reg.GetServer(e.ctx, sv.ID)
		return err == nil && got.Status == registry.StatusConnected && got.ToolCount > 0
	}, "server "+spec.Name+" never connected with tools")
	for _, n := range enable {
		e.enable(spec.Name + "__" + n)
	}
	return sv
}

// tool returns a tool by qualified name, waiting for discovery to store it.
func (e *env) tool(qualified string) tools.Target {
	e.t.Helper()
	var tg tools.Target
	waitFor(e.t, 30*time.Second, func() bool {
		var err error
		tg, err = e.tools.Target(e.ctx, qualified)
		return err == nil && tg.Status != "discovered" && tg.Status != "validating"
	}, "tool "+qualified+" never validated")
	return tg
}

func (e *env) enable(qualified string) tools.Target {
	e.t.Helper()
	tg := e.tool(qualified)
	outs, err := e.tools.SetEnabled(e.ctx, admin, []string{tg.ID}, true, "test", true)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := outs[0].Err(); err != nil {
		e.t.Fatalf("enable %s: %v", qualified, err)
	}
	return e.tool(qualified)
}

// call makes a call as an admin through the test panel with every approval given.
func (e *env) call(tool, args string) (*router.Result, error) {
	return e.r.Call(e.ctx, router.Call{Tool: tool, Arguments: json.RawMessage(args), Actor: admin, Role: auth.RoleAdmin,
		Source: router.SourceTestPanel, Approval: router.Approval{Confirmed: true, Phrase: tool}})
}

func codeOf(err error) string {
	var re *router.Error
	if errors.As(err, &re) {
		return re.Code
	}
	if err == nil {
		return ""
	}
	return "other: " + err.Error()
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, d time.Duration, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", d, msg)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (e *env) count(sql string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(e.ctx, sql, args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func (e *env) flush() {
	e.t.Helper()
	if err := e.r.Flush(e.ctx); err != nil {
		e.t.Fatal(err)
	}
}
