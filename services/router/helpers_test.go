package router_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/app"
	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/router"
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
	app   *apptest.App
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
	a := apptest.Start(t, &apptest.Options{Config: func(c *app.Config) {
		c.MCP = mcpclient.Options{BackoffInitial: 50 * time.Millisecond, BackoffMax: 300 * time.Millisecond,
			Debounce: 50 * time.Millisecond, BreakerFailures: 50, BreakerCooldown: time.Second}
		if mopts != nil {
			mopts(&c.MCP)
		}
		if opts != nil {
			c.Router = *opts
		}
	}})
	return &env{t: t, app: a, ctx: context.Background(), pool: a.Pool, reg: a.Registry, mgr: a.MCP, tools: a.Tools, r: a.Router, auth: a.Auth}
}

// server registers an mcptest server over streamable HTTP, waits for its tools and
// enables the named ones.
func (e *env) server(name string, trusted bool, enable ...string) *mcptest.HTTPServer {
	e.t.Helper()
	return e.app.LiveServer(e.t, name, trusted, enable...)
}

func (e *env) register(spec registry.Spec, enable ...string) registry.Server {
	e.t.Helper()
	return e.app.RegisterServer(e.t, spec, enable...)
}

// tool returns a tool by qualified name, waiting for discovery to store it.
func (e *env) tool(qualified string) tools.Target {
	e.t.Helper()
	return e.app.Settled(e.t, qualified)
}

func (e *env) enable(qualified string) tools.Target {
	e.t.Helper()
	return e.app.Enable(e.t, qualified)
}

// call makes a call as an admin through the test panel with every approval given.
func (e *env) call(tool, args string) (*router.Result, error) {
	return e.callCtx(e.ctx, tool, args)
}

// callCtx is call with the caller's context ctx (one that gives up, or times out).
func (e *env) callCtx(ctx context.Context, tool, args string) (*router.Result, error) {
	return e.r.Call(ctx, router.Call{Tool: tool, Arguments: json.RawMessage(args), Actor: admin, Role: auth.RoleAdmin,
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

func (e *env) count(sql string, args ...any) int {
	e.t.Helper()
	return testkit.Count(e.t, e.pool, sql, args...)
}

func (e *env) flush() {
	e.t.Helper()
	if err := e.r.Flush(e.ctx); err != nil {
		e.t.Fatal(err)
	}
}
