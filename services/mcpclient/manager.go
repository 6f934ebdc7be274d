// Package mcpclient keeps one live MCP session per enabled server (docs/architecture.md) over stdio,
// SSE or streamable HTTP with the official Go SDK: it connects and records what the
// server says about itself, checks health on an interval, reconnects with exponential
// backoff and jitter behind a circuit breaker, supervises stdio processes, and runs
// discovery on connect, on demand and on notifications/tools/list_changed.
package mcpclient

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/confine"
	"github.com/toolwarden/toolwarden/internal/egress"
	"github.com/toolwarden/toolwarden/internal/proctrack"
	"github.com/toolwarden/toolwarden/internal/uuidtext"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/secrets"
	"github.com/toolwarden/toolwarden/services/template"
)

// Options tunes a Manager; zero fields take the defaults shown.
type Options struct {
	Logger *slog.Logger
	// Bus, when set, lets changes made by other processes (toolwarden import, another
	// replica's API) reach this manager through server.changed events.
	Bus *events.Bus
	// Debounce coalesces list_changed notifications (and the discovery after connect):
	// server-everything sends two right after connecting. Default 250 ms.
	Debounce time.Duration
	// ChurnRuns and ChurnWait slow down a server that keeps changing its tools: after
	// ChurnRuns discoveries in a row that a list_changed asked for and that changed
	// something, the next waits ChurnWait, doubling up to 5 minutes. Defaults 10 and 5 s.
	// After ChurnRuns such runs in a row that changed nothing, the next waits twice
	// Debounce, doubling up to ChurnWait.
	ChurnRuns int
	ChurnWait time.Duration
	// BackoffInitial and BackoffMax bound the wait between reconnect attempts
	// (exponential, with jitter). Defaults 500 ms and 30 s.
	BackoffInitial, BackoffMax time.Duration
	// BreakerFailures consecutive failed connects open the circuit for BreakerCooldown,
	// during which the server is not contacted at all. Defaults 5 and 60 s.
	BreakerFailures int
	BreakerCooldown time.Duration
	// Shared, when set, reports whether other live replicas keep sessions to the same
	// servers: a stopping manager then leaves the servers' statuses as they are instead
	// of marking them disconnected. Nil: this process is alone.
	Shared func(ctx context.Context) bool
	// StderrLines bounds the standard error kept per stdio server. Default 200.
	StderrLines int
	// MaxPages stops a discovery whose server keeps paging. Default 10,000.
	MaxPages int
	// Version is reported to servers as the client version.
	Version string
	// Replica is the id of this replica (replicas.Service): a connection test's page
	// asks about the test at this replica, whichever replica served the page.
	Replica string
	// MaxMessageBytes caps every message a server sends (a stdio line, an SSE event, a
	// JSON body), enforced while it is read: a larger response is answered with
	// ErrResultTooLarge, any other larger message is dropped, and the session goes on.
	// Default DefaultMaxMessageBytes.
	MaxMessageBytes int
	// LargeReads bounds the messages of over 1 MiB being read at once from all servers
	// together (two of them at most from one server); another waits, its stream unread,
	// until one has been read or has kept its turn 5 s (largeReads). Default
	// DefaultLargeReads; negative: no bound.
	LargeReads int
	// InheritEnv is what every stdio server gets from Toolwarden's own environment
	// (see InheritedEnv); the server's configured env comes on top.
	InheritEnv map[string]string
	// Confine says what stdio servers must not reach (the data dir, the secret key, the
	// database's socket). The zero value still confines them: their own PID namespace
	// hides Toolwarden's environment and command line. Template servers' commands run
	// confined the same way.
	Confine confine.Spec
	// TemplateMaxTimeout caps the timeout of every template tool (services/template);
	// default and upper bound template.MaxTimeout.
	TemplateMaxTimeout time.Duration
	// Egress is the policy for the addresses HTTP servers and template tools' HTTP
	// requests may connect to (nil: only the cloud metadata endpoints are refused).
	Egress *egress.Policy
	// Builtin serves the server of type builtin (services/builtin), in-process; nil:
	// that server cannot connect.
	Builtin *mcp.Server
	// TestTimeout bounds a whole "Test connection" attempt (start, initialize, ping,
	// list tools); a server's own shorter timeout wins. Default 10 s.
	TestTimeout time.Duration
	// MaxTests bounds the connection tests running at once in this process (each may
	// start a stdio server's process); one more waits up to testSlotWait, then fails
	// with ErrTestsBusy. Default DefaultMaxTests.
	MaxTests int
	// ProcessDir, when set, is where the process group of every running stdio server is
	// recorded (package proctrack; serve uses <data-dir>/run/stdio), with the run's
	// marker that those servers and template tools' commands carry: Run first kills
	// what a previous run left behind (it was killed before it could stop its servers,
	// and what they started lives on). "": nothing is recorded.
	ProcessDir string
}

