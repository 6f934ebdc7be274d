package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/sync/singleflight"

	"github.com/toolwarden/toolwarden/internal/toolname"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/schema"
	"github.com/toolwarden/toolwarden/services/secrets"
	"github.com/toolwarden/toolwarden/services/tools"
)

// entry is everything a call needs about one tool, built once and kept until an event
// says the tool, its server or its configuration changed.
type entry struct {
	t          tools.Target
	input      *jsonschema.Schema
	inputErr   error // the input schema does not compile: the tool cannot be called
	output     *jsonschema.Schema
	resolved   tools.Resolved
	risk       risk.Decision
	retry      bool            // safe to call again after a transport failure
	configured []string        // parameters the configuration sets, for the logs
	secrets    map[string]bool // configured parameters whose values are secret
	masker     *secrets.Masker // hides those values in what the call returns
	secretArgs []string        // arguments the input schema marks secret, masked in the records
}

// resolution is a name resolved to a tool, plus the operation a dotted name implies.
type resolution struct {
	e         *entry
	operation string
}

// addOperation puts the operation a dotted name named into args, unless they name one,
// and reports whether it did.
func (res resolution) addOperation(args map[string]json.RawMessage) bool {
	if res.operation == "" {
		return false
	}
	if _, given := args["operation"]; given {
		return false
	}
	args["operation"], _ = json.Marshal(res.operation)
	return true
}

// cache is the in-memory snapshot of resolved names and compiled schemas. Events that
// change tools, servers or permissions clear it; a load that started before a clear
// is not stored (gen), so a stale read cannot outlive the event that made it stale.
// Entries also expire after ttl: should an event never arrive (the database lost it),
// a tool an admin disabled is refused within that, not served until the next change.
type cache struct {
	enabled bool
	ttl     time.Duration

	mu    sync.RWMutex
	gen   uint64
	refs  map[string]keptRef
	perms map[string]keptPerms // by user id

	// Compiled schemas, kept across clears: a definition hash names one schema forever.
	// smu guards only the map, never a compile (compiling one large schema must not hold
	// up every other tool's first call); compiling coalesces concurrent callers of one key.
	smu      sync.Mutex
	schemas  map[string]*compiled // definition hash + side → compiled schema
	order    []string             // keys of schemas, oldest first, for eviction
	sbytes   int                  // raw bytes of the schemas held
	maxBytes int                  // bound on sbytes (a compiled schema retains ~14× its raw size)
	maxCount int                  // bound on len(schemas)
	flights  singleflight.Group
	compile  func(json.RawMessage) (*jsonschema.Schema, error)
}

// resolveTTL is how long a resolved name or a user's permissions are kept, as long as
// the token cache keeps a token (auth): a backstop for lost events.
const resolveTTL = 30 * time.Second

type keptRef struct {
	res resolution
	at  time.Time
}

type keptPerms struct {
	may map[string]bool // tool id → may use
	at  time.Time
}

type compiled struct {
	s    *jsonschema.Schema
	err  error
	size int // len of the raw schema, counted against maxBytes
}

// Bounds of the compiled-schema cache. 16 MiB of raw schemas is thousands of tools of
// ordinary size, yet compiled (~14× raw) stays in the low hundreds of megabytes.
const (
	schemaCacheBytes = 16 << 20
	schemaCacheCount = 50_000
)

func newCache(enabled bool) *cache {
	return &cache{
		enabled: enabled, ttl: resolveTTL, refs: map[string]keptRef{}, perms: map[string]keptPerms{},
		schemas: map[string]*compiled{}, maxBytes: schemaCacheBytes, maxCount: schemaCacheCount,
		compile: schema.CompileSchema,
	}
}

func (c *cache) clear() {
	c.mu.Lock()
	c.gen++
	c.refs = map[string]keptRef{}
	c.perms = map[string]keptPerms{}
	c.mu.Unlock()
}

func (c *cache) lookup(ref string) (resolution, uint64, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	k, ok := c.refs[ref]
	return k.res, c.gen, ok && c.enabled && time.Since(k.at) < c.ttl
}

