package mcpclient

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sony/gobreaker/v2"

	"github.com/toolwarden/toolwarden/internal/textcheck"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/secrets"
)

// conn supervises the session of one server: connect, watch, reconnect, until stopped.
type conn struct {
	m      *Manager
	cfg    registry.Connection
	stderr *lineBuffer
	cancel context.CancelFunc
	ctx    context.Context
	done   chan struct{}

	breaker *gobreaker.CircuitBreaker[*session]
	masker  *secrets.Masker
	redact  func(string) string

	// statusMu orders status writes: the row must end with the latest status, so a
	// resync cannot write a status read before a newer one was stored.
	statusMu sync.Mutex

	mu          sync.Mutex
	sess        *session
	status      string
	errText     string
	since       time.Time
	failures    int
	nextAttempt time.Time

	// Discovery: one at a time per server; requests while one is pending coalesce.
	discovering  chan struct{} // holds one token while a discovery runs (a lock a waiter can give up on)
	rediscover   atomic.Bool   // asked for while one ran: run again after it
	debounceMu   sync.Mutex
	debounce     *time.Timer
	debounceTrig string
	// debounceFirst: when the pending discovery was first asked for.
	debounceFirst time.Time
	// churn counts the discoveries in a row, each soon after the one before, that a
	// list_changed asked for and that changed tools; churnEnd is when the last ended.
	churn    int
	churnEnd time.Time
	// idle counts the discoveries in a row that a list_changed asked for and that changed
	// nothing (idleWait).
	idle      int
	churnHeld bool // the pending discovery waits out churnWait or the budget: a request joining it does not bring it forward
	// spent: when the newest (at most churnBudget) automatic discoveries that changed
	// something ended; deferred: the pending discovery waits for the budget, and the
	// server's page says so. debounceGen names the pending timer, so one cancelled or
	// replaced after it fired does not run.
	spent       []time.Time
	deferred    bool
	debounceGen uint64

	// refusedRun counts the requests in a row the server's transport refused with a 4xx
	// (mcp.ErrRequestRefused): one caller's oversized body refuses that request alone,
	// but a session the server forgot refuses every one. At refusalsToProbe, probeNow
	// asks watch for a health check at once instead of at the next interval.
	refusedRun atomic.Int32
	probeNow   chan struct{}
}

// refusalsToProbe is how many refused requests in a row make the session's health be
// checked at once (noteRefusal): a ping the server refuses too ends the session.
const refusalsToProbe = 3

// noteRefusal notes how a request on the session ended: a 4xx refusal
// (mcp.ErrRequestRefused) adds to refusedRun, and at refusalsToProbe in a row asks
// watch for a health check; any other outcome, success included, resets the run.
func (c *conn) noteRefusal(err error) {
	if err == nil || !errors.Is(err, mcp.ErrRequestRefused) {
		c.refusedRun.Store(0)
		return
	}
	if c.refusedRun.Add(1) >= refusalsToProbe {
		c.refusedRun.Store(0)
		select {
		case c.probeNow <- struct{}{}:
		default:
		}
	}
}

// A server that changes its tools and says so without pause would have them discovered
// back to back, each run writing schema versions, history and an audit entry: after
// Options.ChurnRuns such runs in a row, the next waits Options.ChurnWait, doubling up to
// churnMax, until the server pauses for churnGap. A run that finds nothing changed does
// not add to the count, nor end it: a server announcing every change twice would
// otherwise never be slowed down. Such runs have a count of their own (idleWait).
const (
	churnMax = 5 * time.Minute
	churnGap = 30 * time.Second
)

// churnWait is how long a discovery a list_changed asks for waits on top of the
// debounce delay (debounceMu held): what is left of churnFull since the last run ended.
func (c *conn) churnWait() time.Duration {
	return max(c.churnFull()-time.Since(c.churnEnd), 0)
}

