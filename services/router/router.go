// Package router is the one path every tool call takes (docs/architecture.md, The path of a tool call): the test panel,
// the JSON API, plan steps and the gateway all call Router.Call, which resolves the
// name, checks the tool is enabled and the caller may use it, merges the configured
// values, validates the arguments against the pinned schema, decides risk, applies
// rate limits, calls the server with a timeout (retrying only what is safe to repeat,
// behind a per-server circuit breaker), normalizes the result and records the call.
//
// The fast path touches no database except to write: resolved tools and compiled
// schemas live in memory until an event says they changed, and the audit row, usage
// row and events of many concurrent calls share one transaction (see recorder).
package router

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolwarden/toolwarden/internal/callmeta"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/decide"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/tools"
)

// Topic is the event topic of calls (tool.started, tool.output, tool.completed, tool.failed).
const Topic = "calls"

// Where calls come from (usage logs' source).
const (
	SourceTestPanel = "test_panel"
	SourceAPI       = "api"
	SourceExecution = "execution"
	SourceGateway   = "mcp" // a tools/call through /mcp (services/gateway)
)

// Options tunes a Router; zero fields take the defaults shown.
type Options struct {
	Logger *slog.Logger
	// Display is the short line that says what a call does ("Creating file notes.txt"),
	// for a tool (its qualified name, with a dotted operation when the call named one)
	// and the caller's arguments; "" when it has none. Calls' audit rows and events
	// carry it as display. nil: none (app sets the built-in tools' own).
	Display func(qualifiedName string, args json.RawMessage) string
	// Bus keeps the in-memory snapshot fresh. Without one, every call reads its tool
	// from the database.
	Bus *events.Bus
	// UserRate is how many calls a minute one user (or token's user) may make; the
	// burst is a tenth of it. Default 1200; negative: no limit.
	UserRate int
	// RetryAttempts bounds how often a retryable call is tried. Default 3.
	RetryAttempts uint
	// RetryBackoff is the first wait between tries (doubling, with jitter). Default 100 ms.
	RetryBackoff time.Duration
	// ConnectWait is how long a call waits for a server that is still connecting. Default 5 s.
	ConnectWait time.Duration
	// BreakerFailures consecutive failed calls to one server open its circuit for
	// BreakerCooldown, during which calls fail at once. Defaults 5 and 30 s.
	BreakerFailures uint32
	BreakerCooldown time.Duration
	// MaxBatch bounds how many calls' records share a transaction. Default 512.
	MaxBatch int
	// StopWait bounds how long Run, told to stop, waits for the calls in flight to end
	// so their records are written. Default 15 s.
	StopWait time.Duration
	// Decide says who may confirm a risky call in the test panel (package decide).
	// Default: decide.New over the router's pool.
	Decide *decide.Service
	// Local is this process's buses reading pool: the router begins its transactions
	// on it, so its events are delivered to them before the write of a record returns (see
	// events.Local). nil: they arrive with the NOTIFY.
	Local *events.Local
	// ArgumentRisk, when set, rates a call by its arguments (a built-in terminal's
	// command line): when ok and riskier than the tool's own level, the call takes
	// that level. It only ever raises a call's risk.
	ArgumentRisk func(qualifiedName string, args json.RawMessage) (level risk.Level, why string, ok bool)
	// OperationRisk, when set, is the level of what one call of a tool does (a built-in
	// file read), which replaces the tool's level when that was derived from its
	// annotations (a consolidated tool's annotations speak for its riskiest operation);
	// an administrator's level for the tool is never replaced. ArgumentRisk still raises.
	OperationRisk func(serverID, qualifiedName string, args json.RawMessage) (level risk.Level, why string, ok bool)
	// Preflight, when set, says why a call would be refused however a person decided
	// (a built-in file call's path outside its workspace with no grant yet): Call asks
	// it before a call waits for approval, and refuses the call instead. A *verr.Error
	// becomes invalid_arguments, a forbidden fault forbidden.
	Preflight func(ctx context.Context, qualifiedName string, m callmeta.Meta, args json.RawMessage) error
}

