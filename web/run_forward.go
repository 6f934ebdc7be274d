package web

import (
	"errors"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

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