// churnFull is the whole wait the counts call for after a run (debounceMu held).
func (c *conn) churnFull() time.Duration {
	w := c.idleWait()
	if c.churn < c.m.opts.ChurnRuns {
		return w
	}
	return max(w, min(c.m.opts.ChurnWait<<min(c.churn-c.m.opts.ChurnRuns, 6), churnMax))
}

// idleWait is the wait for a server that keeps announcing changes that change nothing:
// each such run still lists every tool and records a run that is announced to every
// page open. After Options.ChurnRuns of them in a row, the next waits twice the
// debounce delay, doubling up to Options.ChurnWait, so a chatty server costs a run
// every few seconds rather than four a second; a change found ends it (debounceMu held).
func (c *conn) idleWait() time.Duration {
	if c.idle < c.m.opts.ChurnRuns {
		return 0
	}
	return min(c.m.opts.Debounce<<min(c.idle-c.m.opts.ChurnRuns+1, 16), c.m.opts.ChurnWait)
}

// churned records a discovery a list_changed asked for: whether it changed anything (or
// failed), which adds to churn, or not, which adds to idle.
func (c *conn) churned(changed bool) {
	c.debounceMu.Lock()
	defer c.debounceMu.Unlock()
	// The whole wait, not what is left of it: sitting out the wait is not the server
	// pausing, or the count would start again once the wait passed churnGap.
	if (c.churn > 0 || c.idle > 0) && time.Since(c.churnEnd) > churnGap+c.churnFull() {
		c.churn, c.idle = 0, 0 // the server paused: what came before no longer counts
	}
	if changed {
		c.churn++
		c.idle = 0
	} else {
		c.idle++
	}
	c.churnEnd = time.Now()
}

// A server may also flip its tools slowly enough to dodge the count above, or flip them
// and reconnect: every discovery that changes something writes schema versions, history
// and an audit entry. So at most churnBudget automatic discoveries (on connect, on
// list_changed) that change something run within churnWindow; past it the next waits
// until the oldest leaves the window. Real servers change their tools on a deploy or a
// configuration change, a few times an hour at most even while being developed; a
// flipping server gets 480 changing runs a day instead of tens of thousands. A person's
// Discover is neither held nor counted (it is audited).
const (
	churnBudget = 20
	churnWindow = time.Hour
)

// budgetWait is how long the next automatic discovery must wait for the budget
// (debounceMu held).
func (c *conn) budgetWait() time.Duration {
	if len(c.spent) < churnBudget {
		return 0
	}
	return max(time.Until(c.spent[len(c.spent)-churnBudget].Add(churnWindow)), 0)
}

// spend records an automatic discovery that changed something.
func (c *conn) spend() {
	c.debounceMu.Lock()
	defer c.debounceMu.Unlock()
	c.spent = append(c.spent, time.Now())
	if n := len(c.spent); n > churnBudget {
		c.spent = append(c.spent[:0], c.spent[n-churnBudget:]...)
	}
}

// maxDebounce is how many debounce delays requests may put a discovery off by.
const maxDebounce = 8

// session is one open MCP session and what to clean up after it.
type session struct {
	cs     *mcp.ClientSession
	ep     *endpoint
	cancel context.CancelFunc
	caps   *mcp.ServerCapabilities
	// tools is what the session listed last (listed.go): a call is sent only on a
	// session that lists the definition it was vetted against.
	tools sessionListing
}

// closeGrace is how long close lets the SDK's Close wait (for the calls in flight to
// end) before it cleans up the endpoint, which ends them.
const closeGrace = 5 * time.Second

func (s *session) close() {
	s.ep.interrupt()
	closed := make(chan struct{})
	go func() {
		_ = s.cs.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(closeGrace):
		// The server holds the session open (a call it never answers): killing its
		// process or ending its HTTP requests ends what Close waits for.
		s.ep.cleanup()
		s.cancel()
		select {
		case <-closed:
		case <-time.After(closeGrace):
			// Still waiting on something cleanup does not end: the supervisor must
			// not hang on it, so Close is left to finish on its own.
		}
	}
	s.cancel()
	s.ep.cleanup()
}

