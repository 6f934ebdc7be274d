// Package app is Toolwarden's composition root: New builds every part of a server
// (database, event bus, keyring, job queue, services, handlers, web) from a Config,
// and Run starts the long-lived ones in dependency order and stops them in reverse.
// `toolwarden serve` and the tests (package apptest) build the same App, so a test
// server is wired exactly like production. docs/architecture.md describes the parts.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/handlers"
	"github.com/toolwarden/toolwarden/internal/egress"
	"github.com/toolwarden/toolwarden/services/analytics"
	"github.com/toolwarden/toolwarden/services/assistant"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/builtin"
	"github.com/toolwarden/toolwarden/services/configcode"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/decide"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/gateway"
	"github.com/toolwarden/toolwarden/services/grants"
	"github.com/toolwarden/toolwarden/services/jobs"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/memory"
	"github.com/toolwarden/toolwarden/services/planner"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/replicas"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/secrets"
	"github.com/toolwarden/toolwarden/services/system"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/usage"
	"github.com/toolwarden/toolwarden/web"
)

// Config is everything a server is built from. cmd fills it from flags and the
// environment; tests from their options. Zero values take the services' defaults.
type Config struct {
	// Pool is an open database (tests); when nil, DB is opened (and closed by Stop).
	Pool *pgxpool.Pool
	DB   db.Config
	// Keys encrypt secrets and seal approvals. Required.
	Keys *secrets.Keyring
	// Logger receives everything the server logs. Default: discarded.
	Logger    *slog.Logger
	Version   string
	StartedAt time.Time
	// AdminPassword is the first administrator's password on a fresh database; empty:
	// a random one. Either is App.FirstAdminPassword (Start creates the admin).
	AdminPassword  string
	SecureCookies  bool
	TrustedProxies []netip.Prefix
	// Egress is the policy for the addresses server URLs may reach (--egress-allow,
	// --egress-deny); nil refuses only the cloud metadata endpoints.
	Egress *egress.Policy
	// Planner turns prompts into plans. Default: the rule-based planner.
	Planner planner.Planner

	// The services' own settings; the app sets their logger, bus, Local and collaborators.
	Auth       auth.Options
	MCP        mcpclient.Options
	Router     router.Options
	Executions executions.Options
	// Grants: the clock of grants and user_collaboration (tests move it).
	Grants  grants.Options
	Denials audit.DenialOptions
	// Checkpoints: where and how often the audit chain's head is signed (no Dir or no
	// Every: never), and where the audit page's and API's check finds the newest one.
	Checkpoints CheckpointConfig
	Gateway     gateway.Options
	// BuiltinRoot holds the built-in tools' workspaces (--builtin-root); "" leaves the
	// built-in server out (Toolwarden's serve always sets it).
	BuiltinRoot string
	// SnapshotBudget bounds the built-in tools' snapshot store (--snapshot-budget); 0:
	// builtin.DefaultSnapshotBudget.
	SnapshotBudget int64
	// TerminalEnv is added to the built-in terminals' environment
	// (builtin.TerminalOptions.Env).
	TerminalEnv []string
	// TerminalsPerPerson, TerminalsMax and TerminalIdle are the built-in terminals'
	// limits (builtin.TerminalOptions MaxPerOwner, MaxRunning and IdleTimeout): 0 is
	// the default, a negative TerminalIdle never ends an idle session.
	TerminalsPerPerson int
	TerminalsMax       int
	TerminalIdle       time.Duration
	// Replica names this process among the serve processes on one database and says
	// where the others reach it (services/replicas).
	Replica replicas.Options
	// SessionRecheck is how often an open websocket checks its person's session again
	// (0: every 30 s; tests shorten it).
	SessionRecheck time.Duration
	// SocketsPerPerson bounds one person's open websockets (0: 64; negative: none, for
	// benchmarks).
	SocketsPerPerson int
	// SocketsPerProcess bounds all open websockets together (0: 10,000; negative: none).
	SocketsPerProcess int
	// BodyReadTimeout bounds reading a request's body (0: a minute; tests shorten it).
	BodyReadTimeout time.Duration
	// DownloadStall bounds how long a download waits for its client to read on (0: a
	// minute; tests shorten it).
	DownloadStall time.Duration
	// Prune is how often old sessions, health checks and events are removed.
	// Default 5 minutes.
	Prune time.Duration
	// Skip names components Start leaves out (tests that drive one by hand, e.g.
	// "jobs" to keep executions from running).
	Skip []string
}