func (o *Options) withDefaults() Options {
	out := Options{}
	if o != nil {
		out = *o
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	if out.ChurnRuns <= 0 {
		out.ChurnRuns = 10
	}
	if out.ChurnWait <= 0 {
		out.ChurnWait = 5 * time.Second
	}
	if out.Debounce <= 0 {
		out.Debounce = 250 * time.Millisecond
	}
	if out.BackoffInitial <= 0 {
		out.BackoffInitial = 500 * time.Millisecond
	}
	if out.BackoffMax <= 0 {
		out.BackoffMax = 30 * time.Second
	}
	if out.BreakerFailures <= 0 {
		out.BreakerFailures = 5
	}
	if out.BreakerCooldown <= 0 {
		out.BreakerCooldown = time.Minute
	}
	if out.StderrLines <= 0 {
		out.StderrLines = 200
	}
	if out.MaxPages <= 0 {
		out.MaxPages = 10_000
	}
	if out.MaxMessageBytes <= 0 {
		out.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if out.LargeReads == 0 {
		out.LargeReads = DefaultLargeReads
	}
	if out.Version == "" {
		out.Version = "dev"
	}
	if out.TestTimeout <= 0 {
		out.TestTimeout = 10 * time.Second
	}
	if out.MaxTests <= 0 {
		out.MaxTests = DefaultMaxTests
	}
	return out
}

// Errors callers can test for.
var (
	// ErrNotConnected: the server has no live session right now.
	ErrNotConnected = fault.Conflict("not_connected", "server is not connected").About("server")
	// ErrStopped: the manager is not running.
	ErrStopped = errors.New("mcpclient: manager is not running")
	// ErrTestsBusy: Options.MaxTests connection tests are running and none ended in time.
	ErrTestsBusy = fault.Unavailable("tests_busy", "too many connection tests are running at once; try again in a few seconds")
)

// DefaultMaxTests is Options.MaxTests by default: without a bound one person could
// start hundreds of server processes at once through "Test connection".
const DefaultMaxTests = 8

// testSlotWait is how long a connection test waits for one of the others to end.
const testSlotWait = 2 * time.Second

// acquireTest takes one of the Options.MaxTests slots of connection tests, waiting up to
// testSlotWait (ErrTestsBusy) or until ctx ends; release gives it back.
func (m *Manager) acquireTest(ctx context.Context) (release func(), err error) {
	t := time.NewTimer(testSlotWait)
	defer t.Stop()
	select {
	case m.testSlots <- struct{}{}:
		return func() { <-m.testSlots }, nil
	case <-t.C:
		return nil, ErrTestsBusy
	case <-ctx.Done():
		return nil, fmt.Errorf("cancelled while waiting for one of the %d connection tests running to end: %w", cap(m.testSlots), context.Cause(ctx))
	}
}

// Manager owns the sessions. Create it with New, start it with Run.
type Manager struct {
	reg      *registry.Service
	opts     Options
	log      *slog.Logger
	confiner *confine.Confiner
	// largeReads bounds the large messages read at once (Options.LargeReads).
	largeReads *largeReads

	mu      sync.Mutex
	ctx     context.Context // Run's context; nil before Run and after it returns
	conns   map[string]*conn
	stderrs map[string]*lineBuffer // kept across reconnects and restarts of one server
	// refreshing serializes Refresh and Reconnect per server (lockServer), so a slower
	// call holding an older registration cannot replace the session a newer one started.
	refreshing map[string]*serverLock
	progress   progressRoutes
	onConnect  []func(serverID string)
	marker     string // this run's value of ServerMarkerEnv (ProcessDir only)
	runMu      sync.Mutex
	runWritten bool // the run's record (proctrack.WriteRun) is in ProcessDir
	runEnded   bool // endRun ran: a server that starts now is not recorded but stopped
	tests      testRuns
	testSlots  chan struct{} // one per running connection test (acquireTest)
}

// New returns a manager over the registry.
func New(reg *registry.Service, opts *Options) *Manager {
	o := opts.withDefaults()
	return &Manager{reg: reg, opts: o, log: o.Logger, confiner: confine.New(o.Confine), conns: map[string]*conn{},
		stderrs: map[string]*lineBuffer{}, refreshing: map[string]*serverLock{}, marker: "run-" + rand.Text(),
		testSlots: make(chan struct{}, o.MaxTests), largeReads: newLargeReads(o.LargeReads)}
}

// ServerMarkerEnv marks the processes of stdio servers and template tools' commands (and
// what they start) with this run's marker when Options.ProcessDir is set, so a later
// run kills only what is provably ours.
const ServerMarkerEnv = "TOOLWARDEN_SERVER_RUN"

// track records a stdio endpoint's process group in ProcessDir while it runs, and has a
// template endpoint mark its commands (markCommand).
func (m *Manager) track(ep *endpoint) {
	dir := m.opts.ProcessDir
	if dir != "" && ep.template {
		ep.mark = func(cmd *exec.Cmd) { m.markCommand(dir, cmd) }
		return
	}
	ct, ok := ep.transport.(*commandTransport)
	if dir == "" || !ok || ep.cmd == nil {
		return
	}
	ep.cmd.Env = append(ep.cmd.Env, ServerMarkerEnv+"="+m.marker)
	m.recordRun(dir)
	ct.onStart = func(pid int) {
		// Under runMu, so a start racing the clean stop is either recorded before the
		// stop drops the records or killed after it, never left behind recorded.
		m.runMu.Lock()
		defer m.runMu.Unlock()
		if m.runEnded {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			return
		}
		// Setpgid: the server's pid is its group's id.
		if err := proctrack.Write(dir, proctrack.Record{PGID: pid, Marker: m.marker, Started: time.Now()}); err != nil {
			m.log.Warn("mcpclient: record a stdio server's process group", "dir", dir, "err", err)
		}
	}
	ep.untrack = func(pid int) { proctrack.Remove(dir, pid) }
}

// markCommand gives a template tool's command, about to start, this run's marker, with
// the run recorded in dir: what it leaves outside its group (setsid, ssh -f) is killed
// by endRun, or by the next run's Cleanup after a crash. Its group needs no record of
// its own: the template server kills it when the command ends, and every process in it
// carries the marker. After endRun, the command does not start.
func (m *Manager) markCommand(dir string, cmd *exec.Cmd) {
	m.recordRun(dir)
	m.runMu.Lock()
	ended := m.runEnded
	m.runMu.Unlock()
	if ended {
		if cmd.Err == nil {
			cmd.Err = errors.New("mcpclient: not started: Toolwarden is stopping")
		}
		return
	}
	// Clipped: the template server's environment is shared by its concurrent calls.
	cmd.Env = append(slices.Clip(cmd.Env), ServerMarkerEnv+"="+m.marker)
}

// recordRun records this run's marker in dir before its first stdio server or template
// command starts: a crash before the server's group is recorded, or a process that
// left the group, is still found by the next run.
func (m *Manager) recordRun(dir string) {
	m.runMu.Lock()
	defer m.runMu.Unlock()
	if m.runWritten || m.runEnded {
		return
	}
	if err := proctrack.WriteRun(dir, m.marker); err != nil {
		m.log.Warn("mcpclient: record this run", "dir", dir, "err", err)
		return
	}
	m.runWritten = true
}

// endRun kills what this run's stdio servers left that escaped their process group
// (a daemon that called setsid), once every server is stopped, and drops the run's record.
func (m *Manager) endRun() {
	dir := m.opts.ProcessDir
	if dir == "" {
		return
	}
	m.runMu.Lock()
	defer m.runMu.Unlock()
	if n := proctrack.KillMarked(ServerMarkerEnv, m.marker); n > 0 {
		m.log.Warn("mcpclient: killed processes that left their stdio server's process group", "processes", n)
	}
	proctrack.RemoveRun(dir, m.marker)
	m.runWritten, m.runEnded = false, true
}

// templateOptions are how template servers run their tools. The HTTP transport is left
// to newEndpoint, which gives each template endpoint its own and closes its idle
// connections when the session ends.
func (m *Manager) templateOptions() template.Options {
	return template.Options{Version: m.opts.Version, MaxTimeout: m.opts.TemplateMaxTimeout}
}

// Confinement says how stdio servers run, for the server page: which namespaces hide
// what from them, or "none: <why>". Every stdio server of this process runs the same
// way, and always with a clean environment (see InheritedEnv).
func (m *Manager) Confinement() string {
	return m.confiner.Describe() + "; clean environment"
}

// Run starts a session for every enabled server and keeps them until ctx ends; then it
// closes every session, stops every stdio process and marks the servers disconnected.
func (m *Manager) Run(ctx context.Context) error {
	if dir := m.opts.ProcessDir; dir != "" {
		if n, err := proctrack.Cleanup(dir, ServerMarkerEnv, m.marker); err != nil {
			m.log.Warn("mcpclient: clean up after the previous run", "dir", dir, "err", err)
		} else if n > 0 {
			m.log.Warn("mcpclient: killed processes of stdio servers a previous run left running", "processes", n)
		}
	}
	m.mu.Lock()
	m.ctx = ctx
	m.mu.Unlock()
	var sub *events.Subscription
	if m.opts.Bus != nil {
		sub = m.opts.Bus.Subscribe(registry.ServersTopic)
		// A closure: sub is replaced after a drop, and the last one must be closed.
		defer func() { sub.Close() }()
	}
	// A reconcile that fails (the database briefly unreachable) is tried again with
	// backoff until one succeeds: the changes it stands for (servers disabled or deleted
	// while no event reached this manager) come by no other way.
	bo := m.newBackoff()
	var retry <-chan time.Time
	reconcile := func() {
		err := m.reconcileAll(ctx)
		if err == nil || ctx.Err() != nil {
			bo.Reset()
			retry = nil
			return
		}
		wait := bo.NextBackOff()
		m.log.Error("mcpclient: bring the sessions in line with the registry; trying again", "err", err, "retry_in", wait)
		retry = time.After(wait)
	}
	reconcile()
	var evs <-chan events.Event
	if sub != nil {
		evs = sub.C
	}
	// A server's refresh or reconnect may wait seconds on its old session (a stdio
	// server ignoring SIGTERM, an HTTP close's grace): each runs beside the loop, so
	// other servers' changes are not held up behind it, nor the subscription dropped
	// as slow. lockServer orders the work of one server.
	w := newServerWork()
	for {
		select {
		case <-ctx.Done():
			w.wait()
			m.stopAll()
			return nil
		case <-retry:
			reconcile()
		case ev, ok := <-evs:
			if !ok {
				// Dropped as a slow subscriber: subscribe again and look at everything.
				sub = m.opts.Bus.Subscribe(registry.ServersTopic)
				evs = sub.C
				bo.Reset()
				reconcile()
				continue
			}
			var id string
			switch ev.Kind {
			case string(events.ServerChanged):
				p, _ := events.ServerChanged.Decode(ev)
				id = p.ID
			case string(events.ServerDeleted):
				p, _ := events.ServerDeleted.Decode(ev)
				id = p.ID
			case string(events.ServerReconnect):
				// Asked on another replica: this one runs its own copy of the server, which
				// may be the one that hangs. The replica asked reconnects its own (ReconnectAsked).
				if p, err := events.ServerReconnect.Decode(ev); err == nil && p.Replica != m.opts.Replica {
					w.run("reconnect "+p.ID, func() {
						if err := m.Reconnect(ctx, p.ID); err != nil && ctx.Err() == nil {
							m.log.Debug("mcpclient: reconnect asked on another replica", "server", p.Name, "err", err)
						}
					})
				}
				continue
			}
			if id != "" {
				w.run("refresh "+id, func() { m.Refresh(ctx, id) })
			}
		}
	}
}

// serverWork runs Run's per-server work beside its loop: one goroutine per key (an
// operation and a server id) at a time, and a key asked again while its work runs is
// run once more after it (its reads then see the latest registration), so a burst of
// events costs at most two runs per key, not a goroutine per event.
type serverWork struct {
	mu    sync.Mutex
	again map[string]bool // running keys: whether they were asked again meanwhile
	wg    sync.WaitGroup
}

func newServerWork() *serverWork { return &serverWork{again: map[string]bool{}} }

func (w *serverWork) run(key string, f func()) {
	w.mu.Lock()
	if _, running := w.again[key]; running {
		w.again[key] = true
		w.mu.Unlock()
		return
	}
	w.again[key] = false
	w.mu.Unlock()
	w.wg.Go(func() {
		for {
			f()
			w.mu.Lock()
			if !w.again[key] {
				delete(w.again, key)
				w.mu.Unlock()
				return
			}
			w.again[key] = false
			w.mu.Unlock()
		}
	})
}

// wait waits for the work under way (its context ended, it ends soon).
func (w *serverWork) wait() { w.wg.Wait() }

// reconcileAll brings every session in line with the registry; an error when a read
// failed (the list, or a server's own), so that the caller tries again.
func (m *Manager) reconcileAll(ctx context.Context) error {
	ids, err := m.reg.EnabledServerIDs(ctx)
	if err != nil {
		return err
	}
	want := map[string]bool{}
	var errs []error
	for _, id := range ids {
		want[id] = true
		errs = append(errs, m.refresh(ctx, id))
	}
	m.mu.Lock()
	var stale []string
	for id := range m.conns {
		if !want[id] {
			stale = append(stale, id)
		}
	}
	m.mu.Unlock()
	for _, id := range stale {
		errs = append(errs, m.refresh(ctx, id))
	}
	return errors.Join(errs...)
}

// Running reports whether Run is running.
func (m *Manager) Running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ctx != nil && m.ctx.Err() == nil
}

// serverLock is the per-server lock of Manager.refreshing.
type serverLock struct {
	mu    sync.Mutex
	users int // callers holding or waiting for mu (m.mu held)
}

// lockServer takes the lock that serializes Refresh and Reconnect of server id; unlock
// releases it. The entry lives only while someone holds or waits for it: ids come from
// requests (any text, any number of them), and one kept per id would never be freed.
func (m *Manager) lockServer(id string) (unlock func()) {
	m.mu.Lock()
	l := m.refreshing[id]
	if l == nil {
		l = &serverLock{}
		m.refreshing[id] = l
	}
	l.users++
	m.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		m.mu.Lock()
		if l.users--; l.users == 0 {
			delete(m.refreshing, id)
		}
		m.mu.Unlock()
	}
}

