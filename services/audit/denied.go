package audit

import (
	"context"
	"log/slog"
	"strings"
	"sync"
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
	log   *slog.Logger

	mu    sync.Mutex
	total *rate.Limiter
	keys  map[string]*denialKey
}

type denialKey struct {
	lim      *rate.Limiter
	withheld int
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
	return &Denials{pool: pool, begin: o.Local.Beginner(pool), opts: o, log: o.Logger, keys: map[string]*denialKey{},
		total: rate.NewLimiter(rate.Limit(float64(o.Total)/60), o.Total)}
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

// maxDenialKeys bounds the actors remembered; past it the memory starts afresh (what
// was held back until then is logged, not lost silently).
const maxDenialKeys = 100_000

// take reports whether an entry for key may be written now, and how many were held
// back before it. Signed-in actors have their own limit each; callers who are not
// share one more (anonymous), so a flood from many addresses cannot use up what signed-in
// actors' refusals get.
func (d *Denials) take(key string, anonymous bool) (ok bool, withheld int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	k := d.keys[key]
	if k == nil {
		if len(d.keys) >= maxDenialKeys {
			held := 0
			for _, k := range d.keys {
				held += k.withheld
			}
			if held > 0 {
				d.log.Warn("audit: refused requests held back and not recorded one by one", "count", held)
			}
			d.keys = map[string]*denialKey{}
		}
		k = &denialKey{lim: rate.NewLimiter(rate.Limit(float64(d.opts.PerActor)/60), d.opts.PerActor)}
		d.keys[key] = k
	}
	if !k.lim.Allow() || anonymous && !d.total.Allow() {
		if k.withheld == 0 {
			d.log.Warn("audit: refused requests of one caller are no longer each recorded (rate limit)", "actor", key)
		}
		k.withheld++
		return false, 0
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
	ok, withheld := d.take(key, x.Actor.ID == "")
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