// App is a built server: its parts, and the components Start runs.
type App struct {
	cfg Config
	log *slog.Logger

	// DB is the database New opened (nil when Config.Pool was given).
	DB         *db.DB
	Pool       *pgxpool.Pool
	Keys       *secrets.Keyring
	Local      *events.Local // Bus's; every service begins its transactions on it
	Bus        *events.Bus
	Jobs       *jobs.Queue
	Auth       *auth.Service
	Registry   *registry.Service
	MCP        *mcpclient.Manager
	Tools      *tools.Service
	Decide     *decide.Service
	Router     *router.Router
	Executions *executions.Service
	// ConfigCode exports and imports the whole configuration (services/configcode).
	ConfigCode *configcode.Service
	Denials    *audit.Denials
	Gateway    *gateway.Gateway
	Builtin    *builtin.Server // nil without Config.BuiltinRoot
	// builtinServerID is the registry's id of the built-in server ("" when another
	// server kept the name builtin).
	builtinServerID string
	// Terminals are the built-in terminal_operations' sessions (nil without Builtin).
	Terminals *builtin.Terminals
	// runs are the test panel's runs on this replica: Stop cancels those still running
	// and lets go of the results kept.
	runs *router.Runs
	// terminalOpHops bounds, per person, the operations sent to terminals of other
	// replicas: each takes one of the nonces the owner remembers for a minute, past
	// which it refuses every replica's hops, and --rate-limit may not bound the calls.
	terminalOpHops handlers.PersonLimits
	Grants         *grants.Service
	// Replicas is this process's record among the replicas sharing the database.
	Replicas  *replicas.Service
	beats     *pgxpool.Pool   // its heartbeats' own connections
	system    *system.Service // its health probes have connections of their own
	Analytics *analytics.Service
	// Assistant manages Toolwarden in plain language (/assistant).
	Assistant *assistant.Service
	// AuditLog reads the audit log for people and checks its chain on request.
	AuditLog *audit.Log
	Memory   *memory.Service
	Web      *web.Server
	// FirstAdminPassword is the password of the administrator Start created on a fresh
	// database ("" when there was one already).
	FirstAdminPassword string

	components []Component
	mu         sync.Mutex
	running    []*runningComponent
	health     componentHealth // what Health reports of the components (app/health.go)
}

// Scope says where a component runs when several replicas share one database.
type Scope int

const (
	// EveryReplica components run in each serve process (sessions, the bus, the
	// router, the job queue's workers).
	EveryReplica Scope = iota
	// Once components must run in one process only; they are River periodic jobs,
	// which River's elected leader schedules.
	Once
)

// Component is a long-lived part of the server. For an EveryReplica component, Start
// calls Start (if any) and then runs Run (if any) until Stop cancels its context;
// Ready, when set, blocks Start until the component can serve. A Once component is
// Job, run every Every by the job queue (on one replica).
type Component struct {
	Name  string
	Scope Scope
	Start func(ctx context.Context) error
	Run   func(ctx context.Context) error
	Ready func(ctx context.Context) error
	Every time.Duration
	Job   func(ctx context.Context) error
	// Restart: a panic in Run is logged with its stack, the component is reported down
	// on /healthz, and Run runs again after a pause (a second, doubling up to a minute).
	// For loops of passes that keep nothing a pass needs from the one before; without it
	// a panic ends serve (app/health.go says why).
	Restart bool
}