func (c *cache) store(gen uint64, ref string, r resolution) {
	if !c.enabled {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen == gen {
		if len(c.refs) > 20_000 {
			c.refs = map[string]keptRef{} // bounded: names callers invent cannot grow it forever
		}
		c.refs[ref] = keptRef{res: r, at: time.Now()}
	}
}

// schema compiles raw once per definition hash and side. Concurrent callers of one key
// wait for a single compile; callers of other keys do not wait for it at all.
func (c *cache) schema(hash, side string, raw json.RawMessage) (*jsonschema.Schema, error) {
	key := hash + "/" + side
	if got, ok := c.cached(key); ok {
		return got.s, got.err
	}
	v, _, _ := c.flights.Do(key, func() (any, error) {
		// A flight that ended between the miss above and this one joining stored its
		// result: use it rather than compile again.
		if got, ok := c.cached(key); ok {
			return got, nil
		}
		s, err := c.compile(raw)
		got := &compiled{s: s, err: err, size: len(raw)}
		c.put(key, got)
		return got, nil
	})
	got := v.(*compiled)
	return got.s, got.err
}

func (c *cache) cached(key string) (*compiled, bool) {
	c.smu.Lock()
	defer c.smu.Unlock()
	got, ok := c.schemas[key]
	return got, ok
}

// put stores a compiled schema, evicting the oldest until both bounds hold: old
// definition hashes fall out first. A schema larger than the whole byte bound is not
// kept (its tool's entry still holds it until the next clear).
func (c *cache) put(key string, got *compiled) {
	c.smu.Lock()
	defer c.smu.Unlock()
	if _, ok := c.schemas[key]; ok || got.size > c.maxBytes {
		return
	}
	for len(c.order) > 0 && (len(c.schemas) >= c.maxCount || c.sbytes+got.size > c.maxBytes) {
		old := c.order[0]
		c.order = c.order[1:]
		c.sbytes -= c.schemas[old].size
		delete(c.schemas, old)
	}
	c.schemas[key] = got
	c.order = append(c.order, key)
	c.sbytes += got.size
}

// resolve finds the tool a call names: a tool id, a qualified name ("server__tool"), a
// bare tool name that only one server has, or any of those with a dotted operation
// ("file_operations.read_file" is file_operations with operation "read_file", seed 001;
// refused as ambiguous when another server's tool has the whole name, loadBareDotted).
func (r *Router) resolve(ctx context.Context, ref string) (resolution, error) {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return resolution{}, fail(CodeToolNotFound, "name the tool to call (\"server__tool\" or its id)")
	}
	res, gen, ok := r.cache.lookup(ref)
	if ok {
		return res, nil
	}
	res, err := r.load(ctx, ref)
	if err != nil {
		return resolution{}, err
	}
	r.cache.store(gen, ref, res)
	return res, nil
}

func (r *Router) load(ctx context.Context, ref string) (resolution, error) {
	if base, op, dotted := toolname.CutOperation(ref); dotted && !toolname.Qualified(ref) {
		if res, done, err := r.loadBareDotted(ctx, ref, base, op); done {
			return res, err
		}
	}
	t, err := r.find(ctx, ref)
	if err == nil {
		e, err := r.build(t)
		return resolution{e: e}, err
	}
	var notFound *Error
	if !errors.As(err, &notFound) || notFound.Code != CodeToolNotFound {
		return resolution{}, err
	}
	// Dotted: the part before the first dot (after any server prefix) is the tool.
	base, op, dotted := toolname.CutOperation(ref)
	if !dotted {
		return resolution{}, err
	}
	t, berr := r.find(ctx, base)
	if berr != nil {
		return resolution{}, err // report the name as given
	}
	e, berr := r.build(t)
	return resolution{e: e, operation: op}, berr
}

// loadBareDotted reads a bare dotted name both ways: "a.b" may be a tool named "a.b"
// or tool "a" with operation "b". When callable tools of different servers answer the
// two readings, the name is refused as ambiguous, so that a server's tool named like
// another's operation cannot capture its calls; tools that cannot be called now do not
// count, so a disabled look-alike takes the dotted name from no one. done is false when
// the usual order (the whole name first) decides.
func (r *Router) loadBareDotted(ctx context.Context, ref, base, op string) (res resolution, done bool, err error) {
	whole, err := r.callableNamed(ctx, ref)
	if err != nil {
		return resolution{}, true, err
	}
	// The dotted reading counts whenever it exists, callable or not: with the built-in
	// disabled, a look-alike must not take the name that means the built-in.
	dotted, err := r.tools.TargetsNamed(ctx, base)
	if err != nil {
		return resolution{}, true, err
	}
	switch {
	case len(dotted) == 0:
		return resolution{}, false, nil
	case len(whole) == 0:
		t, err := r.find(ctx, base)
		if err != nil {
			return resolution{}, false, nil // reported as the usual order reports it
		}
		e, err := r.build(t)
		return resolution{e: e, operation: op}, true, err
	case len(whole) == 1 && len(dotted) == 1 && whole[0].ServerID == dotted[0].ServerID:
		return resolution{}, false, nil // one server's names: its own choice, the whole name
	}
	var names []string
	for _, t := range whole {
		names = append(names, t.QualifiedName())
	}
	for _, t := range dotted {
		if n := t.QualifiedName() + "." + op; !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return resolution{}, true, onSeveral(ref, names)
}

// callableNamed lists the tools called name on any server that can be called now
// (enabled, on an enabled server that offers them), as admit requires. A full list may
// have left callable ones out, so then all count: disabled look-alikes on many servers
// must not hide a reading.
func (r *Router) callableNamed(ctx context.Context, name string) ([]tools.Target, error) {
	ts, err := r.tools.TargetsNamed(ctx, name)
	if err != nil || len(ts) >= namedLimit {
		return ts, err
	}
	out := ts[:0]
	for _, t := range ts {
		if t.ServerEnabled && t.Available && t.Status == "enabled" {
			out = append(out, t)
		}
	}
	return out, nil
}

// namedLimit is how many tools TargetsNamed lists at most.
const namedLimit = 10

// onSeveral is the error for a bare name that tools of several servers answer.
func onSeveral(ref string, names []string) error {
	return fail(CodeToolNotFound, "%q is a tool of several servers; call one of %s", ref, strings.Join(names, ", "))
}

func (r *Router) find(ctx context.Context, ref string) (tools.Target, error) {
	t, err := r.tools.Target(ctx, ref)
	if err == nil {
		return t, nil
	}
	if !errors.Is(err, tools.ErrNotFound) {
		return tools.Target{}, err
	}
	if toolname.Qualified(ref) {
		return tools.Target{}, fail(CodeToolNotFound, "there is no tool %q", ref)
	}
	ts, err := r.tools.TargetsNamed(ctx, ref)
	if err != nil {
		return tools.Target{}, err
	}
	switch len(ts) {
	case 0:
		return tools.Target{}, fail(CodeToolNotFound, "there is no tool %q; use its qualified name (\"server__tool\")", ref)
	case 1:
		return ts[0], nil
	}
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.QualifiedName()
	}
	return tools.Target{}, onSeveral(ref, names)
}

