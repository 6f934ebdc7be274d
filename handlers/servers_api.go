package handlers

import (
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/verr"
)

// serverInput is the JSON body of POST /api/v1/servers and PATCH /api/v1/servers/:id
// (docs/api.md). On PATCH, absent fields stay as they are; in env and headers a null
// value removes that name and names not mentioned are kept.
type serverInput struct {
	Name             *string            `json:"name"`
	Type             *string            `json:"type"`
	Description      *string            `json:"description"`
	Command          *string            `json:"command"`
	Args             *[]string          `json:"args"`
	WorkingDir       *string            `json:"working_dir"`
	Env              map[string]*string `json:"env"`
	URL              *string            `json:"url"`
	Template         *string            `json:"template"`
	Headers          map[string]*string `json:"headers"`
	AuthType         *string            `json:"auth_type"`
	AuthHeader       *string            `json:"auth_header"`
	AuthToken        *string            `json:"auth_token"`
	TimeoutMS        *int               `json:"timeout_ms"`
	Retries          *int               `json:"retries"`
	HealthIntervalMS *int               `json:"health_interval_ms"`
	Enabled          *bool              `json:"enabled"`
	Trusted          *bool              `json:"trusted"`
	AutoEnable       *bool              `json:"auto_enable"`
}

func (in serverInput) patch() registry.Patch {
	return registry.Patch{Name: in.Name, Type: in.Type, Description: in.Description, Command: in.Command, Args: in.Args,
		WorkingDir: in.WorkingDir, Env: in.Env, URL: in.URL, Template: in.Template, Headers: in.Headers, AuthType: in.AuthType,
		AuthHeader: in.AuthHeader, AuthToken: in.AuthToken, TimeoutMS: in.TimeoutMS, Retries: in.Retries,
		HealthIntervalMS: in.HealthIntervalMS, Enabled: in.Enabled, Trusted: in.Trusted,
		AutoEnable: in.AutoEnable}
}

func (in serverInput) spec() registry.Spec {
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	sp := registry.Spec{Name: str(in.Name), Type: str(in.Type), Description: str(in.Description), Command: str(in.Command),
		WorkingDir: str(in.WorkingDir), URL: str(in.URL), Template: str(in.Template), AuthType: str(in.AuthType), AuthHeader: str(in.AuthHeader),
		AuthToken: str(in.AuthToken), Retries: in.Retries, Enabled: in.Enabled == nil || *in.Enabled,
		Trusted: in.Trusted != nil && *in.Trusted, AutoEnable: in.AutoEnable != nil && *in.AutoEnable, Env: map[string]string{}, Headers: map[string]string{}}
	if in.Args != nil {
		sp.Args = *in.Args
	}
	if in.TimeoutMS != nil {
		sp.TimeoutMS = *in.TimeoutMS
	}
	if in.HealthIntervalMS != nil {
		sp.HealthIntervalMS = *in.HealthIntervalMS
	}
	for k, v := range in.Env {
		sp.Env[k] = str(v)
	}
	for k, v := range in.Headers {
		sp.Headers[k] = str(v)
	}
	return sp
}

// maxServerLimit is the most servers one page lists (registry.ListServers' bound).
const maxServerLimit = 200

// APIList returns servers: ?q=&status=&type=&limit=&offset=.
func (h ServersHandler) APIList(c echo.Context) error {
	var ve verr.Error
	offset := intParam(c, "offset", 0, &ve)
	// Refused rather than clamped or matched against nothing: a misspelt filter or an
	// out-of-range limit answered 200 with a list that looked real.
	limit := 100
	if raw := c.QueryParam("limit"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > maxServerLimit {
			ve.Add("limit", "must be a whole number between 1 and "+strconv.Itoa(maxServerLimit))
		}
		limit = n
	}
	if st := c.QueryParam("status"); st != "" && !slices.Contains(registry.Statuses, st) {
		ve.Add("status", "must be one of "+strings.Join(registry.Statuses, ", "))
	}
	types := append(slices.Clone(registry.Types), registry.TypeBuiltin)
	if ty := c.QueryParam("type"); ty != "" && !slices.Contains(types, ty) {
		ve.Add("type", "must be one of "+strings.Join(types, ", "))
	}
	if err := ve.Err(); err != nil {
		return err
	}
	list, total, err := h.Registry.ListServers(c.Request().Context(), registry.ListQuery{Q: c.QueryParam("q"),
		Status: c.QueryParam("status"), Type: c.QueryParam("type"), Limit: limit, Offset: offset})
	if err != nil {
		return err
	}
	if list == nil {
		list = []registry.Server{}
	}
	return c.JSON(http.StatusOK, map[string]any{"servers": list, "total": total})
}

