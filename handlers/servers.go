package handlers

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/template"
	"github.com/toolwarden/toolwarden/views"
)

// ServersHandler serves MCP server management: pages and the JSON API.
type ServersHandler struct {
	*Shell
	Registry *registry.Service
	MCP      *mcpclient.Manager
	// Router holds the servers' call circuits (shown on the page and in the API).
	Router *router.Router
}

const serversPerPage = 24

// List renders the server list with search, filters and pagination.
func (h ServersHandler) List(c echo.Context) error {
	ctx := c.Request().Context()
	last, err := h.Events.LatestID(ctx)
	if err != nil {
		return err
	}
	f := views.ServerFilter{Q: strings.TrimSpace(c.QueryParam("q")), Status: c.QueryParam("status"), Type: c.QueryParam("type")}
	if !slices.Contains(registry.Statuses, f.Status) {
		f.Status = ""
	}
	if !slices.Contains(registry.Types, f.Type) {
		f.Type = ""
	}
	page := listPage(c.QueryParam("page"))
	list, total, err := h.Registry.ListServers(ctx, registry.ListQuery{Q: f.Q, Status: f.Status, Type: f.Type,
		Limit: serversPerPage, Offset: (page - 1) * serversPerPage})
	if err != nil {
		return err
	}
	counts, all, err := countServers(ctx, h.Registry)
	if err != nil {
		return err
	}
	p := PrincipalOf(c)
	var ids []string
	for _, s := range list {
		ids = append(ids, s.ID)
	}
	waiting, err := h.waitingOn(c, ids...)
	if err != nil {
		return err
	}
	v := views.ServersPage{Layout: h.layout(c, "MCP servers", registry.ServersTopic), Filter: f, Total: total,
		All: all, Counts: counts, Page: page, Pages: max(1, (total+serversPerPage-1)/serversPerPage),
		StatusOpts: statusOptions(), TypeOpts: typeOptions(),
		CanCreate: p.Can(auth.PermServerCreate), CanImportExp: p.Can(auth.PermServerCreate)}
	v.Live.LastEventID = last
	for _, s := range list {
		card := serverCard(s)
		card.Waiting = waiting[s.ID]
		v.Servers = append(v.Servers, card)
	}
	pageURL := func(n int) string {
		q := url.Values{}
		for k, val := range map[string]string{"q": f.Q, "status": f.Status, "type": f.Type} {
			if val != "" {
				q.Set(k, val)
			}
		}
		q.Set("page", strconv.Itoa(n))
		return "/servers?" + q.Encode()
	}
	if page > 1 {
		// Past the end (no such page, the view says) it leads to the last page.
		v.PrevURL = pageURL(min(page-1, v.Pages))
	}
	if page < v.Pages {
		v.NextURL = pageURL(page + 1)
	}
	return render(c, http.StatusOK, views.Servers(v))
}

// listPage is the list's ?page=, from 1: a number past int range, or so large its
// offset would overflow, is read as the largest that does not (past the end).
func listPage(raw string) int {
	page, err := strconv.Atoi(raw)
	if errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(raw, "-") {
		page = math.MaxInt
	}
	return min(max(page, 1), math.MaxInt/serversPerPage)
}

// waitingOn counts the executions waiting or running on each server (by id), for
// their delete confirmations; none for a viewer who cannot delete.
func (h ServersHandler) waitingOn(c echo.Context, ids ...string) (map[string]int, error) {
	if h.Executions == nil || !PrincipalOf(c).Can(auth.PermServerDelete) {
		return nil, nil
	}
	return h.Executions.WaitingByServer(c.Request().Context(), ids)
}

// countServers returns the servers in each status, and in all: the list's counts, which
// the live updates (live.go) replace.
func countServers(ctx context.Context, reg *registry.Service) (map[string]int, int, error) {
	counts, err := reg.CountServers(ctx)
	if err != nil {
		return nil, 0, err
	}
	all := 0
	for _, n := range counts {
		all += n
	}
	return counts, all, nil
}

// statusOptions are the list's status filter choices.
func statusOptions() []views.Option {
	var opts []views.Option
	for _, s := range registry.Statuses {
		opts = append(opts, views.Option{Value: s, Label: strings.ToUpper(s[:1]) + s[1:]})
	}
	return opts
}

func typeOptions() []views.Option {
	return []views.Option{{Value: registry.TypeStdio, Label: "stdio (a local command)"},
		{Value: registry.TypeStreamableHTTP, Label: "Streamable HTTP"}, {Value: registry.TypeSSE, Label: "SSE (legacy HTTP)"},
		{Value: registry.TypeTemplate, Label: "Template (tools defined in YAML)"}}
}