// Refresh brings the session of server id in line with its registration: it starts one
// for a newly enabled server, restarts it when connection settings changed, and tears
// it down (stopping a stdio process) when the server was disabled or deleted.
// Call it after every change; it is cheap when nothing changed.
func (m *Manager) Refresh(ctx context.Context, id string) {
	_ = m.refresh(ctx, id) // a failed read is logged; the session stays as it was
}

// refresh is Refresh, with the error of a read that failed.
func (m *Manager) refresh(ctx context.Context, id string) error {
	if !uuidtext.Canonical(id) {
		return nil // names no server (GetServer would say so), and never had a session
	}
	unlock := m.lockServer(id)
	defer unlock()
	return m.refreshLocked(ctx, id)
}

// refreshLocked is refresh with the server's lock held. A read that fails (the
// database, the caller's context) leaves a session as it is and is logged and
// returned; with no session, the server's row says so.
func (m *Manager) refreshLocked(ctx context.Context, id string) error {
	m.mu.Lock()
	runCtx := m.ctx
	m.mu.Unlock()
	if runCtx == nil || runCtx.Err() != nil {
		return nil
	}
	sv, err := m.reg.GetServer(ctx, id)
	switch {
	case errors.Is(err, registry.ErrNotFound):
		m.stop(id, "")
		m.mu.Lock()
		delete(m.stderrs, id)
		m.mu.Unlock()
		return nil
	case err != nil:
		return m.readFailed(ctx, id, id, err)
	case !sv.Enabled:
		m.stop(id, registry.StatusDisconnected)
		return nil
	}
	// Connection reads the server again: only what says the session must go (the server
	// deleted meanwhile, its secrets unreadable) ends it; a failed read (the database,
	// the caller's context) leaves it as the failed read above does.
	cfg, err := m.reg.Connection(ctx, id)
	switch {
	case errors.Is(err, registry.ErrNotFound):
		m.stop(id, "")
		m.mu.Lock()
		delete(m.stderrs, id)
		m.mu.Unlock()
		return nil
	case unreadableSecret(err):
		m.stop(id, "")
		m.recordError(ctx, id, sv.Name, err)
		return nil
	case err != nil:
		return m.readFailed(ctx, id, sv.Name, err)
	}
	m.mu.Lock()
	cur := m.conns[id]
	if cur != nil && cur.cfg.Fingerprint == cfg.Fingerprint && cur.cfg.Name == cfg.Name {
		m.mu.Unlock()
		// Nothing to reconnect for (say, a token saved again with the same value), but
		// the registry may have marked the server connecting: record the live status.
		cur.resync(ctx)
		return nil
	}
	m.mu.Unlock()
	if cur != nil {
		m.stop(id, "")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.conns[id] != nil || m.ctx == nil || m.ctx.Err() != nil {
		return nil // a concurrent Refresh got here first, or Run ended meanwhile
	}
	sb := m.stderrs[id]
	if sb == nil {
		sb = newLineBuffer(m.opts.StderrLines, 2048)
		m.stderrs[id] = sb
	}
	sb.setRedact(redactor(cfg))
	c := newConn(m.ctx, m, cfg, sb)
	m.conns[id] = c
	go c.run()
	return nil
}

// readFailed logs a read of server id (name) that failed and returns it; a server with
// no session has its row say why, as one with a session says it is connected.
func (m *Manager) readFailed(ctx context.Context, id, name string, err error) error {
	m.log.Error("mcpclient: refresh", "server", name, "err", err)
	m.mu.Lock()
	live := m.conns[id] != nil
	m.mu.Unlock()
	if !live && ctx.Err() == nil { // a caller that left says nothing of the server
		m.recordError(ctx, id, name, fmt.Errorf("could not read the server's settings: %w", err))
	}
	return fmt.Errorf("mcpclient: refresh %s: %w", name, err)
}

// recordError records the error status of server id (name), whatever its caller's
// context (a request that ended): the row must still say why.
func (m *Manager) recordError(ctx context.Context, id, name string, err error) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, serr := m.reg.SetStatus(wctx, id, registry.StatusUpdate{Status: registry.StatusError, Error: err.Error()}); serr != nil && !errors.Is(serr, registry.ErrNotFound) {
		m.log.Warn("mcpclient: record status", "server", name, "err", serr)
	}
}