func intParam(c echo.Context, name string, def int, ve *verr.Error) int {
	raw := c.QueryParam(name)
	if raw == "" {
		return def
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 0 {
		ve.Add(name, "must be a whole number, 0 or more")
		return def
	}
	return n
}

// apiServer is a server as the API returns it: the stored registration plus the live
// state of its session.
type apiServer struct {
	registry.Server
	Live *liveState `json:"live,omitempty"`
}

type liveState struct {
	Failures    int      `json:"consecutive_failures"`
	BreakerOpen bool     `json:"circuit_open"`
	NextAttempt *string  `json:"next_attempt"`
	Stderr      []string `json:"stderr,omitempty"`
	// Confinement says how a stdio server's process (or a template server's
	// commands) is confined.
	Confinement string `json:"confinement,omitempty"`
	// Circuit is the server's call circuit (the router's), which calls pass through;
	// circuit_open above is the circuit of connection attempts.
	Circuit *circuitState `json:"call_circuit,omitempty"`
}

type circuitState struct {
	State    string  `json:"state"` // closed, open, half-open
	Since    string  `json:"since"`
	Failures uint32  `json:"consecutive_failures"`
	Until    *string `json:"until"` // open: when a trial call is let through
}

func (h ServersHandler) withLive(s registry.Server) apiServer {
	snap := h.MCP.Snapshot(s.ID)
	ls := &liveState{Failures: snap.Failures, BreakerOpen: snap.BreakerOpen, Stderr: snap.Stderr}
	if runsCommands(s) {
		ls.Confinement = h.MCP.Confinement()
	}
	if !snap.NextAttempt.IsZero() {
		t := snap.NextAttempt.UTC().Format("2006-01-02T15:04:05.000Z07:00")
		ls.NextAttempt = &t
	}
	if h.Router != nil {
		b := circuitOf(h.Router, s)
		ls.Circuit = &circuitState{State: b.State, Since: b.Since.UTC().Format("2006-01-02T15:04:05.000Z07:00"), Failures: b.Failures}
		if !b.Until.IsZero() {
			u := b.Until.UTC().Format("2006-01-02T15:04:05.000Z07:00")
			ls.Circuit.Until = &u
		}
	}
	return apiServer{Server: s, Live: ls}
}

// APIGet returns one server with its live state.
func (h ServersHandler) APIGet(c echo.Context) error {
	s, err := h.Registry.GetServer(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, h.withLive(s))
}

// APICreate registers a server and starts its session: 201 with the server.
func (h ServersHandler) APICreate(c echo.Context) error {
	var in serverInput
	if err := bindJSONCreate(c, &in); err != nil {
		return err
	}
	ctx := c.Request().Context()
	if err := commandCheck(c, registry.ChangesCommand(nil, registry.PatchFromSpec(in.spec()))); err != nil {
		return err
	}
	if err := trustCheck(c, in.spec().Trusted); err != nil {
		return err
	}
	sv, err := h.Registry.CreateServer(ctx, ActorOf(c), in.spec())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, sv)
}

// serverPatch is the body of PATCH /api/v1/servers/:id: serverInput and, optionally,
// the updated_at the change is based on (409 stale_server when the server was saved since).
type serverPatch struct {
	serverInput
	ExpectUpdatedAt *time.Time `json:"expect_updated_at"`
}

// APIUpdate changes some fields of a server.
func (h ServersHandler) APIUpdate(c echo.Context) error {
	var in serverPatch
	if _, err := bindJSONChange(c, &in, "expect_updated_at"); err != nil {
		return err
	}
	ctx := c.Request().Context()
	p := in.patch()
	p.ExpectUpdatedAt = in.ExpectUpdatedAt
	p.KeepCommand = !PrincipalOf(c).Can(auth.PermServerCommand) // checked on the locked row
	p.KeepTrust = !PrincipalOf(c).Can(auth.PermServerTrust)
	sv, err := h.Registry.UpdateServer(ctx, ActorOf(c), c.Param("id"), p)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, sv)
}

