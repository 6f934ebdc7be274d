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
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sony/gobreaker/v2"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/decide"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/schema"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/verr"
)

// Topic is the event topic of calls (tool.started, tool.output, tool.completed, tool.failed).
const Topic = "calls"

// Where calls come from (usage logs' source).
const (
	SourceTestPanel = "test_panel"
	SourceAPI       = "api"
	SourceExecution = "execution"
	SourceGateway   = "gateway"
)

// Options tunes a Router; zero fields take the defaults shown.
type Options struct {
	Logger *slog.Logger
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
	// Decide says who may confirm a risky call in the test panel (package decide).
	// Default: decide.New over the router's pool.
	Decide *decide.Service
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

	breakers sync.Map // server id → *gobreaker.CircuitBreaker[*mcp.CallToolResult]

	mu      sync.Mutex
	runtime map[string]*Runtime // tool id → live state
	touched map[string]time.Time
	running bool
}

// New returns a router over the tool service and the session manager.
func New(pool *pgxpool.Pool, ts *tools.Service, m *mcpclient.Manager, opts *Options) *Router {
	o := opts.withDefaults()
	dec := o.Decide
	if dec == nil {
		dec = decide.New(pool, auth.New(pool, &auth.Options{Logger: o.Logger}))
	}
	return &Router{tools: ts, mcp: m, opts: o, log: o.Logger, cache: newCache(o.Bus != nil), users: newLimiters(max(o.UserRate, 0)),
		rec: newRecorder(pool, o.Bus, o.Logger, o.MaxBatch), dec: dec, runtime: map[string]*Runtime{}, touched: map[string]time.Time{}}
}

// Run writes call records and follows change events until ctx ends; then it writes
// what is still queued.
func (r *Router) Run(ctx context.Context) error {
	r.mu.Lock()
	r.running = true
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.running = false
		r.mu.Unlock()
	}()
	done := make(chan struct{})
	go func() { r.rec.run(ctx); close(done) }()
	if r.opts.Bus != nil {
		r.follow(ctx)
	}
	<-done
	return nil
}