// unreadableSecret reports whether err is Connection failing on a stored secret that
// the keyring cannot open (a removed key, a damaged value), as opposed to a failed read.
func unreadableSecret(err error) bool {
	return errors.Is(err, secrets.ErrDecrypt) || errors.Is(err, secrets.ErrUnknownKey) || errors.Is(err, secrets.ErrMalformed)
}

// stop ends the session of id and waits until its process is gone. final, when not
// empty, is the status recorded afterwards.
func (m *Manager) stop(id, final string) {
	m.mu.Lock()
	c := m.conns[id]
	delete(m.conns, id)
	m.mu.Unlock()
	if c == nil {
		return
	}
	c.stop()
	if final != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := m.reg.SetStatus(ctx, id, registry.StatusUpdate{Status: final}); err != nil && !errors.Is(err, registry.ErrNotFound) {
			m.log.Warn("mcpclient: record status", "server", c.cfg.Name, "err", err)
		}
	}
}

func (m *Manager) stopAll() {
	m.mu.Lock()
	ids := make([]string, 0, len(m.conns))
	for id := range m.conns {
		ids = append(ids, id)
	}
	m.ctx = nil
	m.mu.Unlock()
	final := registry.StatusDisconnected
	if m.opts.Shared != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if m.opts.Shared(ctx) {
			final = "" // other replicas are still connected to them
		}
		cancel()
	}
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() { m.stop(id, final) })
	}
	wg.Wait()
	m.endRun()
}

