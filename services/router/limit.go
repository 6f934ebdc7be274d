package router

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// perMinute is a limiter of n calls a minute that allows a burst of a tenth of that
// (at least one), so a quiet caller can make a few calls at once.
func perMinute(n int) *rate.Limiter {
	return rate.NewLimiter(rate.Limit(float64(n)/60), max(1, n/10))
}

// limiters keeps one limiter per key (a user), created on first use.
type limiters struct {
	perMin int // 0: no limit
	mu     sync.Mutex
	m      map[string]*userLimit
}

// userLimit is one caller's limiter, and how many of its refusals were held back
// since one was last recorded.
type userLimit struct {
	lim      *rate.Limiter
	withheld atomic.Int64
}

func newLimiters(perMin int) *limiters {
	return &limiters{perMin: perMin, m: map[string]*userLimit{}}
}

func (l *limiters) get(key string) *rate.Limiter {
	if u := l.entry(key); u != nil {
		return u.lim
	}
	return nil
}

// entry is key's limit, nil when there is none.
func (l *limiters) entry(key string) *userLimit {
	if l.perMin <= 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	u, ok := l.m[key]
	if !ok {
		if len(l.m) > 100_000 {
			l.m = map[string]*userLimit{} // bounded; a forgotten caller starts with a full burst
		}
		u = &userLimit{lim: perMinute(l.perMin)}
		l.m[key] = u
	}
	return u
}

// take spends one token from each limiter, or none: when one of them has no token it
// returns how long until it will, and the tokens of the others are given back. It reads
// the clock itself: a limiter given an earlier time than the last it saw moves its clock
// back and credits that span again, so a call's start (before it was validated, maybe a
// second ago) let concurrent calls through at many times the limit.
func take(lims ...*rate.Limiter) (time.Duration, int) {
	now := time.Now()
	var rs []*rate.Reservation
	for i, lim := range lims {
		if lim == nil {
			continue
		}
		r := lim.ReserveN(now, 1)
		if d := r.DelayFrom(now); !r.OK() || d > 0 {
			r.CancelAt(now)
			for _, prev := range rs {
				prev.CancelAt(now)
			}
			if !r.OK() {
				d = time.Minute
			}
			return d, i
		}
		rs = append(rs, r)
	}
	return 0, -1
}

// spent is the rate_limited answer to a call whose caller has no call left and whose
// tool the snapshot does not hold, else nil. Every way through Call spends one of its
// caller's calls, so the call would be answered so anyway; answered before its name is
// looked up, a caller looping on names that resolve to nothing (never kept) cannot
// load the database past its limit. A name the snapshot holds costs no query and goes
// the usual way, whose answer says more.
func (r *Router) spent(ref, key string) *Error {
	lim := r.users.get(key)
	if lim == nil {
		return nil
	}
	wait := untilToken(lim)
	if wait <= 0 {
		return nil
	}
	if _, _, held := r.cache.lookup(strings.TrimSpace(ref)); held {
		return nil
	}
	rl := fail(CodeRateLimited, "you have made too many calls; try again in %s", wait.Round(time.Millisecond))
	rl.RetryAfter = wait
	return rl
}

// untilToken is how long until lim has a token, 0 when it has one now; it spends none.
func untilToken(lim *rate.Limiter) time.Duration {
	short := 1 - lim.Tokens()
	if short <= 0 {
		return 0
	}
	if lim.Limit() <= 0 {
		return time.Minute
	}
	return max(time.Millisecond, time.Duration(short/float64(lim.Limit())*float64(time.Second)))
}

// toolLimiters keeps each tool's limiter by tool id, however the tool was named, and
// across snapshot clears; a changed rate starts a new one.
type toolLimiters struct {
	mu sync.Mutex
	m  map[string]toolLimiter
}

type toolLimiter struct {
	perMin int
	lim    *rate.Limiter
}

func (l *toolLimiters) get(toolID string, perMin *int) *rate.Limiter {
	if perMin == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]toolLimiter{}
	}
	cur, ok := l.m[toolID]
	if !ok || cur.perMin != *perMin {
		cur = toolLimiter{perMin: *perMin, lim: perMinute(*perMin)}
		l.m[toolID] = cur
	}
	return cur.lim
}
