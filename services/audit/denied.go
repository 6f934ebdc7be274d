package audit

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/time/rate"

	"github.com/toolwarden/toolwarden/internal/httpmethod"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/events"
)

// Denial is a request refused because its caller may not make it.
type Denial struct {
	Actor  Actor
	Method string
	Route  string // the route pattern ("/api/v1/tools/:id"), "" when none matched
	Path   string
	Status int
	Code   string // the error code answered ("forbidden", "unauthenticated")
	Reason string // the message answered
}

// DenialOptions tune Denials; zero fields take the defaults shown.
type DenialOptions struct {
	// PerActor bounds the entries one actor (a user, or an address for callers not
	// signed in) adds a minute; a burst of as many is allowed. Default 20.
	PerActor int
	// Total bounds the entries all callers who are not signed in add a minute
	// together (they have as many addresses as they like). Default 600.
	Total  int
	Logger *slog.Logger
	// Local is this process's buses reading pool: the recorder begins its transactions
	// on it, so its events are delivered to them before Record returns (see
	// events.Local). nil: they arrive with the NOTIFY.
	Local *events.Local
	// maxKeys and now are LimitOptions.MaxKeys and Now, for tests.
	maxKeys int
	now     func() time.Time
	// quiet is how long refusals of callers not signed in stay pooled, no entry counting
	// them, before an entry of their own does (default DefaultQuiet; tests shorten it).
	quiet time.Duration
}

// Denials writes refused requests to the audit log with result denied (issue #17,
// finding 9), rate-limited so that a flood of refusals cannot flood the append-only
// log: what is held back is counted, and the next entry written for that actor (for
// callers not signed in: for any of them, whatever their address) says how many were.
// Refusals that no such entry has counted after a quiet interval, or at Close, are
// counted by an entry of their own: the system's for callers not signed in, the
// caller's for a signed-in one.
type Denials struct {
	pool  *pgxpool.Pool
	begin db.TxBeginner // pool, or its Local
	opts  DenialOptions
	// pooled is the limit with its quiet flush: refusals pooled and forgotten callers'
	// ones that no entry counted are written by entries of the system's, signed-in
	// callers' by entries of theirs.
	pooled *PooledLimiter
}