// newBackoff is the backoff of a retry of the manager's (a connection, a reconcile):
// Options.BackoffInitial doubling, jittered, up to Options.BackoffMax, reset.
func (m *Manager) newBackoff() *backoff.ExponentialBackOff {
	bo := &backoff.ExponentialBackOff{InitialInterval: m.opts.BackoffInitial, RandomizationFactor: 0.5,
		Multiplier: 2, MaxInterval: m.opts.BackoffMax}
	bo.Reset()
	return bo
}

// Reconnect closes the session of server id and opens a new one at once (backoff and an
// open circuit are reset: a person asked for it). It reconnects this replica's session
// only, unaudited: it is how a replica acts on another's announced reconnect. A person's
// Reconnect is ReconnectAsked.
//
// The server is read before its session is touched, and once begun the restart runs to
// its end whatever the caller does: stopping a stdio server can take seconds, and a
// request that ends meanwhile must not leave the server with no session. It holds the
// server's lock throughout, so a Refresh cannot start a second copy of the server while
// the old one is still stopping.
func (m *Manager) Reconnect(ctx context.Context, id string) error {
	_, err := m.reconnect(ctx, id, nil)
	return err
}

// ReconnectAsked is a person's Reconnect of server id: recorded in the audit log with the
// event that has every other replica reconnect its own session (registry.AuditReconnect),
// then done here. The record comes first: if it cannot be written, nothing is restarted
// anywhere. A restart here that then fails is on the server's row, as any other's.
func (m *Manager) ReconnectAsked(ctx context.Context, actor audit.Actor, id string) (registry.Server, error) {
	return m.reconnect(ctx, id, func(sv registry.Server) error {
		// Past the checks the reconnect goes ahead even if the request leaves meanwhile.
		if err := m.reg.AuditReconnect(context.WithoutCancel(ctx), actor, sv, m.Replica()); err != nil {
			m.log.Error("mcpclient: reconnect refused: its audit record was not written", "server", sv.Name, "err", err)
			return fault.Wrap(err, fault.KindUnavailable, "unavailable",
				"the server was not reconnected because its audit record could not be written; try again shortly")
		}
		return nil
	})
}