func (o *Options) withDefaults() Options {
	out := Options{}
	if o != nil {
		out = *o
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	if out.UserRate == 0 {
		out.UserRate = 1200
	}
	if out.RetryAttempts == 0 {
		out.RetryAttempts = 3
	}
	if out.RetryBackoff <= 0 {
		out.RetryBackoff = 100 * time.Millisecond
	}
	if out.ConnectWait <= 0 {
		out.ConnectWait = 5 * time.Second
	}
	if out.BreakerFailures == 0 {
		out.BreakerFailures = 5
	}
	if out.BreakerCooldown <= 0 {
		out.BreakerCooldown = 30 * time.Second
	}
	if out.MaxBatch <= 0 {
		out.MaxBatch = 512
	}
	if out.StopWait <= 0 {
		out.StopWait = 15 * time.Second
	}
	return out
}

// Router routes tool calls. Create it with New and start it with Run.
type Router struct {
	tools *tools.Service
	mcp   *mcpclient.Manager
	opts  Options
	log   *slog.Logger
	cache *cache
	users *limiters
	toolL toolLimiters
	rec   *recorder
	dec   *decide.Service

	breakers sync.Map // server id → *callBreaker
	started  time.Time

	// running: Run has started and its ctx has not ended; calls are accepted.
	running atomic.Bool
	// inflight counts the calls Call is in; idle is signalled when the last one ends
	// after running went false, so Run can stop its recorder after them.
	inflight atomic.Int64
	idle     chan struct{}
	// withheld counts the refusals not recorded one by one since Run last logged them.
	withheld atomic.Int64
	// observer is told of each call's outcome (ObserveCalls).
	observer atomic.Pointer[func(CallObservation)]

	mu      sync.Mutex
	runtime map[string]*Runtime // tool id → live state
	touched map[string]time.Time

	hmu     sync.Mutex
	changed map[*func()]struct{} // OnChange's callbacks
}

// CallObservation is how a call to a known tool ended, for the metrics: its server, its
// outcome ("success", "tool_error" for a tool's own error result, or the code it was
// refused or failed with), and, when its server saw it, how long it took.
type CallObservation struct {
	Server  string
	Outcome string
	Ran     bool
	Seconds float64
}

// ObserveCalls has fn told of every call to a known tool as it ends, on the call's own
// goroutine (fn must be quick); nil stops it. A call naming no tool is not observed:
// names are the caller's, and would make any number of series.
func (r *Router) ObserveCalls(fn func(CallObservation)) {
	if fn == nil {
		r.observer.Store(nil)
		return
	}
	r.observer.Store(&fn)
}

// OnChange calls fn after each change that can alter how a call resolves or who may
// make it, once the router has forgotten what it knew before (so Admits asked from fn's
// signal answers with the change). fn runs in the event bus's delivery: it must only
// signal. With no event bus it is never called. stop ends the calls.
func (r *Router) OnChange(fn func()) (stop func()) {
	k := &fn
	r.hmu.Lock()
	if r.changed == nil {
		r.changed = map[*func()]struct{}{}
	}
	r.changed[k] = struct{}{}
	r.hmu.Unlock()
	return func() {
		r.hmu.Lock()
		delete(r.changed, k)
		r.hmu.Unlock()
	}
}

// New returns a router over the tool service and the session manager.
func New(pool *pgxpool.Pool, ts *tools.Service, m *mcpclient.Manager, opts *Options) *Router {
	o := opts.withDefaults()
	dec := o.Decide
	if dec == nil {
		dec = decide.New(pool, auth.New(pool, &auth.Options{Logger: o.Logger, Local: o.Local}))
	}
	r := &Router{tools: ts, mcp: m, opts: o, log: o.Logger, cache: newCache(o.Bus != nil), users: newLimiters(max(o.UserRate, 0)),
		rec: newRecorder(pool, o.Local.Beginner(pool), o.Bus, o.Logger, o.MaxBatch), dec: dec, runtime: map[string]*Runtime{}, touched: map[string]time.Time{},
		started: time.Now(), idle: make(chan struct{}, 1)}
	if m != nil {
		m.OnConnect(r.resetBreaker)
	}
	return r
}

// Run writes call records and follows change events until ctx ends; then it refuses
// new calls, waits (up to Options.StopWait) for the calls in flight to end, and writes
// what is still queued.
func (r *Router) Run(ctx context.Context) error {
	// The recorder outlives ctx: the calls in flight when it ends still write their records.
	recCtx, stopRec := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRec()
	done := make(chan struct{})
	go func() { r.rec.run(recCtx); close(done) }()
	r.running.Store(true)
	go r.logWithheld(ctx)
	if r.opts.Bus != nil {
		r.follow(ctx)
	} else {
		<-ctx.Done()
	}
	r.running.Store(false)
	r.drain()
	stopRec()
	<-done
	if n := r.withheld.Swap(0); n > 0 {
		r.log.Warn("router: refused calls held back by the rate limit and not recorded one by one", "count", n)
	}
	return nil
}

// drain waits, up to Options.StopWait, until no call is in flight. running is false already:
// a call that starts now is refused (see Call), so the count only goes down.
func (r *Router) drain() {
	if r.inflight.Load() == 0 {
		return
	}
	t := time.NewTimer(r.opts.StopWait)
	defer t.Stop()
	for r.inflight.Load() > 0 {
		select {
		case <-r.idle:
		case <-t.C:
			r.log.Warn("router: stopping with calls still running; their records will not be written", "calls", r.inflight.Load())
			return
		}
	}
}

// callEnded counts a call out of the calls in flight, and tells a stopping Run when it
// was the last.
func (r *Router) callEnded() {
	if r.inflight.Add(-1) == 0 && !r.running.Load() {
		select {
		case r.idle <- struct{}{}:
		default:
		}
	}
}

// logWithheld logs, once a minute, how many refused calls the rate limit kept out of
// the records (each caller's next recorded refusal says how many of its own were).
func (r *Router) logWithheld(ctx context.Context) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n := r.withheld.Swap(0); n > 0 {
				r.log.Warn("router: refused calls held back by the rate limit and not recorded one by one", "count", n)
			}
		}
	}
}

