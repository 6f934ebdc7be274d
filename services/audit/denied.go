package audit

import (
	"context"
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
}

// Denials writes refused requests to the audit log with result denied (issue #17,
// finding 9), rate-limited so that a flood of refusals cannot flood the append-only
// log: what is held back is counted, and the next entry written for that actor says
// how many were.
type Denials struct {
	pool  *pgxpool.Pool
	begin db.TxBeginner // pool, or its Local
	opts  DenialOptions
	lim   *Limiter
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
	return &Denials{pool: pool, begin: o.Local.Beginner(pool), opts: o,
		lim: NewLimiter(LimitOptions{PerKey: o.PerActor, Total: o.Total, What: "refused requests", Logger: o.Logger})}
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
}

type limitKey struct {
	lim      *rate.Limiter
	withheld int
}

// NewLimiter returns a limiter; PerKey and Total must be positive.
func NewLimiter(o LimitOptions) *Limiter {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Limiter{o: o, keys: map[string]*limitKey{}, total: rate.NewLimiter(rate.Limit(float64(o.Total)/60), o.Total)}
}

// maxLimitKeys bounds the keys remembered; past it the memory starts afresh (what
// was held back until then is logged, not lost silently).
const maxLimitKeys = 100_000

// Take reports whether an entry for key may be written now, and how many were held
// back before it: of this key, or with Pooled, of all shared keys. Shared entries (of
// callers who are not signed in) are bounded by Total besides, so a flood from many
// addresses cannot use up what signed-in actors' entries get.
func (l *Limiter) Take(key string, shared bool) (ok bool, withheld int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.o.Now() // under the lock: the rate limiters see times in order
	k := l.keys[key]
	if k == nil {
		if len(l.keys) >= maxLimitKeys {
			held := 0
			for _, k := range l.keys {
				held += k.withheld
			}
			if held > 0 {
				l.o.Logger.Warn("audit: "+l.o.What+" held back and not recorded one by one", "count", held)
			}
			l.keys = map[string]*limitKey{}
		}
		k = &limitKey{lim: rate.NewLimiter(rate.Limit(float64(l.o.PerKey)/60), l.o.PerKey)}
		l.keys[key] = k
	}
	pooled := shared && l.o.Pooled
	if !k.lim.AllowN(now, 1) || shared && !l.total.AllowN(now, 1) {
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
		return false, 0
	}
	if pooled {
		withheld, l.held = l.held, 0
		return true, withheld
	}
	withheld, k.withheld = k.withheld, 0
	return true, withheld
}

// Record appends x as a request.denied entry unless the limit holds it back.
func (d *Denials) Record(ctx context.Context, x Denial) error {
	key := "ip:" + x.Actor.IP
	if x.Actor.ID != "" {
		key = "user:" + x.Actor.ID
	}
	ok, withheld := d.lim.Take(key, x.Actor.ID == "")
	if !ok {
		return nil
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
		payload["withheld_before"] = withheld // refusals of this actor not recorded one by one
	}
	route := x.Route
	if route == "" {
		route = x.Path
	}
	return db.WithTx(ctx, d.begin, func(tx pgx.Tx) error {
		_, err := Append(ctx, tx, Entry{Actor: x.Actor, Action: "request.denied", TargetType: "route",
			TargetID: x.Method + " " + route, TargetName: x.Path, Payload: payload, Result: ResultDenied})
		return err
	})
}