// reconnect is Reconnect, with record (when not nil) run once the server has been read
// and before its session is touched: an error from it leaves the session be.
func (m *Manager) reconnect(ctx context.Context, id string, record func(registry.Server) error) (registry.Server, error) {
	sv, err := m.reg.GetServer(ctx, id)
	if err != nil {
		return registry.Server{}, err
	}
	if !sv.Enabled {
		return sv, ErrNotConnected.Withf("%s: it is disabled", ErrNotConnected.Message)
	}
	// Its settings are read before the session goes too: a failed read leaves it be.
	if _, err := m.reg.Connection(ctx, id); err != nil && !unreadableSecret(err) {
		return sv, err
	}
	if record != nil {
		if err := record(sv); err != nil {
			return sv, err
		}
	}
	unlock := m.lockServer(id)
	defer unlock()
	m.stop(id, "")
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reconnectRead)
	defer cancel()
	// A read that fails now leaves no session: the row says so (refreshLocked), and the
	// caller is told.
	return sv, m.refreshLocked(rctx, id)
}

// reconnectRead bounds the reads that restart a session after Reconnect stopped it (its
// caller's context no longer does).
const reconnectRead = 30 * time.Second

// OnConnect registers f to run each time a session of a server opens (the first
// connect, a reconnect after a crash, a person's Reconnect), before the server is
// marked connected, and each time a health check of a live session passes. The router
// closes the server's call circuit there: a server that is back must not stay cut off
// for the rest of a cooldown it no longer needs.
func (m *Manager) OnConnect(f func(serverID string)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.onConnect = append(m.onConnect, f)
}