type runningComponent struct {
	name   string
	cancel context.CancelFunc
	done   chan struct{}
}

// New builds a server from cfg: opens (and migrates) the database unless a pool is
// given, and wires every service. Nothing runs, and no user is created, until Start.
func New(ctx context.Context, cfg Config) (_ *App, err error) {
	if cfg.Keys == nil {
		return nil, errors.New("app: a keyring is required")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.StartedAt.IsZero() {
		cfg.StartedAt = time.Now()
	}
	if cfg.Prune <= 0 {
		cfg.Prune = 5 * time.Minute
	}
	a := &App{cfg: cfg, log: log, Keys: cfg.Keys, Pool: cfg.Pool}
	if a.Pool == nil {
		if a.DB, err = db.Open(ctx, cfg.DB); err != nil {
			return nil, err
		}
		defer func() {
			if err != nil {
				a.DB.Close()
			}
		}()
		a.Pool = a.DB.Pool
	}
	pool := a.Pool
	// The bus exists (not yet listening) before any service, which all write through
	// its Local.
	a.Local = events.NewLocal(pool)
	a.Bus = events.NewBus(pool, &events.BusOptions{Logger: log, Local: a.Local})

	ao := cfg.Auth
	ao.Logger, ao.Local = log, a.Local
	a.Auth = auth.New(pool, &ao)
	// Called from the bus component's Ready, not by a goroutine of New's: one waiting for
	// a bus that never listens outlived every App not started.
	tokensCaughtUp := a.Auth.Follow(a.Bus)
	a.Jobs = jobs.New(pool, log)
	rpo := cfg.Replica
	rpo.Logger = log
	if rpo.Beats, err = db.SidePool(ctx, pool, "heartbeat", 2); err != nil {
		return nil, err
	}
	a.beats = rpo.Beats
	defer func() {
		if err != nil {
			a.beats.Close()
		}
	}()
	if rpo.Version == "" {
		rpo.Version = cfg.Version
	}
	a.Replicas = replicas.New(pool, rpo)

	a.Registry = registry.New(pool, a.Keys, &registry.Options{Logger: log, Local: a.Local, Egress: cfg.Egress})
	// A server named before its name was reserved is told of on every start.
	if _, err := a.Registry.ReportReservedNames(ctx); err != nil {
		return nil, err
	}
	gro := cfg.Grants
	gro.Logger, gro.Local = log, a.Local
	a.Grants = grants.New(pool, &gro)
	a.Memory = memory.New(pool, a.Local)
	a.Analytics = analytics.New(pool)
	mo := cfg.MCP
	mo.Logger, mo.Bus, mo.Replica = log, a.Bus, a.Replicas.Self().ID
	if mo.Shared == nil {
		mo.Shared = func(ctx context.Context) bool { n, err := a.Replicas.Others(ctx); return err == nil && n > 0 }
	}
	if mo.Egress == nil {
		mo.Egress = cfg.Egress
	}
	if cfg.BuiltinRoot != "" {
		if a.Builtin, err = a.newBuiltin(ctx, cfg); err != nil {
			return nil, err
		}
		// Its terminals (and whatever else it runs) end with a New that fails after it.
		defer func() {
			if err != nil {
				a.Builtin.Close()
			}
		}()
		mo.Builtin = a.Builtin.MCP()
	}
	a.MCP = mcpclient.New(a.Registry, &mo)
	a.Tools = tools.New(pool, a.Keys, &tools.Options{Logger: log, Local: a.Local, Bus: a.Bus})
	a.Decide = decide.New(pool, a.Auth)
	ro := cfg.Router
	ro.Logger, ro.Bus, ro.Decide, ro.Local = log, a.Bus, a.Decide, a.Local
	if a.Builtin != nil && ro.ArgumentRisk == nil {
		ro.ArgumentRisk = builtinArgumentRisk
	}
	if a.Builtin != nil && ro.OperationRisk == nil {
		ro.OperationRisk = a.builtinOperationRisk
	}
	if ro.Display == nil && a.Builtin != nil {
		ro.Display = a.BuiltinDisplay
	}
	if ro.Preflight == nil && a.Builtin != nil {
		ro.Preflight = a.builtinPreflight
	}
	a.Router = router.New(pool, a.Tools, a.MCP, &ro)
	a.AuditLog = audit.NewLog(pool)
	if cc := cfg.Checkpoints; cc.Dir != "" {
		// NeedsKey: with --checkpoint-every 0 there may be no key, and a checkpoint checked
		// only against the key it names could be anyone's.
		a.AuditLog.UseCheckpoints(audit.CheckpointSource{Dir: cc.Dir, KeyFile: cc.KeyFile, PublicKey: cc.PublicKey, NeedsKey: true})
	}
	a.Assistant = a.assistant(pool, cfg)
	eo := cfg.Executions
	eo.Logger, eo.Auth, eo.Decide, eo.Keys, eo.Jobs, eo.Local = log, a.Auth, a.Decide, a.Keys, a.Jobs, a.Local
	if eo.RunnerID == "" {
		eo.Runner, eo.RunnerID, eo.RunnerAlive, eo.Steady = a.Replicas.Name(), a.Replicas.Self().ID, a.Replicas.Alive, a.Replicas.Steady
	}
	if cfg.Planner != nil {
		eo.Planner = cfg.Planner
	}
	if eo.Previewer == nil {
		eo.Previewer = a.Previewer()
	}
	if eo.Display == nil && a.Builtin != nil {
		eo.Display = a.BuiltinDisplay
	}
	if a.Executions, err = executions.New(pool, a.Router, a.Tools, &eo); err != nil {
		return nil, err
	}
	a.ConfigCode = configcode.New(pool, a.Registry, a.Tools, &configcode.Options{Discoverer: a.MCP, Local: a.Local, Logger: log})
	a.components = []Component{
		{Name: "bus", Run: a.Bus.Run, Ready: func(ctx context.Context) error {
			if err := wait(ctx, a.Bus.Ready()); err != nil {
				return err
			}
			tokensCaughtUp()
			return nil
		}},
		// This replica's row, kept fresh while it runs (services/replicas); /healthz says
		// when its beats stop reaching the database (app/health.go).
		{Name: "replicas", Run: a.beat},
		// The router stops after the job queue and after the sessions (reverse order):
		// closing a session lets its calls in flight end, and the router, still
		// running, writes their records, then waits for any left before it stops.
		{Name: "router", Run: a.Router.Run, Ready: poll(a.Router.Running)},
		// Sessions stop before the router and after the job queue, so every server is
		// marked disconnected and every stdio process is gone on exit.
		{Name: "mcp", Run: a.MCP.Run, Start: a.logConfinement, Ready: poll(a.MCP.Running)},
		// Executions a previous process left in the middle are settled before the queue
		// works jobs; the queue stops first, letting running steps finish through a live
		// router and handing the rest to the next start.
		// While it runs it also settles, within seconds, what another replica killed
		// mid-step left running.
		{Name: "executions", Start: func(ctx context.Context) error { a.Executions.Recover(ctx); return nil }, Run: a.Executions.Watch, Restart: true},
		// Ready once its first start was tried, so /healthz right after says whether it
		// works; a queue that could not start keeps trying, and serve starts anyway.
		{Name: "jobs", Run: a.Jobs.Run, Ready: func(ctx context.Context) error {
			if err := wait(ctx, a.Jobs.Attempted()); !errors.Is(err, context.DeadlineExceeded) {
				return err
			}
			return nil
		}},
		{Name: "prune", Scope: Once, Every: cfg.Prune, Job: a.prune},
		// Finished days' calls are added up for /analytics (services/analytics).
		{Name: "rollup", Scope: Once, Every: time.Hour, Job: a.rollup},
		// The audit log's free-text index, kept behind the appends (services/audit).
		{Name: "audit-search", Run: a.indexAuditSearch, Restart: true},
	}
	// A disabled person's terminals of this replica and pending questions end
	// (app/terminals.go).
	a.components = append(a.components, Component{Name: "disabled-users", Run: a.endDisabled, Restart: true})
	if a.Terminals != nil {
		// Ends, within seconds, the records of the terminals of a replica that died.
		a.components = append(a.components, Component{Name: "terminals", Run: a.sweepTerminals, Restart: true})
	}
	if a.Builtin != nil {
		// Prunes the built-in tools' snapshots hourly, from Start: a serve that then
		// refuses to start has pruned nothing. It ends as the built-in server closes.
		a.components = append(a.components, Component{Name: "snapshots", Start: func(context.Context) error {
			a.Builtin.KeepSnapshotsPruned()
			return nil
		}})
	}
	if cfg.Checkpoints.Dir != "" && cfg.Checkpoints.Every > 0 {
		c, err := a.checkpoints()
		if err != nil {
			return nil, err
		}
		c.Restart = true
		a.components = append(a.components, c)
	}
	if c := a.cluster(); c != nil {
		// Restarts the embedded PostgreSQL when it dies (an external one is not ours).
		a.components = append([]Component{{Name: "database", Run: c.Supervise}}, a.components...)
	}
	if err := a.registerOnce(); err != nil {
		return nil, err
	}
	if err := a.Jobs.Open(); err != nil {
		return nil, err
	}
	gwo := cfg.Gateway
	gwo.Logger, gwo.Version, gwo.Executions, gwo.Bus, gwo.Keys = log, cfg.Version, a.Executions, a.Bus, cfg.Keys
	gwo.Sessions, gwo.Journal = a.MCP, a.Local.Beginner(pool)
	a.Gateway = gateway.New(a.Router, a.Auth, &gwo)
	do := cfg.Denials
	do.Logger, do.Local = log, a.Local
	a.Denials = audit.NewDenials(pool, &do)
	a.system = system.New(pool, a.DB != nil && a.DB.Cluster != nil).Supervised(a.cluster()).WithBus(a.Bus)
	if !skipped(cfg.Skip, "jobs") {
		a.system.WithJobs(a.Jobs)
	}
	a.runs = a.testRuns()
	a.Web = web.New(&handlers.Deps{Auth: a.Auth, Logger: log, Version: cfg.Version, StartedAt: cfg.StartedAt,
		Events: a.Bus, Replicas: a.Replicas, System: a.system, Health: a.Health, AuditLog: a.AuditLog,
		Usage: usage.New(pool), Analytics: a.Analytics,
		Assistant: a.Assistant, SecureCookies: cfg.SecureCookies, Registry: a.Registry, MCP: a.MCP,
		Tools: a.Tools, Router: a.Router, Runs: a.runs, Executions: a.Executions, Decide: a.Decide,
		Denials: a.Denials, TrustedProxies: cfg.TrustedProxies, Terminals: a.Terminals, Grants: a.Grants,
		Gateway: a.Gateway, ConfigCode: a.ConfigCode, Keys: a.Keys, RemoteRuns: remoteRuns{a}, SessionRecheck: cfg.SessionRecheck, SocketsPerPerson: cfg.SocketsPerPerson, SocketsPerProcess: cfg.SocketsPerProcess, BodyReadTimeout: cfg.BodyReadTimeout,
		DownloadStall: cfg.DownloadStall}, a.Bus)

	return a, nil
}

// createFirstAdmin creates the first administrator, admin, when the database has no
// user at all, with Config.AdminPassword (empty: a random one), and sets
// FirstAdminPassword to it; with users already there it does nothing.
func (a *App) createFirstAdmin(ctx context.Context) error {
	pw, err := a.Auth.Bootstrap(ctx, a.cfg.AdminPassword)
	if err != nil {
		return err
	}
	if pw != "" {
		a.FirstAdminPassword = pw
	}
	return nil
}

// Components lists the long-lived parts in start order.
func (a *App) Components() []Component { return a.components }

// Start starts every component not skipped, in order, each waiting for the one
// before to be ready, and then creates the first administrator on a fresh database
// (FirstAdminPassword). Stop undoes it.
func (a *App) Start(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	// The first administrator is created last (below), but a password it would refuse is
	// known now: said before any component starts, not after all of them did.
	why, err := a.Auth.CheckBootstrap(ctx, a.cfg.AdminPassword)
	if err != nil {
		return fmt.Errorf("app: %w", err)
	}
	if why != "" {
		return fmt.Errorf("app: the first administrator's password (--admin-password or TOOLWARDEN_ADMIN_PASSWORD) %s; give a longer one, or none to have a random one printed", why)
	}
	for _, c := range a.components {
		if c.Scope == Once || skipped(a.cfg.Skip, c.Name) {
			continue // Once components are periodic jobs of "jobs"
		}
		if c.Start != nil {
			if err := c.Start(ctx); err != nil {
				a.stopLocked()
				return fmt.Errorf("app: start %s: %w", c.Name, err)
			}
		}
		if c.Run == nil {
			continue
		}
		// Components are stopped by Stop, not by the caller's context: the HTTP server
		// drains first, so calls in flight end normally and are recorded.
		cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		rc := &runningComponent{name: c.Name, cancel: cancel, done: make(chan struct{})}
		go func() {
			defer close(rc.done)
			if err := a.runComponent(cctx, c); err != nil && cctx.Err() == nil {
				a.log.Error("component stopped", "component", c.Name, "err", err)
			} else if err != nil && !errors.Is(err, context.Canceled) {
				a.log.Warn("component stop", "component", c.Name, "err", err)
			}
		}()
		a.running = append(a.running, rc)
		if c.Ready != nil {
			rctx, rcancel := context.WithTimeout(ctx, time.Minute)
			err := c.Ready(rctx)
			rcancel()
			if err != nil {
				a.stopLocked()
				return fmt.Errorf("app: %s not ready: %w", c.Name, err)
			}
		}
	}
	// Last, once nothing else of the start can fail: an admin created before a check that
	// then stopped it (New's, serve's on the key file) had its random password shown
	// nowhere, and every later start, finding a user, created none: no one could sign in.
	if err := a.createFirstAdmin(ctx); err != nil {
		a.stopLocked()
		return err
	}
	return nil
}

// Stop closes the websocket connections, stops the running components in reverse
// order and closes the database New opened. It is safe to call more than once.
func (a *App) Stop() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stopLocked()
	if a.beats != nil {
		a.beats.Close()
		a.beats = nil
	}
	if a.system != nil {
		a.system.Close()
	}
	if a.DB != nil {
		a.DB.Close()
		a.DB = nil
	}
}