// follow clears the snapshot on every change that can alter how a call resolves. It
// watches the bus rather than subscribing, so the snapshot is cleared before the
// change's author hears it committed: a call right after "disabled" is refused.
func (r *Router) follow(ctx context.Context) {
	w := r.opts.Bus.Watch(func(ev events.Event) {
		switch ev.Kind {
		case string(events.ServerStatusChanged), string(events.DiscoveryProgress), string(events.DiscoveryCompleted), string(events.DiscoveryFailed):
		default:
			r.cache.clear()
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

// Running reports whether Run has started.
func (r *Router) Running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running
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
	// Topic, when set, also receives the call's events (an execution's topic).
	Topic string
	// Progress receives the server's progress notifications.
	Progress func(Progress)
	// Pin, when set, is the tool as the call was approved (a plan step): the call is
	// refused as stale_plan if the tool is another, or its definition or configuration
	// changed since (docs/architecture.md, State machines: definition pinning).
	Pin *Pin
}

// Pin is what a prepared call was checked and approved against.
type Pin struct {
	ToolID         string `json:"tool_id"`
	DefinitionHash string `json:"definition_hash"`
	ConfigVersion  int    `json:"configuration_version"`
	// ServerIdentity is the server's connection identity (registry.Connection.Identity,
	// a MAC of its command, environment, URL and credentials) when the call was checked.
	ServerIdentity string `json:"server_identity"`
}

// Approval is the consent a risky call carries.
type Approval struct {
	Confirmed bool   // a person confirmed this call (enough for MEDIUM)
	Phrase    string // the phrase a person typed (HIGH)
	Execution string // the call is a step of this approved execution
}

// Progress is one progress notification of a running call; tool.output events carry it.
type Progress = events.Progress

// Result is a completed call. A tool's error result is a Result with IsError.
type Result struct {
	CallID            string          `json:"call_id"`
	ToolID            string          `json:"tool_id"`
	Tool              string          `json:"tool"`
	Content           []Content       `json:"content"`
	StructuredContent json.RawMessage `json:"structured_content,omitempty"`
	IsError           bool            `json:"is_error"`
	DurationMS        float64         `json:"duration_ms"`
	Attempts          int             `json:"attempts"`
	Risk              risk.Level      `json:"risk"`
}

// Phrase is what a person types to run a HIGH tool directly: its qualified name.
func Phrase(qualifiedName string) string { return qualifiedName }

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
	if !r.Running() {
		return nil, errorOf(CodeUnavailable, "tool calls are not being accepted right now (Toolwarden is starting or stopping); try again shortly")
	}
	callID := c.ID
	if _, err := uuid.Parse(callID); err != nil || callID == "" {
		callID = uuid.NewString()
	}
	e, args, err := r.check(ctx, c)
	if e == nil {
		return nil, withCall(err, callID)
	}
	rec := &callRecord{r: r, c: c, id: callID, e: e, args: c.Arguments, start: start}
	if err != nil {
		return nil, rec.refused(ctx, err)
	}
	raw := args.merged
	self, err := r.approve(ctx, e, c)
	if err != nil {
		return nil, rec.refused(ctx, err)
	}
	rec.selfApproved = self
	if wait, which := take(start, r.users.get(userKey(c.Actor)), r.toolL.get(e.t.ID, e.t.RateLimit)); which >= 0 {
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
		return nil, err
	}
	identity := ""
	if c.Pin != nil {
		identity = c.Pin.ServerIdentity
	}
	mask := r.masksOf(e)
	out, attempts, err := r.execute(ctx, e, raw, identity, c.Progress, rec, mask)
	rec.attempts = attempts
	if err != nil {
		return nil, rec.failed(mask.err(err))
	}
	result := &Result{CallID: callID, ToolID: e.t.ID, Tool: e.t.QualifiedName(), Content: normalize(out.Content),
		IsError: out.IsError, Attempts: attempts, Risk: e.risk.Level}
	if out.StructuredContent != nil {
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

// pinned refuses a call whose tool, or its server's connection, is no longer what
// was approved.
func (r *Router) pinned(ctx context.Context, e *entry, p *Pin) error {
	if p == nil {
		return nil
	}
	t := e.t
	switch {
	case t.ID == p.ToolID && p.ServerIdentity != r.mcp.Identity(ctx, t.ServerID):
		return fail(CodeStale, "the connection settings of server %s (its command, environment, URL or credentials) changed since %s was approved; plan and approve it again",
			t.Server, t.QualifiedName())
	case t.ID != p.ToolID:
		return fail(CodeStale, "%s is no longer the tool that was approved", t.QualifiedName())
	case t.DefinitionHash != p.DefinitionHash:
		return fail(CodeStale, "%s changed its definition since it was approved (now version %s); plan and approve it again",
			t.QualifiedName(), t.Version())
	case t.ConfigVersion != p.ConfigVersion:
		return fail(CodeStale, "%s's configuration changed since it was approved (version %d, approved %d); plan and approve it again",
			t.QualifiedName(), t.ConfigVersion, p.ConfigVersion)
	}
	return nil
}

// Prepared is a call checked as far as it can be without running it: the tool it
// names, the arguments it would send (configured values merged, secret ones masked)
// and its risk. Plans are made of prepared calls.
type Prepared struct {
	Pin
	Tool      string          `json:"tool"` // qualified name
	Server    string          `json:"server"`
	Arguments json.RawMessage `json:"arguments"` // as given (plus a dotted name's operation)
	// Effective are the arguments the server would get; configured secret values
	// show as "••••••".
	Effective json.RawMessage `json:"effective_arguments"`
	Risk      risk.Decision   `json:"risk"`
}

// MaskedSecret stands for a configured secret value in Prepared.Effective.
const MaskedSecret = "••••••"

// Prepare resolves, admits, merges and validates c like Call, without approval, rate
// limits, records or running it. Errors are *Error with Call's codes.
func (r *Router) Prepare(ctx context.Context, c Call) (*Prepared, error) {
	e, args, err := r.check(ctx, c)
	if err != nil {
		return nil, err
	}
	given, err := json.Marshal(args.given)
	if err != nil {
		return nil, err
	}
	masked := maps.Clone(args.values)
	for name := range e.secrets {
		if _, ok := masked[name]; ok {
			masked[name], _ = json.Marshal(MaskedSecret)
		}
	}
	effective, err := json.Marshal(masked)
	if err != nil {
		return nil, err
	}
	t := e.t
	return &Prepared{Pin: Pin{ToolID: t.ID, DefinitionHash: t.DefinitionHash, ConfigVersion: t.ConfigVersion, ServerIdentity: r.mcp.Identity(ctx, t.ServerID)},
		Tool: t.QualifiedName(), Server: t.Server, Arguments: given, Effective: effective, Risk: e.risk}, nil
}

// checkedArgs are a call's arguments once checked: as given (plus a dotted name's
// operation), with configured values merged, and that merge as JSON.
type checkedArgs struct {
	given, values map[string]json.RawMessage
	merged        json.RawMessage
}

// check is what Call and Prepare share: parse, resolve, pin, admit, merge and
// validate. The entry is nil when the name did not resolve; an error with an entry
// is a refusal of that tool.
func (r *Router) check(ctx context.Context, c Call) (*entry, checkedArgs, error) {
	args, err := parseArguments(c.Arguments)
	if err != nil {
		return nil, checkedArgs{}, err
	}
	res, err := r.resolve(ctx, c.Tool)
	if err != nil {
		return nil, checkedArgs{}, err
	}
	e := res.e
	if err := r.pinned(ctx, e, c.Pin); err != nil {
		return e, checkedArgs{}, err
	}
	if res.operation != "" {
		if _, given := args["operation"]; !given {
			args["operation"], _ = json.Marshal(res.operation)
		}
	}
	if err := r.admit(ctx, e, c); err != nil {
		return e, checkedArgs{}, err
	}
	merged, err := e.resolved.Merge(args)
	if err != nil {
		return e, checkedArgs{}, invalid(err)
	}
	raw, err := json.Marshal(merged)
	if err != nil {
		return e, checkedArgs{}, err
	}
	if err := schema.ValidateArguments(e.input, json.RawMessage(raw)); err != nil {
		return e, checkedArgs{}, invalid(hideSecrets(err, e.secrets))
	}
	return e, checkedArgs{given: args, values: merged, merged: raw}, nil
}

func parseArguments(raw json.RawMessage) (map[string]json.RawMessage, error) {
	args := map[string]json.RawMessage{}
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		return args, nil
	}
	if !strings.HasPrefix(s, "{") {
		return nil, errorOf(CodeInvalidArguments, "arguments must be a JSON object").
			with([]verr.Field{{Field: "", Message: "must be a JSON object", Kind: verr.KindType}})
	}
	if err := json.Unmarshal(raw, &args); err != nil {
		return nil, errorOf(CodeInvalidArguments, "arguments are not valid JSON: "+err.Error()).
			with([]verr.Field{{Field: "", Message: "is not valid JSON", Kind: verr.KindType}})
	}
	return args, nil
}

func withCall(err error, id string) error {
	var e *Error
	if errors.As(err, &e) {
		e.CallID = id
	}
	return err
}

// invalid turns field errors into invalid_arguments naming every bad parameter.
func invalid(err error) error {
	var ve *verr.Error
	if !errors.As(err, &ve) {
		return err
	}
	parts := make([]string, len(ve.Fields))
	for i, f := range ve.Fields {
		where := strings.TrimPrefix(f.Field, "/")
		if where == "" {
			where = "arguments"
		}
		parts[i] = where + " " + f.Message
	}
	return errorOf(CodeInvalidArguments, strings.Join(parts, "; ")).with(ve.Fields)
}

// hideSecrets rewrites what validation says about configured secret values: its
// messages may quote the value (a pattern it does not match).
func hideSecrets(err error, secrets map[string]bool) error {
	var ve *verr.Error
	if len(secrets) == 0 || !errors.As(err, &ve) {
		return err
	}
	for i, f := range ve.Fields {
		name, _, _ := strings.Cut(strings.TrimPrefix(f.Field, "/"), "/")
		if secrets[name] {
			ve.Fields[i].Message = "the configured secret value is not accepted by the tool's schema; an administrator must set it again"
		}
	}
	return ve
}

// admit checks the tool may be called now and by this caller.
func (r *Router) admit(ctx context.Context, e *entry, c Call) error {
	t := e.t
	name := t.QualifiedName()
	switch {
	case !t.ServerEnabled:
		return fail(CodeToolDisabled, "%s cannot be called: its server %s is disabled", name, t.Server)
	case !t.Available:
		return fail(CodeToolDisabled, "%s cannot be called: its server no longer offers it", name)
	case t.Status == "enabled":
	case c.Test && Testable(t.Status):
	case c.Test:
		return fail(CodeToolDisabled, "%s cannot be tested while it is %s", name, t.Status)
	default:
		return fail(CodeToolDisabled, "%s is %s; an administrator must enable it before it can be called", name, t.Status)
	}
	if e.inputErr != nil {
		return fail(CodeToolDisabled, "%s cannot be called: its input schema is not usable (%v)", name, e.inputErr)
	}
	if c.Actor.Kind == audit.ActorSystem {
		return nil
	}
	ok, err := r.mayUse(ctx, c.Actor.ID, t.ID, c.Role.Can(auth.PermToolUse))
	if err != nil {
		return err
	}
	if !ok {
		return fail(CodeForbidden, "you may not use %s; ask an administrator for access", name)
	}
	return nil
}

// approve applies the approval rule (docs/architecture.md, The path of a tool call): LOW runs; MEDIUM needs a confirm; HIGH the typed phrase;
// a step of an approved execution carries its approval. Who may give that approval is
// package decide's to say (a person, never a token; for HIGH someone other than the
// caller whenever another could). self reports a high-risk call its own caller
// approved because nobody else could.
func (r *Router) approve(ctx context.Context, e *entry, c Call) (self bool, err error) {
	level := e.risk.Level
	if level == risk.Low || c.Approval.Execution != "" && c.Source == SourceExecution {
		return false, nil
	}
	if err := consent(e, c); err != nil {
		return false, err
	}
	// A person confirmed it (or typed the phrase): may they decide on their own call?
	v, err := r.dec.Check(ctx, decide.Decision{Actor: c.Actor, Role: c.Role, Requester: c.Actor.ID, Level: level,
		Verb: "run a " + string(level) + "-risk tool", Vetting: vetting(e, c)})
	fe, ok := fault.As(err)
	if !ok || fe.Kind != fault.KindForbidden {
		return v.SelfApproved, err
	}
	need := ApprovalNeeded{Risk: string(level), Why: e.risk.Why, Needs: "approver", Executions: "/api/v1/executions"}
	return false, fail(CodeApprovalRequired, "%s is %s risk (%s); %s: submit it as a plan, where they can approve it",
		e.t.QualifiedName(), level, e.risk.Why, fe.Message).with(need)
}

// vetting reports a test run of a tool not enabled yet, by someone who may enable tools
// (Call.Test): the runs that vet a tool before anyone else can call it.
func vetting(e *entry, c Call) bool { return c.Test && e.t.Status != "enabled" }

// approvalGiven is the approval c carries on its own: only a person in a page confirms
// a direct call, so an API or gateway call, or any call made with an API token,
// carries none, whatever its form fields say.
func approvalGiven(c Call) Approval {
	if c.Source == SourceAPI || c.Source == SourceGateway || c.Actor.Kind != audit.ActorUser {
		return Approval{}
	}
	return c.Approval
}

// consent is nil when c may run as far as its risk goes before anyone is asked (LOW,
// a step of an approved execution, or a confirm or phrase given), else the
// approval_required error saying what it needs.
func consent(e *entry, c Call) error {
	if c.Approval.Execution != "" && c.Source == SourceExecution {
		return nil
	}
	ap := approvalGiven(c)
	level := e.risk.Level
	name := e.t.QualifiedName()
	need := ApprovalNeeded{Risk: string(level), Why: e.risk.Why}
	switch level {
	case risk.Low:
		return nil
	case risk.Medium:
		if ap.Confirmed {
			return nil
		}
		need.Needs = "confirm"
	default:
		if ap.Phrase == Phrase(name) {
			return nil
		}
		need.Needs, need.Phrase = "phrase", Phrase(name)
	}
	msg := fmt.Sprintf("%s is %s risk (%s)", name, level, e.risk.Why)
	switch {
	case c.Source == SourceAPI || c.Source == SourceGateway:
		need.Executions = "/api/v1/executions"
		msg += "; submit it as a plan to POST /api/v1/executions, where a person can approve it"
	case c.Actor.Kind != audit.ActorUser:
		need.Executions = "/api/v1/executions"
		msg += "; an API token cannot confirm it: submit it as a plan to POST /api/v1/executions, where a person can approve it"
	case need.Needs == "phrase" && c.Approval.Phrase != "":
		msg += fmt.Sprintf("; the phrase typed does not match: type %q exactly", need.Phrase)
	case need.Needs == "phrase":
		msg += fmt.Sprintf("; type %q to run it", need.Phrase)
	default:
		msg += "; confirm to run it"
	}
	return errorOf(CodeApprovalRequired, msg).with(need)
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

// execute calls the server with the tool's timeout, waiting for a server that is
// still connecting, retrying a retryable tool after transport failures, behind the
// server's circuit breaker.
func (r *Router) execute(ctx context.Context, e *entry, args json.RawMessage, identity string, onProgress func(Progress), rec *callRecord, mask masks) (*mcp.CallToolResult, int, error) {
	timeout := time.Duration(e.t.Timeout()) * time.Millisecond
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	progress := func(p *mcp.ProgressNotificationParams) {
		pr := Progress{Progress: p.Progress, Total: p.Total, Message: mask.text(p.Message)}
		if onProgress != nil {
			onProgress(pr)
		}
		rec.progress(pr)
	}
	cb := r.breaker(e.t.ServerID)
	attempts := 0
	op := func() (*mcp.CallToolResult, error) {
		attempts++
		if err := r.waitConnected(cctx, e); err != nil {
			return nil, err
		}
		res, err := cb.Execute(func() (*mcp.CallToolResult, error) {
			return r.mcp.CallToolBound(cctx, e.t.ServerID, identity, e.t.Name, args, progress)
		})
		if err == nil {
			return res, nil
		}
		ce := r.classify(cctx, ctx, e, err, timeout)
		if !e.retry || ce.Code != CodeUpstream || errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, mcpclient.ErrIdentityChanged) {
			return nil, backoff.Permanent(ce)
		}
		return nil, ce
	}
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval = r.opts.RetryBackoff
	res, err := backoff.Retry(cctx, op, backoff.WithBackOff(bo), backoff.WithMaxTries(r.opts.RetryAttempts),
		backoff.WithMaxElapsedTime(timeout))
	if err != nil {
		var ce *Error
		if !errors.As(err, &ce) {
			ce = r.classify(cctx, ctx, e, err, timeout)
		}
		return nil, attempts, ce
	}
	return res, attempts, nil
}

// classify turns a failed call into the caller's error: the caller went away, the
// tool's timeout passed, or the server failed.
func (r *Router) classify(cctx, ctx context.Context, e *entry, err error, timeout time.Duration) *Error {
	switch {
	case ctx.Err() != nil:
		return errorOf(CodeCancelled, "the caller cancelled the call").ran()
	case cctx.Err() != nil || errors.Is(err, context.DeadlineExceeded):
		return fail(CodeTimeout, "%s did not answer within %s (its timeout); "+
			"raise the tool's timeout or ask for less", e.t.QualifiedName(), timeout).ran()
	case errors.Is(err, gobreaker.ErrOpenState):
		return fail(CodeUpstream, "calls to %s are paused after %d failures in a row; they resume within %s",
			e.t.Server, r.opts.BreakerFailures, r.opts.BreakerCooldown)
	case errors.Is(err, mcpclient.ErrIdentityChanged):
		return fail(CodeStale, "the connection settings of server %s changed since %s was approved; plan and approve it again",
			e.t.Server, e.t.QualifiedName())
	case errors.Is(err, mcpclient.ErrNotConnected):
		return fail(CodeUpstream, "server %s is not connected: %s", e.t.Server, strings.TrimPrefix(err.Error(), mcpclient.ErrNotConnected.Error()+": "))
	case errors.Is(err, mcpclient.ErrResultTooLarge):
		// Not upstream_error: asking again gets the same answer, so it is never retried.
		return errorOf(CodeResultTooLarge, strings.TrimPrefix(err.Error(), "mcpclient: call "+e.t.Name+": ")).ran()
	}
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "mcpclient: call "+e.t.Name+": ")
	return fail(CodeUpstream, "server %s failed the call: %s", e.t.Server, msg).ran()
}

// waitConnected waits while the server is connecting (at most ConnectWait).
func (r *Router) waitConnected(ctx context.Context, e *entry) error {
	deadline := time.Now().Add(r.opts.ConnectWait)
	for {
		if _, err := r.mcp.Session(e.t.ServerID); err == nil {
			return nil
		}
		snap := r.mcp.Snapshot(e.t.ServerID)
		if snap.Status != registry.StatusConnecting || snap.BreakerOpen || time.Now().After(deadline) {
			_, err := r.mcp.Session(e.t.ServerID)
			return err
		}
		r.setRuntime(e.t.ID, StateConnecting, 0, "", 0)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (r *Router) breaker(serverID string) *gobreaker.CircuitBreaker[*mcp.CallToolResult] {
	if cb, ok := r.breakers.Load(serverID); ok {
		return cb.(*gobreaker.CircuitBreaker[*mcp.CallToolResult])
	}
	limit := r.opts.BreakerFailures
	cb := gobreaker.NewCircuitBreaker[*mcp.CallToolResult](gobreaker.Settings{
		Name: serverID, Timeout: r.opts.BreakerCooldown,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= limit },
		// A caller that gave up, a call that timed out, or an answer over the size cap
		// (the session read past it and goes on) says nothing about the server's health.
		IsSuccessful: func(err error) bool {
			return err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
				errors.Is(err, mcpclient.ErrIdentityChanged) || errors.Is(err, mcpclient.ErrResultTooLarge)
		},
	})
	got, _ := r.breakers.LoadOrStore(serverID, cb)
	return got.(*gobreaker.CircuitBreaker[*mcp.CallToolResult])
}

// checkOutput validates structured content against the tool's output schema (a tool
// with an output schema must return conforming structured content, unless its result
// is an error).
func checkOutput(e *entry, isError bool, structured json.RawMessage) error {
	if e.output == nil || isError {
		return nil
	}
	if len(structured) == 0 || string(structured) == "null" {
		return fail(CodeUpstream, "%s declares an output schema but returned no structured content", e.t.QualifiedName()).ran()
	}
	if err := schema.ValidateArguments(e.output, structured); err != nil {
		var ve *verr.Error
		errors.As(err, &ve)
		out := fail(CodeUpstream, "%s returned structured content that does not match its output schema: %v",
			e.t.QualifiedName(), strings.TrimPrefix(err.Error(), "invalid input: ")).ran()
		if ve != nil {
			out.Details = ve.Fields
		}
		return out
	}
	return nil
}
