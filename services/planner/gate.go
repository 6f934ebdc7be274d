package planner

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/toolwarden/toolwarden/internal/textcheck"
	"github.com/toolwarden/toolwarden/services/fault"
)

// The default bounds of a Gate; the assistant's model calls pass the LLM planner's gate
// (services/assistant), so a person's plans and messages share them.
const (
	DefaultMaxModelCalls       = 4
	DefaultModelCallsPerMinute = 20
	DefaultModelCallBurst      = 5
)

// CodeBusy is the code of the fault for a model call past the replica's bound.
const CodeBusy = "planner_busy"

// GateOptions configures a Gate; the zero value (or nil) means the defaults.
type GateOptions struct {
	MaxCalls  int           // model calls at once on this replica; 0 means DefaultMaxModelCalls
	PerMinute int           // one person's model calls a minute; 0 means DefaultModelCallsPerMinute
	Burst     int           // one person's model calls in quick succession; 0 means DefaultModelCallBurst
	Refill    time.Duration // one call is given back every Refill; 0 means a minute / PerMinute (a test sets it slower)
}

// Gate bounds the calls made to a language model, which is slow and may be paid for: how
// many one replica makes at once, and how many one person makes a minute. A call past
// either is refused at once, not queued, so a request does not hold its turn waiting.
type Gate struct {
	slots     chan struct{}
	perMinute int
	refill    rate.Limit
	burst     int
	mu        sync.Mutex
	callers   map[string]*rate.Limiter // person (user id) → their calls
}

// NewGate returns a gate with the bounds of o.
func NewGate(o *GateOptions) *Gate {
	if o == nil {
		o = &GateOptions{}
	}
	slots := o.MaxCalls
	if slots <= 0 {
		slots = DefaultMaxModelCalls
	}
	g := &Gate{slots: make(chan struct{}, slots), perMinute: o.PerMinute, burst: o.Burst, callers: map[string]*rate.Limiter{}}
	if g.perMinute <= 0 {
		g.perMinute = DefaultModelCallsPerMinute
	}
	if g.burst <= 0 {
		g.burst = DefaultModelCallBurst
	}
	refill := o.Refill
	if refill <= 0 {
		refill = time.Minute / time.Duration(g.perMinute)
	}
	g.refill = rate.Every(refill)
	return g
}

// maxCallers bounds the people a gate remembers: past it, those with their whole burst
// back (as a newcomer has) are forgotten.
const maxCallers = 10000

// Enter takes one of the replica's model calls and one of who's (a user id; callers
// that are no person share ""), or says why not: a 503 CodeBusy fault, or a 429 saying
// when to try again. release gives the replica's call back.
func (g *Gate) Enter(who string) (release func(), err error) {
	select {
	case g.slots <- struct{}{}:
	default:
		return nil, fault.Unavailable(CodeBusy, "the language model is busy with other requests; try again in a moment")
	}
	g.mu.Lock()
	lim := g.callers[who]
	if lim == nil {
		if len(g.callers) >= maxCallers {
			for k, l := range g.callers {
				if l.Tokens() >= float64(g.burst) {
					delete(g.callers, k)
				}
			}
		}
		lim = rate.NewLimiter(g.refill, g.burst)
		g.callers[who] = lim
	}
	g.mu.Unlock()
	if r := lim.Reserve(); r.Delay() > 0 {
		wait := (r.Delay() + time.Second - 1).Truncate(time.Second)
		r.Cancel()
		<-g.slots
		return nil, fault.RateLimited(fmt.Sprintf("the language model may take at most %d of your requests a minute: try again in %s",
			g.perMinute, textcheck.DurationWords(wait)), wait)
	}
	return func() { <-g.slots }, nil
}

// PerMinute is one person's model calls a minute through g.
func (g *Gate) PerMinute() int { return g.perMinute }

type callerKey struct{}

// ForCaller returns ctx saying whose request it is (a user id): an LLM planner counts
// its model call against that person's rate.
func ForCaller(ctx context.Context, userID string) context.Context {
	return context.WithValue(ctx, callerKey{}, userID)
}

// callerOf is the person ctx says the request is of ("" when none).
func callerOf(ctx context.Context) string {
	s, _ := ctx.Value(callerKey{}).(string)
	return s
}