// NewDenials returns a recorder of refused requests.
func NewDenials(pool *pgxpool.Pool, opts *DenialOptions) *Denials {
	o := DenialOptions{}
	if opts != nil {
		o = *opts
	}
	if o.PerActor <= 0 {
		o.PerActor = 20
	}
	if o.Total <= 0 {
		o.Total = 600
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	d := &Denials{pool: pool, begin: o.Local.Beginner(pool), opts: o}
	// Pooled: callers not signed in have as many addresses as they like and rarely
	// come back on one, so a count kept per address would mostly go unreported.
	lim := NewLimiter(LimitOptions{PerKey: o.PerActor, Total: o.Total, Pooled: true, MaxKeys: o.maxKeys,
		What: "refused requests", Logger: o.Logger, Now: o.now})
	d.pooled = NewPooledLimiter(lim, PooledOptions{Quiet: o.quiet,
		// Refusals of callers not signed in that no entry let through has counted (a
		// flood that stopped, a shutdown).
		WritePooled: d.recordCount("refused requests of callers not signed in held back by the rate " +
			"limit, and counted by no later refusal of theirs: none was recorded since"),
		// Refusals held back whose callers the limit forgot (Limiter.Forgotten).
		WriteForgotten: d.recordCount("refused requests held back by the rate limit, of callers it no longer " +
			"remembers: the limit keeps so many callers, then starts over"),
		WriteHeld: d.recordHeld})
	return d
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// LimitOptions tune a Limiter.
type LimitOptions struct {
	// PerKey bounds the entries one key (an actor, an address) adds a minute; a burst
	// of as many is allowed.
	PerKey int
	// Total bounds the entries all shared keys add a minute together, with a burst of
	// as many.
	Total int
	// Pooled counts the shared entries held back all together rather than per key: the
	// next shared entry let through, whatever its key, reports them all. For callers
	// with as many keys as they like, most of which never come back.
	Pooled bool
	// MaxKeys bounds the keys remembered (default 100,000); past it the memory starts
	// afresh, and what its keys held back is counted by Forgotten.
	MaxKeys int
	// What the entries are, for the log ("refused requests").
	What   string
	Logger *slog.Logger
	// Now is the limiter's clock; nil is time.Now.
	Now func() time.Time
}

// Limiter bounds what a kind of entry adds to the append-only log, per key and for
// all shared keys together, and counts what it holds back so that a later entry can
// say how many were.
type Limiter struct {
	o     LimitOptions
	mu    sync.Mutex
	total *rate.Limiter
	keys  map[string]*limitKey
	held  int // shared entries held back since the last one let through (Pooled)
	// drains counts the times a pooled count was taken (by an entry let through, or a
	// flush), so that a flush can tell whether one was written since it was armed.
	drains uint64
	// forgotten is what keys held back when the memory started over, until Forgotten
	// takes it.
	forgotten int
	// keyHeld is what unshared keys hold back together (their withheld summed).
	keyHeld int
	// epoch is bumped by each arming of a quiet flush (armed): a key whose last entry
	// held back is of an earlier epoch than the flush's was quiet for its interval.
	epoch uint64
}

type limitKey struct {
	lim      *rate.Limiter
	withheld int
	who      Actor  // the caller of the key's last entry held back
	epoch    uint64 // the limiter's epoch then
}

// Held is what one key held back: n entries of who's, the last held back.
type Held struct {
	Key string
	Who Actor
	N   int
}

// NewLimiter returns a limiter; PerKey and Total must be positive.
func NewLimiter(o LimitOptions) *Limiter {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxKeys <= 0 {
		o.MaxKeys = maxLimitKeys
	}
	return &Limiter{o: o, keys: map[string]*limitKey{}, total: rate.NewLimiter(rate.Limit(float64(o.Total)/60), o.Total)}
}

// maxLimitKeys is LimitOptions.MaxKeys's default.
const maxLimitKeys = 100_000

// take reports whether an entry for key may be written now, and how many were held
// back before it: of this key, or with Pooled, of all shared keys. Shared entries (of
// callers who are not signed in) are bounded by Total besides, so a flood from many
// addresses cannot use up what signed-in actors' entries get. who, the caller of an
// unshared entry it holds back, is kept for the entry that counts them should no later
// one of theirs (takeHeld).
func (l *Limiter) take(key string, shared bool, who Actor) (ok bool, withheld int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.o.Now() // under the lock: the rate limiters see times in order
	pooled := shared && l.o.Pooled
	// Total is asked first, without spending: a shared entry it holds back costs its
	// key nothing, and with Pooled is not even remembered by key, so a flood from
	// addresses that never come back does not fill the keys (and start them over).
	totalOK := !shared || l.total.TokensAt(now) >= 1
	k := l.keys[key]
	if k == nil && !(pooled && !totalOK) {
		if len(l.keys) >= l.o.MaxKeys {
			held := 0
			for _, k := range l.keys {
				held += k.withheld
			}
			if held > 0 {
				l.o.Logger.Warn("audit: "+l.o.What+" held back and not recorded one by one", "count", held)
				l.forgotten += held
			}
			l.keys, l.keyHeld = map[string]*limitKey{}, 0
		}
		k = &limitKey{lim: rate.NewLimiter(rate.Limit(float64(l.o.PerKey)/60), l.o.PerKey)}
		l.keys[key] = k
	}
	if !totalOK || !k.lim.AllowN(now, 1) {
		if pooled {
			if l.held == 0 {
				l.o.Logger.Warn("audit: " + l.o.What + " are no longer each recorded (rate limit)")
			}
			l.held++
			return false, 0
		}
		if k.withheld == 0 {
			l.o.Logger.Warn("audit: "+l.o.What+" of one caller are no longer each recorded (rate limit)", "actor", key)
		}
		k.withheld++
		k.who, k.epoch = who, l.epoch
		l.keyHeld++
		return false, 0
	}
	if shared {
		l.total.AllowN(now, 1) // it has the token: TokensAt said so, under the same lock and time
	}
	if pooled {
		withheld, l.held = l.held, 0
		if withheld > 0 {
			l.drains++
		}
		return true, withheld
	}
	withheld, k.withheld = k.withheld, 0
	l.keyHeld -= withheld
	return true, withheld
}

// Forgotten returns, and clears, how many entries the keys forgotten when the memory
// started over (MaxKeys) had held back: no later entry of theirs will say so, so the
// caller writes an entry for them. With Pooled, only unshared keys hold any.
func (l *Limiter) Forgotten() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.forgotten
	l.forgotten = 0
	return n
}

// unforget gives back n forgotten entries whose entry could not be written.
func (l *Limiter) unforget(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.forgotten += n
}

// pending returns the entries held back and not yet counted: pooled, forgotten, and
// of unshared keys.
func (l *Limiter) pending() (held, forgotten, keyHeld int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held, l.forgotten, l.keyHeld
}

// armed starts an epoch for a quiet flush being armed, returning it and how many
// times a pooled count was taken so far.
func (l *Limiter) armed() (epoch, drains uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.epoch++
	return l.epoch, l.drains
}

// takeHeld returns, and clears, what unshared keys whose last entry held back is of an
// epoch before `before` held back: a key held back in the flush's epoch is not quiet
// yet (its next entry let through may count them).
func (l *Limiter) takeHeld(before uint64) []Held {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Held
	if l.keyHeld == 0 {
		return nil
	}
	for key, k := range l.keys {
		if k.withheld > 0 && k.epoch < before {
			out = append(out, Held{Key: key, Who: k.who, N: k.withheld})
			l.keyHeld -= k.withheld
			k.withheld = 0
		}
	}
	return out
}

// takePooled returns, and clears, the pooled count; with since, only if no count was
// taken since drains was since (else the entry that took it counted them, and those
// pooled after are younger than the flush's interval).
func (l *Limiter) takePooled(since *uint64) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if since != nil && *since != l.drains {
		return 0
	}
	n := l.held
	l.held = 0
	if n > 0 {
		l.drains++
	}
	return n
}