// follow clears the snapshot on every change that can alter how a call resolves. It
// watches the bus rather than subscribing, so the snapshot is cleared before the
// change's author hears it committed: a call right after "disabled" is refused. A
// deleted server's call circuit goes, a renamed one's takes the new name.
func (r *Router) follow(ctx context.Context) {
	w := r.opts.Bus.Watch(func(ev events.Event) {
		switch ev.Kind {
		case string(events.ServerStatusChanged), string(events.DiscoveryProgress), string(events.DiscoveryCompleted), string(events.DiscoveryFailed):
		default:
			r.cache.clear()
			r.hmu.Lock()
			for fn := range r.changed {
				(*fn)()
			}
			r.hmu.Unlock()
		}
		switch ev.Kind {
		case string(events.ServerDeleted):
			if p, err := events.ServerDeleted.Decode(ev); err == nil {
				r.forgetBreaker(p.ID)
			}
		case string(events.ServerChanged):
			if p, err := events.ServerChanged.Decode(ev); err == nil {
				r.renameBreaker(p.ID, p.Name)
			}
		}
	}, tools.Topic, registry.ServersTopic)
	r.cache.clear() // anything may have changed before the watch began
	select {
	case <-r.opts.Bus.Ready():
		// The bus delivers what commits from now on; what committed before it first
		// listened it never will, so what was loaded until then is dropped.
		r.cache.clear()
	case <-ctx.Done():
	}
	<-ctx.Done()
	w.Close()
}

// Running reports whether Run has started and is not stopping.
func (r *Router) Running() bool {
	return r.running.Load()
}

// Flush returns once everything recorded before it is written.
func (r *Router) Flush(ctx context.Context) error {
	return r.rec.flush(ctx)
}

// Call is one tool call.
type Call struct {
	Tool      string          // qualified name, id, bare or dotted name
	Arguments json.RawMessage // a JSON object (empty: {})
	Actor     audit.Actor
	// Role is the caller's role; its tool.use decides unless the user has a
	// per-tool permission. System callers (Actor.Kind system) need none.
	Role   auth.Role
	Source string
	// Approval is what the caller's person agreed to, for MEDIUM and HIGH tools.
	Approval Approval
	// Test lets a tool that is not enabled yet be called (the test panel, for people
	// who may enable tools): anything validated, never an invalid tool.
	Test bool
	// ID names the call (a UUID); empty: the router makes one.
	ID string
	// ConversationID groups calls of one agent conversation in the logs.
	ConversationID string
	// Client is the MCP client's name and version (calls through /mcp), for the records.
	Client string
	// Topic, when set, also receives the call's events (an execution's topic).
	Topic string
	// Progress receives the server's progress notifications.
	Progress func(Progress)
	// Pin, when set, is the tool as the call was approved (a plan step): the call is
	// refused as stale_plan if the tool is another, or its definition or configuration
	// changed since (docs/architecture.md, State machines: definition pinning), or its
	// risk rose above Pin.MaxRisk.
	Pin *Pin
	// Expect, for a built-in file write that was previewed (a plan step), is the
	// fingerprint of the content it was previewed against: the write is refused if the
	// file no longer has it (internal/callmeta).
	Expect string
	// Preflight has Prepare ask Options.Preflight too, as Call does before anyone is
	// asked to approve a call: set for a plan being submitted, in the conversation it
	// will run in (ConversationID).
	Preflight bool
}