// newConn prepares the supervisor of one server; its context derives from parent (Run's).
func newConn(parent context.Context, m *Manager, cfg registry.Connection, stderr *lineBuffer) *conn {
	ctx, cancel := context.WithCancel(parent)
	masker := maskerOf(cfg)
	// What the server says (an error's text) is stored, published and logged: masked,
	// its NULs replaced (PostgreSQL stores none), and cut, since a server picks its length.
	redact := func(s string) string { return registry.ClipError(textcheck.Storable(masker.String(s))) }
	c := &conn{m: m, cfg: cfg, stderr: stderr, ctx: ctx, cancel: cancel, done: make(chan struct{}), since: time.Now(), discovering: make(chan struct{}, 1),
		masker: masker, redact: redact, probeNow: make(chan struct{}, 1)}
	c.breaker = gobreaker.NewCircuitBreaker[*session](gobreaker.Settings{
		Name:        cfg.Name,
		MaxRequests: 1,
		Timeout:     m.opts.BreakerCooldown,
		ReadyToTrip: func(counts gobreaker.Counts) bool {
			return int(counts.ConsecutiveFailures) >= m.opts.BreakerFailures
		},
	})
	return c
}

func (c *conn) stop() {
	c.cancel()
	<-c.done
}

func (c *conn) snapshot() Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Snapshot{Status: c.status, Error: c.errText, Since: c.since, Failures: c.failures,
		BreakerOpen: c.breaker.State() == gobreaker.StateOpen, NextAttempt: c.nextAttempt}
}

func (c *conn) current() (*mcp.ClientSession, error) {
	s, err := c.live()
	if err != nil {
		return nil, err
	}
	return s.cs, nil
}

// live is the open session with what the server declared, or ErrNotConnected (with the
// last error, when there is one).
func (c *conn) live() (*session, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess == nil {
		if c.errText != "" {
			return nil, ErrNotConnected.Withf("%s: %s", ErrNotConnected.Message, c.errText)
		}
		return nil, ErrNotConnected
	}
	return c.sess, nil
}

// setStatus records a status in memory and in the registry (which announces it).
func (c *conn) setStatus(ctx context.Context, status, errText string, info *registry.ServerInfo) {
	c.statusMu.Lock()
	defer c.statusMu.Unlock()
	c.writeStatus(ctx, status, errText, info)
}

// mask is err with the server's secrets masked in its text (errors.Is still sees err).
func (c *conn) mask(err error) error {
	if err == nil {
		return nil
	}
	if msg := c.redact(err.Error()); msg != err.Error() {
		return &maskedError{msg: msg, err: err}
	}
	return err
}

type maskedError struct {
	msg string
	err error
}

func (e *maskedError) Error() string { return e.msg }
func (e *maskedError) Unwrap() error { return e.err }

// writeStatus is setStatus with statusMu held.
func (c *conn) writeStatus(ctx context.Context, status, errText string, info *registry.ServerInfo) {
	errText = c.redact(errText)
	c.mu.Lock()
	if c.status != status {
		c.since = time.Now()
	}
	c.status, c.errText = status, errText
	c.mu.Unlock()
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := c.m.reg.SetStatus(wctx, c.cfg.ServerID, registry.StatusUpdate{Status: status, Error: errText, Info: info}); err != nil && !errors.Is(err, registry.ErrNotFound) {
		c.m.log.Warn("mcpclient: record status", "server", c.cfg.Name, "status", status, "err", err)
	}
}

// resync writes the live status to the registry again (a no-op when it already says so).
func (c *conn) resync(ctx context.Context) {
	c.statusMu.Lock()
	defer c.statusMu.Unlock()
	c.mu.Lock()
	status, errText := c.status, c.errText
	c.mu.Unlock()
	if status != "" {
		c.writeStatus(ctx, status, errText, nil)
	}
}