// giveBack gives back n held-back entries that Take(key, shared) returned for an entry
// that could not be written: to the pool (Pooled, shared), else to key, or when the
// memory forgot key since, to the forgotten count. It reports whether they went where
// only a flush counts them should no entry come (the pool, the forgotten count).
func (l *Limiter) giveBack(key string, shared bool, n int) (flushed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if shared && l.o.Pooled {
		l.held += n
		return true
	}
	if k := l.keys[key]; k != nil {
		k.withheld += n
		l.keyHeld += n
		return false
	}
	l.forgotten += n
	return true
}

// Record appends x as a request.denied entry unless the limit holds it back.
func (d *Denials) Record(ctx context.Context, x Denial) error {
	key := "ip:" + x.Actor.IP
	if x.Actor.ID != "" {
		key = "user:" + x.Actor.ID
	}
	// A refusal of a caller not signed in that is pooled arms the quiet flush, should
	// no entry let through count it.
	ok, withheld := d.pooled.take(key, x.Actor.ID == "", x.Actor)
	// A forgotten count whose entry fails is tried again by the next Record and, should
	// none come, the quiet flush; this refusal's own entry still goes.
	ferr := d.pooled.writeForgotten(ctx)
	if ferr != nil {
		d.pooled.Arm()
	}
	if !ok {
		return ferr
	}
	// The path is the caller's to choose: what the append-only log keeps of it is
	// bounded text.
	x.Path = clip(strings.ToValidUTF8(strings.ReplaceAll(x.Path, "\x00", ""), "\uFFFD"), 300)
	// So is the method (any token, of any length, to Go's server): the standard ones
	// are kept, any other is OTHER.
	x.Method = httpmethod.Label(x.Method)
	payload := map[string]any{"method": x.Method, "path": x.Path, "status": x.Status, "code": x.Code, "reason": x.Reason}
	if x.Route != "" {
		payload["route"] = x.Route
	}
	if withheld > 0 {
		// Refusals not recorded one by one: of this user, or of any caller not signed in.
		payload["withheld_before"] = withheld
	}
	route := x.Route
	if route == "" {
		route = x.Path
	}
	err := db.WithTx(ctx, d.begin, func(tx pgx.Tx) error {
		_, err := Append(ctx, tx, Entry{Actor: x.Actor, Action: "request.denied", TargetType: "route",
			TargetID: x.Method + " " + route, TargetName: x.Path, Payload: payload, Result: ResultDenied})
		return err
	})
	if err != nil {
		// The count this entry took went with it: the next entry, or the quiet flush,
		// counts it.
		d.pooled.GiveBack(key, x.Actor.ID == "", withheld)
	}
	return errors.Join(ferr, err)
}

// recordCount is a writer of one entry of the system's counting, in withheld_before, n
// refusals the limit held back that no entry counts otherwise, saying why (reason): so
// that every refusal is still an entry or counted by one.
func (d *Denials) recordCount(reason string) func(ctx context.Context, n int) error {
	return func(ctx context.Context, n int) error {
		return AppendAlone(ctx, d.begin, Entry{Actor: System, Action: "request.denied", TargetType: "route",
			Payload: map[string]any{"withheld_before": n, "reason": reason}, Result: ResultDenied})
	}
}

// recordHeld writes an entry per signed-in caller counting, in withheld_before, the
// refusals of theirs the limit held back that no later refusal of theirs counted: under
// their name, so that filtering the log by actor finds them.
func (d *Denials) recordHeld(ctx context.Context, held []Held) error {
	entries := make([]Entry, len(held))
	for i, h := range held {
		// Who they are, not what one refusal carried (its address, request, user agent):
		// the entry counts refusals of several requests.
		who := Actor{Kind: h.Who.Kind, ID: h.Who.ID, Name: h.Who.Name, TokenID: h.Who.TokenID, TokenName: h.Who.TokenName}
		entries[i] = Entry{Actor: who, Action: "request.denied", TargetType: "route", Result: ResultDenied,
			Payload: map[string]any{"withheld_before": h.N, "reason": "refused requests of this caller held back by the " +
				"rate limit, and counted by no later refusal of theirs: none was recorded since"}}
	}
	return db.WithTx(ctx, d.begin, func(tx pgx.Tx) error {
		_, err := AppendBatch(ctx, tx, entries)
		return err
	})
}

// Close stops the quiet timer and writes what the limit holds back that no entry has
// counted yet (refusals of callers not signed in, those of forgotten callers, and
// signed-in callers' that no later refusal of theirs counted), which
// would otherwise go with the process; the app calls it on shutdown, once no request
// is served. It may be called more than once. A Record after it is still written, but
// only an entry let through counts what it pools.
func (d *Denials) Close(ctx context.Context) error {
	return d.pooled.Close(ctx)
}