// Pin is what a prepared call was checked and approved against.
type Pin struct {
	ToolID         string `json:"tool_id"`
	DefinitionHash string `json:"definition_hash"`
	ConfigVersion  int    `json:"configuration_version"`
	// ServerIdentity is the server's connection identity (registry.Connection.Identity,
	// a MAC of its command, environment, URL and credentials) when the call was checked.
	ServerIdentity string `json:"server_identity"`
	// MaxRisk, when set, is the risk level the call was approved at: a call rated higher
	// now (its server no longer trusted, which makes no new configuration version) is
	// refused as stale_plan, for an execution's step skips the approval check. Set by the
	// caller when it calls, never stored with a plan (the plan's own risk is).
	MaxRisk risk.Level `json:"-"`
}

// Progress is one progress notification of a running call; tool.output events carry it.
type Progress = events.Progress

// Result is a completed call. A tool's error result is a Result with IsError.
// structured_content is null when the tool sent none, never left out (DESIGN §1).
type Result struct {
	CallID            string          `json:"call_id"`
	ToolID            string          `json:"tool_id"`
	Tool              string          `json:"tool"`
	Content           []Content       `json:"content"`
	StructuredContent json.RawMessage `json:"structured_content"`
	IsError           bool            `json:"is_error"`
	DurationMS        float64         `json:"duration_ms"`
	Attempts          int             `json:"attempts"`
	Risk              risk.Level      `json:"risk"`
}

// Runtime is a tool's live state (docs/architecture.md, State machines): it is never stored, only kept here and
// sent with call events.
type Runtime = events.Runtime

// The runtime states.
const (
	StateConnecting = "connecting"
	StateExecuting  = "executing"
	StateCompleted  = "completed"
	StateError      = "error"
)

// RuntimeOf returns tool id's live state (zero State when it has not been called since start).
func (r *Router) RuntimeOf(id string) Runtime {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rt := r.runtime[id]; rt != nil {
		return *rt
	}
	return Runtime{}
}

func (r *Router) setRuntime(id, state string, delta int, errText string, ms float64) Runtime {
	r.mu.Lock()
	defer r.mu.Unlock()
	rt := r.runtime[id]
	if rt == nil {
		rt = &Runtime{}
		r.runtime[id] = rt
	}
	rt.Active += delta
	if rt.Active > 0 && state != StateConnecting {
		state = StateExecuting // other calls still run
	}
	rt.State, rt.Since = state, time.Now()
	if state == StateError {
		rt.LastError = errText
	}
	if ms > 0 {
		rt.DurationMS = ms
	}
	return *rt
}