func (a *App) stopLocked() {
	a.leave()
	a.Web.Shutdown()
	// Refusals the limit pooled and no entry counted yet are written while the bus and
	// the database still run.
	dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
	if err := a.Denials.Close(dctx); err != nil {
		a.log.Warn("audit: the count of refused requests held back could not be written", "err", err)
	}
	// So are the failed sign-ins the audit budget held back.
	if err := a.Auth.Close(dctx); err != nil {
		a.log.Warn("audit: the count of failed sign-ins held back could not be written", "err", err)
	}
	dcancel()
	for i := len(a.running) - 1; i >= 0; i-- {
		rc := a.running[i]
		rc.cancel()
		<-rc.done
	}
	a.running = nil
	// After the router stopped: the runs it let finish have their results; those left
	// are cancelled, and no timer holds a run, its result or the router any longer.
	if a.runs != nil {
		a.runs.Close()
	}
	if a.Builtin != nil {
		a.Builtin.Close()
	}
	if a.AuditLog != nil {
		a.AuditLog.Close() // before the database closes
	}
}

// NewHTTPServer is the HTTP server Run serves h with. It has no ReadTimeout: Go cancels
// a request's context when that deadline passes after its body was read, which would
// end every stream (/sse, /mcp, a long export) after it; the web layer bounds reading
// a body instead (Config.BodyReadTimeout).
func NewHTTPServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
}

