package web

import (
	"errors"
	"net/http"
	"sync"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"golang.org/x/time/rate"

	"github.com/toolwarden/toolwarden/handlers"

	"github.com/toolwarden/toolwarden/services/replicas"
	"github.com/toolwarden/toolwarden/views"
)

// forwardRun sends a request about a run another replica holds in its memory (a test
// panel's run, a connection test: their polls and Cancel, whose URLs name the replica,
// views.ReplicaParam) to that replica, as forwardTerminal does a terminal's. A run whose
// replica stopped is gone with it, and so, for the page, is one whose replica cannot be
// reached: the request is answered here, where the run is not kept, so the page says it
// is over instead of asking on in vain. A request that was already forwarded is never
// forwarded again.
func (s *Server) forwardRun(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id := c.QueryParam(views.ReplicaParam)
		rs := s.deps.Replicas
		if rs == nil || s.hops == nil || hopFrom(c) != "" || id == "" || id == rs.Self().ID || uuid.Validate(id) != nil {
			return next(c)
		}
		// Each forwarded request takes one of the nonces the owner remembers for a
		// minute, past which it refuses every hop (terminals' too): a person's pages
		// poll a run a few times a second at most.
		if p := handlers.PrincipalOf(c); p == nil || !s.runHops.allow(p.User.ID) {
			return echo.NewHTTPError(http.StatusTooManyRequests, "too many requests for runs on other replicas; wait a moment")
		}
		owner, err := rs.GetByID(c.Request().Context(), id)
		if errors.Is(err, replicas.ErrGone) {
			return next(c)
		}
		if err != nil {
			return err
		}
		return s.forwardTo(c, owner, "this run", func(c echo.Context, _ error) error { return next(c) })
	}
}

// hopLimits keeps a limiter of forwarded run requests per person, created on first use.
type hopLimits struct {
	mu sync.Mutex
	m  map[string]*rate.Limiter
}

// allow reports whether the person with id may have one more request forwarded now:
// 10 a second, in bursts of 20.
func (l *hopLimits) allow(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim := l.m[id]
	if lim == nil {
		if l.m == nil || len(l.m) >= 100_000 {
			l.m = map[string]*rate.Limiter{} // bounded; a forgotten person starts with a full burst
		}
		lim = rate.NewLimiter(10, 20)
		l.m[id] = lim
	}
	return lim.Allow()
}