// Call routes one call. A refused or failed call returns an *Error; a tool's own error
// result is a Result with IsError set.
func (r *Router) Call(ctx context.Context, c Call) (*Result, error) {
	start := time.Now()
	// Counted before running is read: a stopping Run that saw no call in flight has
	// set running false before this call reads it.
	r.inflight.Add(1)
	defer r.callEnded()
	if !r.running.Load() {
		return nil, errorOf(CodeUnavailable, "tool calls are not being accepted right now (Toolwarden is starting or stopping); try again shortly")
	}
	callID := c.ID
	if _, err := uuid.Parse(callID); err != nil || callID == "" {
		callID = uuid.NewString()
	}
	key := userKey(c.Actor)
	if re := r.spent(c.Tool, key); re != nil {
		return nil, re.call(callID)
	}
	e, args, err := r.check(ctx, c)
	if e == nil {
		// A name that resolves to no tool has nothing to record against, but its
		// look-ups cost the database several queries: it spends a call like any refusal.
		if re := (*Error)(nil); errors.As(err, &re) && re.Code != CodeRateLimited {
			if wait, which := take(r.users.get(key)); which >= 0 {
				rl := fail(CodeRateLimited, "you have made too many calls that were refused; try again in %s (this one: %s)",
					wait.Round(time.Millisecond), re.Message)
				rl.RetryAfter = wait
				err = rl
			}
		}
		return nil, withCall(err, callID)
	}
	rec := &callRecord{r: r, c: c, id: callID, e: e, args: args.recorded(c.Arguments), start: start}
	if err != nil {
		return nil, rec.refused(ctx, err)
	}
	raw := args.merged
	self, vet, err := r.approve(ctx, e, c)
	if re := (*Error)(nil); errors.As(err, &re) && re.Code == CodeApprovalRequired {
		if pre := r.preflight(ctx, e, c, callID, raw); pre != nil {
			// Refused instead of asked for: audited as the refusal of a risky call it is.
			err, rec.auditRefusal = pre, true
		} else if wait, which := take(r.users.get(key)); which >= 0 {
			// A call that asks for approval counts against its user's rate like any: an
			// agent looping on a risky tool is slowed, not given a refusal (and its
			// record) as fast as it can ask.
			rl := fail(CodeRateLimited, "you have made too many calls; try again in %s", wait.Round(time.Millisecond))
			rl.RetryAfter = wait
			err = rl
		} else {
			rec.charged = true // its refusal below spends no second call
		}
	}
	if err != nil {
		return nil, rec.refused(ctx, err)
	}
	rec.selfApproved, rec.vetting = self, vet
	if wait, which := take(r.users.get(key), r.toolL.get(e.t.ID, e.t.RateLimit)); which >= 0 {
		who := "you have"
		if which == 1 {
			who = e.t.QualifiedName() + " has"
		}
		re := fail(CodeRateLimited, "%s made too many calls; try again in %s", who, wait.Round(time.Millisecond))
		re.RetryAfter = wait
		return nil, rec.refused(ctx, re)
	}
	// The audit row is durable before the server sees the call (docs/security.md).
	if err := rec.started(ctx); err != nil {
		if re := (*Error)(nil); errors.As(err, &re) {
			rec.observe(re.Code, false, 0) // not recorded: the database is what failed
		}
		return nil, err
	}
	identity := ""
	if c.Pin != nil {
		identity = c.Pin.ServerIdentity
	}
	meta := metaOf(c, callID)
	meta.Level = string(e.risk.Level)
	out, attempts, mask, err := r.execute(callmeta.With(ctx, meta), e, raw, identity, c.Progress, rec)
	rec.attempts = attempts
	if err != nil {
		return nil, rec.failed(mask.err(err))
	}
	result := &Result{CallID: callID, ToolID: e.t.ID, Tool: e.t.QualifiedName(), Content: normalize(out.Content),
		IsError: out.IsError, Attempts: attempts, Risk: e.risk.Level}
	if out.StructuredContent != nil {
		// A server's structuredContent is the json.RawMessage it sent (the SDK fork's
		// thirteenth change, third_party/go-sdk/TOOLWARDEN.md): this compacts it, keeping
		// numbers past float64's precision digit for digit, for the check, mask and callers.
		if result.StructuredContent, err = json.Marshal(out.StructuredContent); err != nil {
			return nil, rec.failed(mask.err(fail(CodeUpstream, "the server's structured content is not JSON: %v", err)))
		}
	}
	// Checked as the server sent it; what leaves the router is masked.
	if err := checkOutput(e, out.IsError, result.StructuredContent); err != nil {
		return nil, rec.failed(mask.err(err))
	}
	mask.result(result)
	result.DurationMS = ms(time.Since(start))
	rec.completed(result)
	return result, nil
}

func withCall(err error, id string) error {
	var e *Error
	if errors.As(err, &e) {
		e.CallID = id
	}
	return err
}

func userKey(a audit.Actor) string {
	switch {
	case a.ID != "":
		return "u:" + a.ID
	case a.Name != "":
		return "n:" + a.Name
	}
	return "ip:" + a.IP
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// metaOf is what the built-in server is told of call c (internal/callmeta). A call
// that names no conversation is in its user's own default one.
func metaOf(c Call, callID string) callmeta.Meta {
	m := callmeta.Meta{ConversationID: c.ConversationID, UserID: c.Actor.ID, UserName: c.Actor.Name, Role: string(c.Role),
		ActorKind: string(c.Actor.Kind), TokenID: c.Actor.TokenID, CallID: callID, Source: c.Source, Expect: c.Expect}
	if c.Source == SourceExecution {
		m.ExecutionID = c.Approval.Execution
	}
	if m.ConversationID == "" {
		m.ConversationID = DefaultConversation(c.Actor)
	}
	return m
}

// reservedConversation reports whether id names a default conversation (of a person,
// user-<their id>, or of the system) that is not actor's own. Other ids that start with
// user- are a client's to choose.
func reservedConversation(id string, a audit.Actor) bool {
	if id == DefaultConversation(a) {
		return false
	}
	if id == "system" {
		return true
	}
	rest, ok := strings.CutPrefix(id, "user-")
	return ok && uuid.Validate(rest) == nil && len(rest) == 36
}

// DefaultConversation is the conversation of a call that names none: its user's own.
func DefaultConversation(a audit.Actor) string {
	if a.ID == "" {
		return "system"
	}
	return "user-" + a.ID
}