// APIDelete removes a server: 204.
func (h ServersHandler) APIDelete(c echo.Context) error {
	ctx := c.Request().Context()
	if err := h.Registry.DeleteServer(ctx, ActorOf(c), c.Param("id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// APISetEnabled returns the handler of POST /api/v1/servers/:id/enable and /disable.
func (h ServersHandler) APISetEnabled(enabled bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		sv, err := h.Registry.SetEnabled(ctx, ActorOf(c), c.Param("id"), enabled)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, sv)
	}
}

// APIDiscover lists the server's tools now: {"added","updated","unchanged","removed",...}.
func (h ServersHandler) APIDiscover(c echo.Context) error {
	res, err := h.MCP.Discover(c.Request().Context(), c.Param("id"), ActorOf(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, res)
}

// APIReconnect closes the session and opens a new one, here and (through the audited
// event) on every other replica.
func (h ServersHandler) APIReconnect(c echo.Context) error {
	if _, err := h.MCP.ReconnectAsked(c.Request().Context(), ActorOf(c), c.Param("id")); err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, map[string]string{"status": "reconnecting"})
}

// APITest tries a registration without saving it (the body of POST /api/v1/servers, or
// for /api/v1/servers/:id/test a patch over the stored server).
func (h ServersHandler) APITest(c echo.Context) error {
	var in serverInput
	// As POST /api/v1/servers reads it: a misspelt key would test another registration.
	if err := bindJSONCreate(c, &in); err != nil {
		return err
	}
	// Read the body to its end: only then does the HTTP server watch the connection
	// and end the request's context when the client goes away, which ends the attempt.
	_, _ = io.Copy(io.Discard, c.Request().Body)
	ctx := c.Request().Context()
	p := in.patch()
	id := c.Param("id")
	if id == "" {
		p = registry.PatchFromSpec(in.spec())
	}
	p.KeepCommand = !PrincipalOf(c).Can(auth.PermServerCommand)
	conn, err := h.Registry.PreviewConnection(ctx, id, p)
	if err != nil {
		return err
	}
	r, err := h.testConnection(c, id, conn)
	if err != nil {
		return err
	}
	if r.Busy {
		return mcpclient.ErrTestsBusy // 503: nothing was tried, unlike a server that failed
	}
	return c.JSON(http.StatusOK, r)
}

// APITools lists one page of the tools discovered on a server (?limit=&cursor=, as the
// other lists of tools: every tool carries its schemas, and a server may list thousands).
func (h ServersHandler) APITools(c echo.Context) error {
	ctx := c.Request().Context()
	s, err := h.Registry.GetServer(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	limit := registry.DefaultServerToolsPage
	if raw := c.QueryParam("limit"); raw != "" {
		if limit, err = strconv.Atoi(raw); err != nil {
			return verr.New("limit", "must be a whole number between 1 and "+strconv.Itoa(registry.MaxServerToolsPage))
		}
	}
	page, err := h.Registry.ServerToolsPage(ctx, s.ID, limit, c.QueryParam("cursor"))
	if err != nil {
		return err
	}
	out := make([]map[string]any, 0, len(page.Tools))
	for _, t := range page.Tools {
		out = append(out, map[string]any{"id": t.ID, "name": t.Name, "qualified_name": t.QualifiedName(), "server": t.Server,
			"title": t.Title, "description": t.Description, "status": t.Status, "available": t.Available, "version": t.Version(),
			"definition_hash": t.DefinitionHash, "annotations": t.Annotations, "input_schema": t.InputSchema,
			"output_schema": t.OutputSchema})
	}
	return c.JSON(http.StatusOK, map[string]any{"tools": out, "total": page.Total, "next_cursor": page.NextCursor})
}

// APIHealth returns the latest health checks and discovery runs of a server.
func (h ServersHandler) APIHealth(c echo.Context) error {
	ctx := c.Request().Context()
	s, err := h.Registry.GetServer(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	health, err := h.Registry.HealthHistory(ctx, s.ID, 100)
	if err != nil {
		return err
	}
	runs, err := h.Registry.DiscoveryRuns(ctx, s.ID, 20)
	if err != nil {
		return err
	}
	if health == nil {
		health = []registry.Health{}
	}
	if runs == nil {
		runs = []registry.DiscoveryRun{}
	}
	return c.JSON(http.StatusOK, map[string]any{"health": health, "discovery_runs": runs})
}

// testConnection audits the attempt, then runs it: trying a stdio registration starts
// its program, so the attempt is on record even if Toolwarden does not survive it.
func (h ServersHandler) testConnection(c echo.Context, id string, conn registry.Connection) (mcpclient.TestResult, error) {
	ctx := c.Request().Context()
	if err := h.Registry.AuditTest(ctx, ActorOf(c), id, conn); err != nil {
		return mcpclient.TestResult{}, err
	}
	return h.MCP.Test(ctx, conn), nil
}