// Run starts the server (Start), serves HTTP on ln until ctx ends (or serving fails),
// then drains requests for up to ten seconds and stops. ready, when set, is called
// once every component is ready and FirstAdminPassword is set: it is where to show
// the password.
func (a *App) Run(ctx context.Context, ln net.Listener, ready func()) error {
	httpSrv := NewHTTPServer(nil)
	serveErr := make(chan error, 1)
	return a.Serve(ctx, httpSrv, serveErr, func(h http.Handler) {
		httpSrv.Handler = h
		go func() { serveErr <- httpSrv.Serve(ln) }()
	}, ready)
}

// Serve is Run on httpSrv, which the caller may already serve its listener with (serve
// answers the probes while the App starts): it starts the App, hands its handler over
// (handOver: the caller sends every request from then on to it), calls ready, and when
// ctx ends (or serving fails: serveErr has httpSrv.Serve's error) drains requests for up
// to ten seconds and stops.
func (a *App) Serve(ctx context.Context, httpSrv *http.Server, serveErr <-chan error, handOver func(http.Handler), ready func()) error {
	defer a.Stop()
	if err := a.Start(ctx); err != nil {
		return err
	}
	handOver(a.Web)
	if ready != nil {
		ready()
	}
	select {
	case <-ctx.Done():
		a.log.Info("shutting down")
	case err := <-serveErr:
		if !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("http server: %w", err)
		}
	}
	a.leave()
	a.Web.Shutdown()
	shCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := httpSrv.Shutdown(shCtx); err != nil {
		// Requests still running (a download to a client that stopped reading) are
		// ended by closing their connections: the pool's close would wait for them.
		a.log.Warn("http shutdown: requests still running after the drain are cut off", "err", err)
		_ = httpSrv.Close()
	}
	return nil
}