// run is the supervisor loop. It owns every session it opens and closes them all
// before it returns.
func (c *conn) run() {
	ctx := c.ctx
	defer close(c.done)
	defer c.cancel()
	bo := c.m.newBackoff()
	for ctx.Err() == nil {
		if c.breaker.State() == gobreaker.StateOpen {
			wait := c.m.opts.BreakerCooldown
			c.mu.Lock()
			c.nextAttempt = time.Now().Add(wait)
			// No clock time in the message: an unchanged status writes nothing.
			msg := fmt.Sprintf("circuit open after %d failed attempts (last: %s); next attempt in %s",
				c.failures, c.errText, wait.Round(time.Second))
			c.mu.Unlock()
			c.setStatus(ctx, registry.StatusError, msg, nil)
			if !sleep(ctx, wait) {
				break
			}
		}
		c.setStatus(ctx, registry.StatusConnecting, "", nil)
		s, err := c.breaker.Execute(func() (*session, error) { return c.open(ctx) })
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
				continue
			}
			c.mu.Lock()
			c.failures++
			wait := bo.NextBackOff()
			c.nextAttempt = time.Now().Add(wait)
			c.mu.Unlock()
			c.setStatus(ctx, registry.StatusError, err.Error(), nil)
			c.m.log.Warn("mcpclient: connect failed", "server", c.cfg.Name, "err", c.mask(err), "retry_in", wait)
			if !sleep(ctx, wait) {
				break
			}
			continue
		}
		connectedAt := time.Now()
		c.mu.Lock()
		c.sess, c.nextAttempt = s, time.Time{}
		c.mu.Unlock()
		c.m.connected(c.cfg.ServerID)
		c.setStatus(ctx, registry.StatusConnected, "", serverInfo(s.cs, c.masker))
		c.m.log.Info("mcpclient: connected", "server", c.cfg.Name)
		c.requestDiscovery("connect")
		reason := c.watch(ctx, s)
		// Only a session that lived a while resets the backoff: a server that dies right
		// after initializing must not be restarted at the shortest delay forever.
		c.mu.Lock()
		c.sess = nil
		if time.Since(connectedAt) >= stableAfter(c.cfg.HealthInterval) {
			bo.Reset()
			c.failures = 0
		}
		c.mu.Unlock()
		c.cancelDebounce()
		s.close()
		if ctx.Err() != nil {
			break
		}
		if exit := s.ep.exitDescription(); exit != "" {
			reason += " (process " + exit + ")"
		}
		if last := c.stderr.Last(); s.ep.cmd != nil && last != "" {
			reason += "; last stderr line: " + last
		}
		c.mu.Lock()
		c.failures++
		wait := bo.NextBackOff()
		c.nextAttempt = time.Now().Add(wait)
		c.mu.Unlock()
		c.setStatus(ctx, registry.StatusError, reason, nil)
		c.m.log.Warn("mcpclient: connection lost", "server", c.cfg.Name, "reason", c.redact(reason), "retry_in", wait)
		if !sleep(ctx, wait) {
			break
		}
	}
	c.mu.Lock()
	if c.sess != nil {
		c.sess.close()
		c.sess = nil
	}
	c.mu.Unlock()
	c.cancelDebounce()
	// Wait for a discovery in flight, so nothing writes about this server after stop
	// (one runs at most maxDiscovery).
	c.discovering <- struct{}{}
	<-c.discovering
}

// open starts one session.
func (c *conn) open(ctx context.Context) (*session, error) {
	lim := c.m.msgLimit(c.cfg)
	ep, err := newEndpoint(c.cfg, c.m.opts.InheritEnv, c.m.confiner, c.stderr, lim, c.m.templateOptions(), c.m.opts.Builtin, c.m.opts.Egress)
	if err != nil {
		return nil, err
	}
	c.m.track(ep)
	// Made before the session opens: a list_changed may arrive while it initializes.
	s := &session{}
	client := c.m.newClient(lim.sdk, func(tools bool) {
		if tools {
			s.tools.forget()
		}
		c.requestDiscovery("list_changed")
	})
	cs, cancel, err := connect(ctx, client, ep, c.cfg.Timeout)
	if err != nil {
		return nil, err
	}
	s.cs, s.ep, s.cancel = cs, ep, cancel
	if ir := cs.InitializeResult(); ir != nil {
		s.caps = ir.Capabilities
	}
	return s, nil
}

