// Package handlers turns HTTP requests into service calls and view models: parse, call a
// service, build the view model, render. No SQL and no business rules live here.
package handlers

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/internal/textcheck"
	"github.com/toolwarden/toolwarden/services/analytics"
	"github.com/toolwarden/toolwarden/services/assistant"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/builtin"
	"github.com/toolwarden/toolwarden/services/configcode"
	"github.com/toolwarden/toolwarden/services/decide"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/gateway"
	"github.com/toolwarden/toolwarden/services/grants"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/replicas"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/secrets"
	"github.com/toolwarden/toolwarden/services/system"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/usage"
	"github.com/toolwarden/toolwarden/views"
)

// Deps are the services and settings the composition root (package app) hands to
// web, which builds each handler from them.
type Deps struct {
	Auth      *auth.Service
	Logger    *slog.Logger
	Version   string
	StartedAt time.Time
	// Events is the event bus: the cursor a page reads before its data, and the
	// events the websocket replays.
	Events *events.Bus
	// System reports on the database (dashboard, readiness); AuditLog reads the audit
	// log; Usage reads tools' usage.
	System *system.Service
	// Replicas are the serve processes sharing the database (the dashboard lists them).
	Replicas *replicas.Service
	AuditLog *audit.Log
	Usage    *usage.Service
	// Analytics reads what calls and approvals add up to (/analytics).
	Analytics *analytics.Service
	// Assistant manages Toolwarden in plain language (/assistant).
	Assistant *assistant.Service
	// LiveClients counts open websocket connections (for the dashboard).
	LiveClients func() int
	// Health is what /healthz adds to System's report (app.App.Health); nil: nothing.
	Health func() map[string]system.Component
	// SessionRecheck is how often an open websocket checks its person's session again;
	// 0: every 30 s.
	SessionRecheck time.Duration
	// SocketsPerPerson bounds one person's open websockets on this replica (0: 64;
	// negative: none, for benchmarks that stand in for thousands of people with one).
	SocketsPerPerson int
	// SocketsPerProcess bounds every person's open websockets on this replica together
	// (0: 10,000; negative: none).
	SocketsPerProcess int
	// BodyReadTimeout bounds reading a request's body (0: a minute); nothing else of a
	// request is bounded by time, so long streams live on.
	BodyReadTimeout time.Duration
	// DownloadStall bounds how long a download may wait for its client to take the next
	// bytes (0: a minute): an export holds a database connection while it streams.
	DownloadStall time.Duration
	// SecureCookies sets the Secure flag on cookies (behind TLS).
	SecureCookies bool
	// Registry holds the MCP servers and their tools; MCP keeps their live sessions.
	Registry *registry.Service
	MCP      *mcpclient.Manager
	// Tools manages discovered tools: search, settings, lifecycle actions.
	Tools *tools.Service
	// Router is the one path of every tool call; Runs are the test panel's calls in flight.
	Router *router.Router
	Runs   *router.Runs
	// Executions are plans of tool calls, their approval and their durable runs.
	Executions *executions.Service
	// Decide says who may decide on risky calls (the test panel asks it before a run).
	Decide *decide.Service
	// Denials records refused requests in the audit log (the error handler).
	Denials *audit.Denials
	// Gateway is Toolwarden as an MCP server (/mcp): every call through Router.
	Gateway *gateway.Gateway
	// ConfigCode is the whole configuration as code (GET /api/v1/export, POST /api/v1/import).
	ConfigCode *configcode.Service
	// Terminals are the built-in terminal_operations' sessions (nil without the
	// built-in server).
	Terminals *builtin.Terminals
	// TrustedProxies are the reverse proxies whose X-Forwarded-For names the client;
	// without any, the peer address is the client.
	TrustedProxies []netip.Prefix
	// Grants are what people allowed through user_collaboration, and its questions.
	Grants *grants.Service
	// Keys sign and check the requests one replica forwards another (a terminal's page,
	// websocket and operations go to the replica that runs it; internal/replicahop).
	Keys *secrets.Keyring
	// RemoteRuns reaches the test runs other replicas hold, for a page's websocket
	// here that follows one (nil: such a topic is refused, and the page asks).
	RemoteRuns RemoteRuns
	// RunHops bounds, per person, the requests about test runs and terminals this
	// replica forwards to others (each takes one of the nonces the other remembers for a
	// minute, past which it refuses every hop); web sets it.
	RunHops *PersonLimits
}