// leave tells the other replicas this one is shutting down, before its listener
// closes: they stop forwarding terminals and test runs here (the heartbeat goes on
// until the components stopped, so its executions are not taken for orphaned).
func (a *App) leave() {
	if a.Replicas != nil {
		a.Replicas.Leave(context.Background())
	}
}

// cluster is the embedded PostgreSQL, nil with an external database.
func (a *App) cluster() *db.Cluster {
	if a.DB == nil {
		return nil
	}
	return a.DB.Cluster
}

// logConfinement says how stdio servers and the built-in terminals run. In the background: the check behind it
// starts a process, and start-up is timed.
func (a *App) logConfinement(context.Context) error {
	go func() {
		if how := a.MCP.Confinement(); strings.HasPrefix(how, "none") {
			a.log.Warn("stdio servers run unconfined: they can read the data dir and reach the database", "confinement", how)
		} else {
			a.log.Info("stdio servers run confined", "confinement", how)
		}
		if a.Terminals == nil {
			return
		}
		if how := a.Terminals.Confinement(); strings.HasPrefix(how, "none") {
			a.log.Warn("built-in terminals run unconfined: their commands can read the data dir and reach the database", "confinement", how)
		} else {
			a.log.Info("built-in terminals run confined", "confinement", how)
		}
	}()
	return nil
}

func skipped(skip []string, name string) bool {
	for _, s := range skip {
		if s == name {
			return true
		}
	}
	return false
}

func wait(ctx context.Context, ch <-chan struct{}) error {
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// poll is a Ready that waits until running reports true.
func poll(running func() bool) func(context.Context) error {
	return func(ctx context.Context) error {
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for !running() {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
			}
		}
		return nil
	}
}

// testRuns is the registry of the test panel's runs, which run on this replica (App.runs,
// closed as the App stops).
func (a *App) testRuns() *router.Runs {
	runs := router.NewRuns(a.Router)
	runs.Replica = a.Replicas.Self().ID
	return runs
}