// watch returns why the session must be replaced: the connection ended or a health
// check failed. It returns "" when ctx ends.
func (c *conn) watch(ctx context.Context, s *session) string {
	ended := make(chan error, 1)
	go func() { ended <- s.cs.Wait() }()
	tick := time.NewTicker(c.cfg.HealthInterval)
	defer tick.Stop()
	var lastProbe time.Time
	for {
		select {
		case <-ctx.Done():
			return ""
		case err := <-ended:
			if err != nil && !errors.Is(err, mcp.ErrConnectionClosed) {
				return "connection closed: " + err.Error()
			}
			return "connection closed by the server"
		case <-tick.C:
			if reason := c.healthCheck(ctx, s, ended, true /* closes the call circuit */); reason != "" || ctx.Err() != nil {
				return reason
			}
		case <-c.probeNow:
			// Requests are being refused: is it the session? At most one such check a
			// second, whatever the rate of refusals.
			if time.Since(lastProbe) < time.Second {
				continue
			}
			lastProbe = time.Now()
			// Passing, it closes no call circuit: refusals anyone can cause (an oversized
			// read) must not reopen calls to a server that fails them.
			if reason := c.healthCheck(ctx, s, ended, false /* closes no call circuit */); reason != "" || ctx.Err() != nil {
				return reason
			}
		}
	}
}

