package web

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/handlers"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/replicas"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/views"
)

// forwardRun sends a request about a run another replica holds in its memory (a test
// panel's run, a connection test: their polls and Cancel, whose URLs name the replica,
// views.ReplicaParam) to that replica, as forwardTerminal does a terminal's. A run whose
// replica stopped is gone with it, and so, for a poll, is one whose replica cannot be
// reached: the request is answered here, where the run is not kept, so the page says it
// is over instead of asking on in vain. Cancel is not answered so (the run may go on
// there): 502, try again. A request that was already forwarded is never forwarded again.
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
		if p := handlers.PrincipalOf(c); p == nil || !s.deps.RunHops.Allow(p.User.ID) {
			return echo.NewHTTPError(http.StatusTooManyRequests, "too many requests for runs on other replicas; wait a moment")
		}
		owner, err := rs.GetByID(c.Request().Context(), id)
		if errors.Is(err, replicas.ErrGone) {
			if u := s.unsettled("this run", id); u != nil {
				return u
			}
			return next(c)
		}
		if err != nil {
			return err
		}
		var unreachable func(echo.Context, error) error
		if m := c.Request().Method; m == http.MethodGet || m == http.MethodHead {
			unreachable = func(c echo.Context, _ error) error { return next(c) }
		}
		return s.forwardTo(c, owner, "this run", unreachable)
	}
}

// The test runs this replica holds, as another replica's page socket follows one
// (handlers.RemoteRuns; app/testruns.go sends these). Replicas only: a signed hop
// (auth.PermReplica).

// runOwner serves GET /internal/v1/testruns/:call: whose run it is.
func (s *Server) runOwner(c echo.Context) error {
	run, ok := s.localRun(c)
	if !ok {
		return fault.NotFound("test run")
	}
	return c.JSON(http.StatusOK, map[string]string{"owner": run.Owner()})
}

// runWatch serves GET /internal/v1/testruns/:call/watch: the run counts a watcher for as
// long as the request lasts (until the other replica's socket stops following it, or
// the run ends).
func (s *Server) runWatch(c echo.Context) error {
	run, ok := s.localRun(c)
	if !ok {
		return fault.NotFound("test run")
	}
	defer s.deps.Runs.Watch(run.ID)()
	select {
	case <-c.Request().Context().Done():
	case <-run.Done():
	case <-s.closing:
		// Stopping: the follower asks again, and finds this replica gone (the run
		// ends with it), and says so to its pages.
		return c.NoContent(http.StatusServiceUnavailable)
	}
	return c.NoContent(http.StatusNoContent)
}

// runParts serves GET /internal/v1/testruns/:call/parts?event=N: the run's fragment for
// that event, as this replica's own sockets get it (204 when it is not kept).
func (s *Server) runParts(c echo.Context) error {
	id, err := strconv.ParseInt(c.QueryParam("event"), 10, 64)
	if err != nil || id < 0 {
		return fault.Invalid("invalid_event", "event: must be an event id", nil)
	}
	if _, ok := s.localRun(c); !ok {
		return c.NoContent(http.StatusNoContent)
	}
	html, err := s.hub.live.TestRunFragment(c.Request().Context(), c.Param("call"), id)
	if err != nil {
		return err
	}
	return c.HTML(http.StatusOK, html)
}

// localRun is the run of the path, held here, for a replica's request.
func (s *Server) localRun(c echo.Context) (*router.Run, bool) {
	if hopFrom(c) == "" || s.deps.Runs == nil {
		return nil, false
	}
	return s.deps.Runs.Lookup(c.Param("call"))
}