// connected runs the OnConnect hooks for server id.
func (m *Manager) connected(id string) {
	m.mu.Lock()
	hooks := m.onConnect
	m.mu.Unlock()
	for _, f := range hooks {
		f(id)
	}
}

// Snapshot is the live state of one server's session.
type Snapshot struct {
	Status      string
	Error       string
	Since       time.Time
	Failures    int       // consecutive failed connects
	BreakerOpen bool      // the circuit is open: no attempts until NextAttempt
	NextAttempt time.Time // when the next reconnect happens (zero when connected)
	Stderr      []string  // last lines of a stdio server's standard error
}

// Snapshot returns the live state of server id (Status "" when it has no session).
func (m *Manager) Snapshot(id string) Snapshot {
	m.mu.Lock()
	c := m.conns[id]
	sb := m.stderrs[id]
	m.mu.Unlock()
	var s Snapshot
	if c != nil {
		s = c.snapshot()
	}
	if sb != nil {
		s.Stderr = sb.Lines()
	}
	return s
}

// Session returns the live session of server id, for callers such as the router.
func (m *Manager) Session(id string) (*mcp.ClientSession, error) {
	m.mu.Lock()
	c := m.conns[id]
	m.mu.Unlock()
	if c == nil {
		return nil, ErrNotConnected
	}
	return c.current()
}