func (r *Router) build(t tools.Target) (*entry, error) {
	e := &entry{t: t, risk: t.Risk(), retry: retryable(t.Annotations, t.ServerTrusted), secretArgs: tools.SecretArgNames(t.InputSchema)}
	e.input, e.inputErr = r.cache.schema(t.DefinitionHash, "in", t.InputSchema)
	if len(t.OutputSchema) > 0 && string(t.OutputSchema) != "null" {
		// An output schema that does not compile is reported by validation; calls then
		// go without the output check rather than not at all.
		e.output, _ = r.cache.schema(t.DefinitionHash, "out", t.OutputSchema)
	}
	cfg := t.Configuration().Declared(t.InputSchema)
	res, err := r.tools.Resolve(t.ID, cfg)
	if err != nil {
		return nil, fmt.Errorf("router: configuration of %s: %w", t.QualifiedName(), err)
	}
	e.resolved = res
	e.secrets = map[string]bool{}
	var hidden []json.RawMessage
	for name, st := range cfg.Params {
		e.configured = append(e.configured, name)
		if st.Secret != "" {
			e.secrets[name] = true
			hidden = append(hidden, res.Fixed[name], res.Defaults[name])
		}
	}
	e.masker = secrets.NewJSONMasker(hidden...)
	return e, nil
}

// retryable: only a call that cannot change anything may be sent twice — a read-only
// tool, or an idempotent one that says it is not destructive — and only when the server
// is trusted to tell the truth about that (docs/architecture.md, The path of a tool call).
func retryable(annotations json.RawMessage, trusted bool) bool {
	if !trusted {
		return false
	}
	var a struct {
		ReadOnly    *bool `json:"readOnlyHint"`
		Destructive *bool `json:"destructiveHint"`
		Idempotent  *bool `json:"idempotentHint"`
	}
	if json.Unmarshal(annotations, &a) != nil {
		return false
	}
	if a.ReadOnly != nil && *a.ReadOnly {
		return true
	}
	return a.Idempotent != nil && *a.Idempotent && a.Destructive != nil && !*a.Destructive
}

// mayUse reports whether user userID with the role's answer roleCan may call tool id,
// after the user's per-tool permission rows.
func (r *Router) mayUse(ctx context.Context, userID, toolID string, roleCan bool) (bool, error) {
	if userID == "" {
		return roleCan, nil
	}
	r.cache.mu.RLock()
	kept, ok := r.cache.perms[userID]
	gen := r.cache.gen
	r.cache.mu.RUnlock()
	perms := kept.may
	if !ok || !r.cache.enabled || time.Since(kept.at) >= r.cache.ttl {
		var err error
		if perms, err = r.tools.UsePermissions(ctx, userID); err != nil {
			return false, err
		}
		if r.cache.enabled {
			r.cache.mu.Lock()
			if r.cache.gen == gen {
				r.cache.perms[userID] = keptPerms{may: perms, at: time.Now()}
			}
			r.cache.mu.Unlock()
		}
	}
	if v, ok := perms[toolID]; ok {
		return v, nil
	}
	return roleCan, nil
}