// Shell is what every page needs around its content: the layout with its live cursor
// and nav badges, flash messages, error pages. Each handler embeds it beside the
// services it uses.
type Shell struct {
	Logger        *slog.Logger
	Version       string
	SecureCookies bool
	// Events gives the cursor a page reads before its data.
	Events *events.Bus
	// Executions counts the plans awaiting approval (the nav badge) and holds the
	// settings pages read.
	Executions *executions.Service
	// Grants lists the questions waiting for the viewer (every page shows them).
	Grants *grants.Service
	// Auth finds the viewer's API tokens about to expire (every page warns of them).
	Auth *auth.Service
}

// Shell is the page frame of the handlers built from d.
func (d *Deps) Shell() *Shell {
	return &Shell{Logger: d.Logger, Version: d.Version, SecureCookies: d.SecureCookies, Events: d.Events, Executions: d.Executions,
		Grants: d.Grants, Auth: d.Auth}
}

// SessionCookie is the name of the session cookie.
const SessionCookie = "tw_session"

const (
	principalKey = "tw.principal"
	flashCookie  = "tw_flash"
)

// SetPrincipal stores the authenticated caller on the request.
func SetPrincipal(c echo.Context, p *auth.Principal) { c.Set(principalKey, p) }

// PrincipalOf returns the authenticated caller, or nil.
func PrincipalOf(c echo.Context) *auth.Principal {
	p, _ := c.Get(principalKey).(*auth.Principal)
	return p
}

// ActorOf describes the caller for the audit log.
func ActorOf(c echo.Context) audit.Actor {
	a := PrincipalOf(c).Actor(c.RealIP(), RequestID(c))
	a.UserAgent = c.Request().UserAgent()
	return a
}

// RequestID is the request's id (set by the request-id middleware).
func RequestID(c echo.Context) string {
	return c.Response().Header().Get(echo.HeaderXRequestID)
}

// IsAPI reports whether the request is for the JSON API (errors as JSON, no redirects).
func IsAPI(c echo.Context) bool {
	return strings.HasPrefix(c.Request().URL.Path, "/api/")
}

// render writes a templ component as a full HTML response. Pages are never cached:
// they can show secrets once. The page is rendered into a buffer first and sent in one
// write with its length (not as a dozen 4 KB chunks, a system call each), and a page
// that fails to render leaves the response untouched for the error handler.
func render(c echo.Context, status int, comp templ.Component) error {
	buf := pageBuffers.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= maxPooledPage {
			buf.Reset()
			pageBuffers.Put(buf)
		}
	}()
	if err := comp.Render(c.Request().Context(), buf); err != nil {
		return err
	}
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	h.Set("Cache-Control", "no-store")
	h.Set(echo.HeaderContentLength, strconv.Itoa(buf.Len()))
	c.Response().WriteHeader(status)
	_, err := c.Response().Write(buf.Bytes())
	return err
}

// pageBuffers are render's buffers; one that grew past maxPooledPage is let go.
var pageBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const maxPooledPage = 1 << 20

// maxFlash bounds a flash message in bytes: escaped (at most 3 bytes each) it keeps the
// cookie well under the 4 KB a browser keeps; a longer cookie is dropped, message and all.
const maxFlash = 1000

// setFlash leaves a message for the next page the browser loads (post/redirect/get).
func setFlash(c echo.Context, kind, msg string, secure bool) {
	msg = textcheck.Clip(msg, maxFlash, "…")
	c.SetCookie(&http.Cookie{Name: flashCookie, Value: url.QueryEscape(kind + ":" + msg), Path: "/",
		HttpOnly: true, Secure: secureCookie(c, secure), SameSite: http.SameSiteLaxMode, MaxAge: 60})
}

// redirectWithOutcome sends the browser back to `to` with a flash saying what
// happened: okMsg on success, the reason when err is the person's to fix. Any other
// error goes to the error handler.
func (d *Shell) redirectWithOutcome(c echo.Context, err error, okMsg func() string, to string) error {
	if err != nil {
		msg, mine := userMessage(err)
		if !mine {
			return err
		}
		setFlash(c, "error", msg, d.SecureCookies)
	} else {
		setFlash(c, "success", okMsg(), d.SecureCookies)
	}
	return c.Redirect(http.StatusSeeOther, to)
}

// takeFlash reads and clears the flash message.
func takeFlash(c echo.Context, secure bool) *views.Flash {
	ck, err := c.Cookie(flashCookie)
	if err != nil || ck.Value == "" {
		return nil
	}
	c.SetCookie(&http.Cookie{Name: flashCookie, Value: "", Path: "/", HttpOnly: true, Secure: secureCookie(c, secure), SameSite: http.SameSiteLaxMode, MaxAge: -1})
	raw, err := url.QueryUnescape(ck.Value)
	if err != nil {
		return nil
	}
	kind, msg, ok := strings.Cut(raw, ":")
	if !ok || (kind != "success" && kind != "error" && kind != "info") || msg == "" {
		return nil
	}
	return &views.Flash{Kind: kind, Message: msg}
}