// runsCommands reports whether s starts programs on the host: a stdio server, or a
// template server with command tools.
func runsCommands(s registry.Server) bool {
	return s.Type == registry.TypeStdio || s.Type == registry.TypeTemplate && template.HasCommands(s.Template)
}

// serverCard is the view of one server. It is the same for every viewer (live updates
// render it once); role-specific controls are shown by data-perm.
func serverCard(s registry.Server) views.ServerCard {
	target := s.URL
	switch s.Type {
	case registry.TypeStdio:
		target = strings.TrimSpace(s.Command + " " + strings.Join(s.Args, " "))
	case registry.TypeTemplate:
		target = fmt.Sprintf("%d lines of YAML", strings.Count(strings.TrimRight(s.Template, "\n"), "\n")+1)
	}
	return views.ServerCard{ID: s.ID, Name: s.Name, Description: s.Description, Type: s.Type, Target: target,
		Status: s.Status, LastError: deref(s.LastError), Enabled: s.Enabled, Trusted: s.Trusted, ToolCount: s.ToolCount,
		LastConnected: s.LastConnected, StatusSince: s.StatusChangedAt, NameReserved: s.NameReserved, UndoesOthers: s.UndoesOthers}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// SetEnabled returns the handler that enables (true) or disables a server from a form.
func (h ServersHandler) SetEnabled(enabled bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		sv, err := h.Registry.SetEnabled(ctx, ActorOf(c), c.Param("id"), enabled)
		return h.redirectWithOutcome(c, err, func() string {
			if enabled {
				return sv.Name + " enabled; connecting."
			}
			return sv.Name + " disabled; its session is closed."
		}, backTo(c, "/servers/"+c.Param("id")))
	}
}

// backTo returns the same-site page the form came from, or def.
func backTo(c echo.Context, def string) string {
	ref, ok := sameSiteReferer(c)
	if !ok || !strings.HasPrefix(ref.Path, "/servers") {
		return def
	}
	return ref.RequestURI()
}

// sameSiteReferer is the page of this site the request came from (the pages send their
// full address to their own site: Referrer-Policy same-origin).
func sameSiteReferer(c echo.Context) (*url.URL, bool) {
	ref, err := url.Parse(c.Request().Referer())
	if err != nil || ref.Host != c.Request().Host {
		return nil, false
	}
	return ref, true
}

// Reconnect closes the session and opens a new one, here and (through the audited
// event) on every other replica.
func (h ServersHandler) Reconnect(c echo.Context) error {
	sv, err := h.MCP.ReconnectAsked(c.Request().Context(), ActorOf(c), c.Param("id"))
	return h.redirectWithOutcome(c, err, func() string { return "Reconnecting " + sv.Name + "." }, backTo(c, "/servers/"+c.Param("id")))
}

// Discover lists the server's tools now.
func (h ServersHandler) Discover(c echo.Context) error {
	ctx := c.Request().Context()
	res, err := h.MCP.Discover(ctx, c.Param("id"), ActorOf(c))
	return h.redirectWithOutcome(c, err, func() string {
		return fmt.Sprintf("Discovery finished: %d tools — %d added, %d updated, %d unchanged, %d removed.",
			res.Total, res.Added, res.Updated, res.Unchanged, res.Removed)
	}, backTo(c, "/servers/"+c.Param("id")))
}

// Delete removes a server, its session and its tools.
func (h ServersHandler) Delete(c echo.Context) error {
	ctx := c.Request().Context()
	sv, err := h.Registry.GetServer(ctx, c.Param("id"))
	var del registry.Deleted
	if err == nil {
		del, err = h.Registry.DeleteServerReport(ctx, ActorOf(c), sv.ID)
	}
	return h.redirectWithOutcome(c, err, func() string {
		msg := "Server " + sv.Name + " deleted."
		if n := len(del.LostUndo); n > 0 {
			// Said, not left to be found at the next rollback.
			msg += fmt.Sprintf(" %s (%s): set another on the Compensation tab.", views.LostUndo(n, true), joinShort(del.LostUndo))
		}
		return msg
	}, deleteBack(c, sv, err))
}

// deleteBack is where a delete goes: the list once the server is gone, back to the page
// it was asked from (its own page, say) when it was refused.
func deleteBack(c echo.Context, sv registry.Server, err error) string {
	if err == nil || sv.ID == "" {
		return "/servers"
	}
	return backTo(c, "/servers/"+sv.ID)
}