// healthCheck probes the session; a probe that fails with an error (not a timeout) is
// tried again, up to the server's retries setting, before the session is declared lost. Every probe is recorded. It
// returns why the session must go, or "". A passing probe closes the server's call
// circuit when closes is set.
func (c *conn) healthCheck(ctx context.Context, s *session, ended chan error, closes bool) string {
	for attempt := 0; ; attempt++ {
		lat, err := probe(ctx, s.cs, c.cfg.Timeout)
		if ctx.Err() != nil {
			return ""
		}
		errText := ""
		if err != nil {
			errText = c.redact(err.Error())
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if rerr := c.m.reg.RecordHealth(rctx, c.cfg.ServerID, err == nil, lat, errText); rerr != nil && ctx.Err() == nil {
			c.m.log.Warn("mcpclient: record health", "server", c.cfg.Name, "err", rerr)
		}
		cancel()
		if err == nil {
			// The server answers: whatever made calls fail is over (an HTTP server that
			// restarted behind the same session), so the hooks close its call circuit.
			if closes {
				c.m.connected(c.cfg.ServerID)
			}
			return ""
		}
		// A ping that got no answer within the timeout is not tried again: a hung server
		// would otherwise keep its dead session for retries × timeout.
		if attempt >= c.cfg.Retries || errors.Is(err, ErrTimeout) {
			if attempt > 0 {
				return fmt.Sprintf("health check failed %d times in a row: %s", attempt+1, errText)
			}
			return "health check failed: " + errText
		}
		c.m.log.Warn("mcpclient: health check failed; trying again", "server", c.cfg.Name, "err", errText)
		select {
		case <-ctx.Done():
			return ""
		case err := <-ended:
			ended <- err // watch reports it
			return ""
		case <-time.After(min(c.cfg.HealthInterval, time.Second)):
		}
	}
}

// probe is the health check, shared with Test: one ping round trip within timeout.
func probe(ctx context.Context, cs *mcp.ClientSession, timeout time.Duration) (time.Duration, error) {
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	err := cs.Ping(pctx, nil)
	lat := time.Since(start)
	if err != nil {
		if errors.Is(pctx.Err(), context.DeadlineExceeded) {
			return lat, fmt.Errorf("no answer to ping within %s: %w", timeout, ErrTimeout)
		}
		return lat, fmt.Errorf("ping: %w", err)
	}
	return lat, nil
}

// What serverInfo keeps of a server's self-description: it is stored in the server's
// row and read with it on every page load and status change. Real instructions are a
// few paragraphs, real capabilities well under a KiB.
const (
	maxInstructions = 16 << 10
	maxCapabilities = 16 << 10 // else experimental and extensions are kept by name only
)

// serverInfo is what the server said of itself, its secret values (m) hidden, its NULs
// replaced and its texts shortened (marked so): it is stored and shown on the server's page.
func serverInfo(cs *mcp.ClientSession, m *secrets.Masker) *registry.ServerInfo {
	ir := cs.InitializeResult()
	if ir == nil {
		return &registry.ServerInfo{}
	}
	text := func(s string, n int) string { return clipText(textcheck.Storable(m.String(s)), n) }
	info := &registry.ServerInfo{ProtocolVersion: text(ir.ProtocolVersion, maxListedName),
		Instructions: text(ir.Instructions, maxInstructions)}
	if si := ir.ServerInfo; si != nil {
		info.Name, info.Title, info.Version = text(si.Name, maxListedName), text(si.Title, maxListedName), text(si.Version, maxListedName)
	}
	if ir.Capabilities != nil {
		info.Capabilities = textcheck.StorableJSON(mustJSON(ir.Capabilities))
		if len(info.Capabilities) > maxCapabilities {
			caps := *ir.Capabilities
			caps.Experimental, caps.Extensions = namesOnly(caps.Experimental), namesOnly(caps.Extensions)
			info.Capabilities = textcheck.StorableJSON(mustJSON(&caps))
			if len(info.Capabilities) > maxCapabilities {
				caps.Experimental, caps.Extensions = nil, nil
				info.Capabilities = textcheck.StorableJSON(mustJSON(&caps))
			}
		}
	}
	return info
}

// namesOnly is m with each value emptied, nil for nil.
func namesOnly(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k := range m {
		out[k] = map[string]any{}
	}
	return out
}

// requestDiscovery schedules a discovery after the debounce delay; requests arriving
// meanwhile join it. The first trigger names the run (connect wins over list_changed).
func (c *conn) requestDiscovery(trigger string) {
	c.debounceMu.Lock()
	defer c.debounceMu.Unlock()
	if c.debounce != nil {
		// A notification sent while the session was initializing arrives before the
		// connect request; the run is still the one that follows the connection.
		if trigger == "connect" {
			c.debounceTrig = trigger
		}
		// Joined, but not put off for good: a server that announces changes faster
		// than the delay would otherwise never be discovered.
		if time.Since(c.debounceFirst) < maxDebounce*c.m.opts.Debounce && !c.churnHeld {
			c.debounce.Reset(c.m.opts.Debounce)
		}
		return
	}
	// A list_changed during a run is run after it (discoveryDone asks again), so it
	// waits from that run's end as its count says, not from the one before.
	if trigger == "list_changed" && len(c.discovering) > 0 {
		c.rediscover.Store(true)
		if len(c.discovering) > 0 || !c.rediscover.Swap(false) {
			return // still running, or the run ended and its discoveryDone took the flag
		}
	}
	c.debounceTrig, c.debounceFirst = trigger, time.Now()
	delay := c.m.opts.Debounce
	c.churnHeld = false
	if trigger == "list_changed" {
		if w := c.churnWait(); w > 0 {
			c.churnHeld = true
			delay += w
			if c.churn >= c.m.opts.ChurnRuns {
				c.m.log.Warn("mcpclient: the server keeps changing its tools; discovery waits", "server", c.cfg.Name, "wait", w, "runs_in_a_row", c.churn)
			} else {
				// Debug: such a server now costs little, and says so every few seconds.
				c.m.log.Debug("mcpclient: the server keeps announcing changes that change nothing; discovery waits",
					"server", c.cfg.Name, "wait", w, "unchanged_runs_in_a_row", c.idle)
			}
		}
	}
	c.debounceGen++
	gen := c.debounceGen
	c.debounce = time.AfterFunc(delay, func() { c.discoverDue(gen) })
}

// discoverDue runs the pending discovery, timer gen's, or puts it off while the budget
// is spent.
func (c *conn) discoverDue(gen uint64) {
	// What a server sends must not end the process: a timer's goroutine has no
	// other recover.
	defer func() {
		if p := recover(); p != nil {
			c.m.log.Error("mcpclient: discovery failed on what the server sent", "server", c.cfg.Name, "panic", p)
		}
	}()
	c.debounceMu.Lock()
	if c.debounce == nil || gen != c.debounceGen {
		c.debounceMu.Unlock()
		return // cancelled with its session, or replaced
	}
	trig := c.debounceTrig
	if w := c.budgetWait(); w > 0 {
		c.debounceGen++
		gen := c.debounceGen
		c.debounce = time.AfterFunc(w, func() { c.discoverDue(gen) })
		c.churnHeld = true
		record := !c.deferred
		c.deferred = true
		c.debounceMu.Unlock()
		c.deferDiscovery(trig, w, record)
		return
	}
	c.debounce, c.deferred = nil, false
	c.debounceMu.Unlock()
	ctx := c.ctx
	if ctx.Err() != nil {
		return
	}
	// One at a time, and none queued behind a slow one: it runs again when it ends.
	select {
	case c.discovering <- struct{}{}:
	default:
		c.rediscover.Store(true)
		return
	}
	defer c.discoveryDone()
	res, err := c.discoverLocked(ctx, trig, audit.System)
	if err != nil && ctx.Err() == nil {
		c.m.log.Warn("mcpclient: discovery failed", "server", c.cfg.Name, "trigger", trig, "err", err)
	}
	if ctx.Err() != nil {
		return
	}
	changed := err == nil && res.Added+res.Updated+res.Removed > 0
	// A run that failed counts as one that changed something: a server whose lists
	// keep failing (changing under the pagination, say) is slowed down the same way.
	if trig == "list_changed" {
		c.churned(err != nil || changed)
	}
	if changed {
		c.spend()
	}
}

// deferDiscovery says that the discovery trig asked for waits w for the budget: in the
// log, and (when record is set, once per wait) as a failed run on the server's page.
func (c *conn) deferDiscovery(trig string, w time.Duration, record bool) {
	c.m.log.Warn("mcpclient: the server keeps changing its tools; discovery waits", "server", c.cfg.Name, "wait", w,
		"changing_runs", churnBudget, "within", churnWindow)
	if !record {
		return
	}
	// Written as a run is, holding the token: run waits for it, so nothing is written
	// about the server after it stopped.
	select {
	case c.discovering <- struct{}{}:
		defer c.discoveryDone()
	case <-c.ctx.Done():
		return
	}
	if c.ctx.Err() != nil {
		return
	}
	at := time.Now().Add(w)
	c.recordFailure(c.ctx, registry.Discovery{Trigger: trig, Actor: audit.System, StartedAt: time.Now(), Fingerprint: c.cfg.Fingerprint},
		fmt.Errorf("not run yet: %d discoveries within %d minutes changed the server's tools, the most run automatically; "+
			"the next runs at %s UTC, or Discover runs one now", churnBudget, int(churnWindow.Minutes()), at.UTC().Format("2006-01-02 15:04:05")))
}

func (c *conn) cancelDebounce() {
	c.debounceMu.Lock()
	defer c.debounceMu.Unlock()
	if c.debounce != nil {
		c.debounce.Stop()
		c.debounce = nil
	}
}

// stableAfter is how long a session must last for its server to count as healthy again.
func stableAfter(health time.Duration) time.Duration { return max(2*health, 10*time.Second) }

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