// navArea is a top-level area and the permission that shows it.
type navArea struct {
	label, href string
	perm        auth.Permission
}

// navAreas lists the areas that exist; later areas join as they are built.
var navAreas = []navArea{
	{"Dashboard", "/", auth.PermDashboard},
	{"Servers", "/servers", auth.PermServerView},
	{"Tools", "/tools", auth.PermToolView},
	{"Executions", "/executions", auth.PermExecutionView},
	{"Terminals", "/terminals", auth.PermTerminalView},
	{"Approvals", "/approvals", auth.PermExecutionApprove},
	{"Analytics", "/analytics", auth.PermLogView},
	{"Grants", "/grants", auth.PermCollaborate},
	{"Audit log", "/audit", auth.PermAuditView},
	{"Users", "/users", auth.PermUsers},
	{"API tokens", "/tokens", auth.PermOwnTokens},
	{"Settings", "/settings/executions", auth.PermSettings},
}

// navBadge is a count shown next to a navigation area on every page, and the topic
// whose events keep it current there.
type navBadge struct {
	topic string
	count func(*Shell, context.Context) (*views.NavBadge, error) // nil badge: none to show
}

// navBadges are the areas with a count, by href (executions_list.go).
var navBadges = map[string]navBadge{
	"/approvals": {topic: executions.Topic, count: (*Shell).approvalsBadge},
}

// navTopicPrefix marks a topic a page follows only for a navigation count (NavTopic).
const navTopicPrefix = "nav:"

// NavTopic is how a page that does not show a badge's topic otherwise names it: its
// socket is sent the topic's events sampled (web/ws.go), as the count needs only the
// newest, and every plan's changes reached every open dashboard one write each.
func NavTopic(topic string) string { return navTopicPrefix + topic }

// NavTopicOf is the topic t follows for a navigation count (NavTopic), when t names
// one of the badges' topics.
func NavTopicOf(t string) (string, bool) {
	topic, ok := strings.CutPrefix(t, navTopicPrefix)
	if !ok {
		return "", false
	}
	for _, b := range navBadges {
		if b.topic == topic {
			return topic, true
		}
	}
	return "", false
}

// layout builds the shared page frame for the signed-in user.
func (d *Shell) layout(c echo.Context, title string, topics ...string) views.Layout {
	p := PrincipalOf(c)
	l := views.Layout{Title: title, Flash: takeFlash(c, d.SecureCookies)}
	if p == nil {
		return l
	}
	for _, perm := range auth.AllPermissions {
		if p.Can(perm) {
			l.Perms = append(l.Perms, string(perm))
		}
	}
	l.User = &views.CurrentUser{Username: p.User.Username, Name: p.User.Name(), RoleLabel: p.User.Role.Label()}
	var allowed []string
	for _, t := range topics {
		if p.Can(TopicPermission(t)) && !slices.Contains(allowed, t) {
			allowed = append(allowed, t)
		}
	}
	ctx := c.Request().Context()
	// A navigation count stays current on every page, so the page follows its topic
	// too (sampled, NavTopic, unless the page shows it). A page that follows nothing
	// else gets no cursor from its handler: take the newest event id before counting,
	// so whatever changes in between is replayed.
	badges := len(allowed) > 0
	if !badges && d.Events != nil && d.seesNavBadge(p) {
		last, err := d.Events.LatestID(ctx)
		if err != nil {
			d.Logger.Warn("handlers: navigation counts left out", "err", err)
		} else {
			l.Live.LastEventID, badges = last, true
		}
	}
	path := c.Request().URL.Path
	for _, a := range navAreas {
		if !p.Can(a.perm) {
			continue
		}
		active := path == a.href || (a.href != "/" && strings.HasPrefix(path, a.href+"/"))
		item := views.NavItem{Label: a.label, Href: a.href, Active: active}
		if b, ok := navBadges[a.href]; ok && badges && p.Can(TopicPermission(b.topic)) {
			nb, err := b.count(d, ctx)
			switch {
			case err != nil:
				d.Logger.Warn("handlers: navigation count left out", "area", a.href, "err", err)
			case nb != nil:
				item.Badge = nb
				if nt := NavTopic(b.topic); !slices.Contains(allowed, b.topic) && !slices.Contains(allowed, nt) {
					allowed = append(allowed, nt)
				}
			}
		}
		l.Nav = append(l.Nav, item)
	}
	// The questions user_collaboration asks the viewer show on every page, and new ones
	// arrive on their topic.
	if d.Grants != nil && p.Can(auth.PermCollaborate) && p.Kind == audit.ActorUser {
		if len(allowed) == 0 && d.Events != nil && l.Live.LastEventID == 0 {
			if last, err := d.Events.LatestID(ctx); err == nil {
				l.Live.LastEventID = last
			}
		}
		pending, err := d.Grants.Collaborations(ctx, p.User.ID, grants.StatusPending)
		if err != nil {
			d.Logger.Warn("handlers: questions left out", "err", err)
		}
		for _, c := range pending {
			l.Collaborations = append(l.Collaborations, promptOf(c))
		}
		if err == nil {
			for i := range l.Nav {
				if l.Nav[i].Href == "/approvals" {
					b := questionsNavBadge(len(pending))
					l.Nav[i].Mine = &b
				}
			}
		}
		allowed = append(allowed, grants.UserTopic(p.User.ID))
	}
	l.Live.Topics = allowed
	if d.Auth != nil && p.Kind == audit.ActorUser && p.Can(auth.PermOwnTokens) {
		toks, err := d.Auth.ExpiringTokens(ctx, p.User.ID)
		if err != nil {
			d.Logger.Warn("handlers: expiring tokens left out", "err", err)
		}
		for _, t := range toks {
			l.ExpiringTokens = append(l.ExpiringTokens, views.ExpiringToken{Name: t.Name, ExpiresAt: *t.ExpiresAt})
		}
	}
	return l
}