// Discover lists the tools of server id now and stores them (the Discover button and
// POST /api/v1/servers/:id/discover).
func (m *Manager) Discover(ctx context.Context, id string, actor audit.Actor) (registry.DiscoveryResult, error) {
	if !uuidtext.Canonical(id) {
		return registry.DiscoveryResult{}, registry.ErrNotFound
	}
	// The session follows server.changed events on its own; bring it in line with the
	// registration first, so a server disabled a moment ago is not discovered through a
	// session that is about to close.
	m.Refresh(ctx, id)
	m.mu.Lock()
	c := m.conns[id]
	m.mu.Unlock()
	if c == nil {
		if _, err := m.reg.GetServer(ctx, id); err != nil {
			return registry.DiscoveryResult{}, err
		}
		return registry.DiscoveryResult{}, ErrNotConnected.Withf("%s: enable it first", ErrNotConnected.Message)
	}
	return c.discoverNow(ctx, "manual", actor)
}

// newClient is a client whose SDK lines go to log (msgLimit.sdk: the manager's log,
// masked, shared with the connection's transport). onListChanged hears every
// list_changed, tools set for the tools' one.
func (m *Manager) newClient(log *slog.Logger, onListChanged func(tools bool)) *mcp.Client {
	var h func(context.Context, *mcp.ToolListChangedRequest)
	var hr func(context.Context, *mcp.ResourceListChangedRequest)
	var hp func(context.Context, *mcp.PromptListChangedRequest)
	if onListChanged != nil {
		h = func(context.Context, *mcp.ToolListChangedRequest) { onListChanged(true) }
		hr = func(context.Context, *mcp.ResourceListChangedRequest) { onListChanged(false) }
		hp = func(context.Context, *mcp.PromptListChangedRequest) { onListChanged(false) }
	}
	return mcp.NewClient(&mcp.Implementation{Name: "toolwarden", Title: "Toolwarden", Version: m.opts.Version},
		&mcp.ClientOptions{ToolListChangedHandler: h, ResourceListChangedHandler: hr, PromptListChangedHandler: hp,
			ProgressNotificationHandler: m.progress.deliver, Logger: log})
}
