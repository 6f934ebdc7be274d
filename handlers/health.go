package handlers

import (
	"log/slog"
	"maps"
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"
	"github.com/toolwarden/toolwarden/services/system"
	"github.com/toolwarden/toolwarden/static"
)

// HealthHandler serves the liveness and readiness probes.
type HealthHandler struct {
	Logger *slog.Logger
	System *system.Service
	// Components are what the process knows of its other parts (app.App.Health: this
	// replica's heartbeat, components that panicked), added to System's report; nil:
	// none.
	Components func() map[string]system.Component
}

// Healthz is the liveness probe: it answers 200 while the process serves (DESIGN's
// "process up"), with the state of each component, naming what is down (the database,
// the embedded PostgreSQL being restarted) as "degraded". A 503 here would have an
// orchestrator restart every replica during a database outage, which a restart cannot
// mend; /readyz answers 503 then, so traffic goes elsewhere. Both answer from a report
// shared by the probes that ask while its check runs (system.ProbeHealth).
func (h HealthHandler) Healthz(c echo.Context) error {
	report := h.System.ProbeHealth(c.Request().Context())
	if h.Components != nil {
		more := h.Components()
		for _, name := range slices.Sorted(maps.Keys(more)) {
			if _, taken := report.Components[name]; taken {
				continue // the system service's own check of it is the one reported
			}
			comp := more[name]
			report.Components[name] = comp
			if comp.Status != system.Up {
				report.OK, report.Status = false, "degraded"
				report.Down = append(report.Down, name)
			}
		}
	}
	return c.JSON(http.StatusOK, report)
}

// Readyz answers 200 when the database is reachable and its migrations are current.
func (h HealthHandler) Readyz(c echo.Context) error {
	st, err := h.System.ProbeReadiness(c.Request().Context())
	if err != nil {
		// The detail (socket paths, role names) is for the log, not for anonymous callers.
		h.Logger.Warn("readyz: database unreachable", "err", err)
		return c.JSON(http.StatusServiceUnavailable, map[string]any{"status": "unavailable", "database": "unreachable"})
	}
	body := map[string]any{"status": "ok", "database": "ok", "migration": st.Version, "latest_migration": st.Latest, "dirty": st.Dirty}
	if !st.Current() {
		body["status"] = "migrations pending"
		return c.JSON(http.StatusServiceUnavailable, body)
	}
	return c.JSON(http.StatusOK, body)
}

// Favicon answers /favicon.ico, which browsers ask for whatever a page links, with the
// SVG icon the pages name.
func Favicon(c echo.Context) error {
	return c.Redirect(http.StatusMovedPermanently, static.URL("img/favicon.svg"))
}