func promptOf(c grants.Collaboration) views.CollaborationPrompt {
	return views.CollaborationPrompt{ID: c.ID, Prompt: c.Prompt, ConversationID: c.ConversationID,
		AuthorizeOperation: c.AuthorizeOperation, Target: c.Target, OneTime: c.GrantOneTime,
		TTL: time.Duration(c.GrantTTLSeconds) * time.Second, CreatedAt: c.CreatedAt}
}

// seesNavBadge reports whether p sees a navigation area with a count.
func (d *Shell) seesNavBadge(p *auth.Principal) bool {
	for _, a := range navAreas {
		if b, ok := navBadges[a.href]; ok && p.Can(a.perm) && p.Can(TopicPermission(b.topic)) {
			return true
		}
	}
	return false
}

// TopicPermission is what a subscriber needs to receive a topic's events.
func TopicPermission(topic string) auth.Permission {
	switch topic {
	case auth.SessionsTopic:
		// Who is signed in, by name and role, and each sign-in as it happens: the audit
		// log's user.login entries already show that to auditors, and administrators hold
		// every permission; to anyone else it names the accounts worth targeting. The
		// dashboard's "Signed in now" panel follows the same rule (DashboardHandler.Show).
		return auth.PermAuditView
	case audit.Topic:
		return auth.PermAuditView
	case registry.ServersTopic:
		return auth.PermServerView
	case registry.ToolsTopic:
		return auth.PermToolView
	case executions.Topic:
		return auth.PermExecutionView
	case grants.Topic:
		return auth.PermUsers // everyone's grants: administrators
	case builtin.TerminalsTopic:
		return auth.PermAuditView // everyone's terminals: administrators and auditors
	}
	// One's own grants and terminals; MayFollow checks whose they are.
	if _, ok := grants.GiverOfTopic(topic); ok {
		return auth.PermCollaborate
	}
	if _, ok := builtin.OwnerOfTopic(topic); ok {
		return auth.PermTerminalView
	}
	if strings.HasPrefix(topic, executions.TopicOf("")) {
		return auth.PermExecutionView
	}
	return auth.Permission("topic:" + topic) // unknown topics: nobody
}

// ErrForbidden is returned when the caller lacks the permission for an action;
// fault.Forbidden says what the role may not do where that helps.
var ErrForbidden = fault.Forbidden("Your role does not allow this.")

// errCommandDenied: see commandCheck.
var errCommandDenied = fault.Forbidden(registry.ErrCommandChange.Message)

// commandCheck refuses a registration that sets what runs on the host (a stdio server's
// command, a template with command tools: registry.ChangesCommand) unless the
// caller holds auth.PermServerCommand: that is running a program as Toolwarden.
func commandCheck(c echo.Context, changes bool) error {
	if changes && !PrincipalOf(c).Can(auth.PermServerCommand) {
		return errCommandDenied
	}
	return nil
}

// trustCheck refuses a registration that sets whether a server is trusted unless the
// caller holds auth.PermServerTrust: trust decides the risk of every tool it has.
func trustCheck(c echo.Context, changes bool) error {
	if changes && !PrincipalOf(c).Can(auth.PermServerTrust) {
		return registry.ErrTrustChange
	}
	return nil
}

// RenderError renders the error page, inside the shell when someone is signed in.
func (d *Shell) RenderError(c echo.Context, status int, title, message string) error {
	l := d.layout(c, title)
	return render(c, status, views.Error(views.ErrorPage{Layout: l, Status: status, Title: title, Message: message, RequestID: RequestID(c)}))
}
