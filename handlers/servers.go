package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/verr"
	"github.com/toolwarden/toolwarden/views"
)

// ServersHandler serves MCP server management: pages and the JSON API.
type ServersHandler struct {
	*Shell
	Registry *registry.Service
	MCP      *mcpclient.Manager
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
	page, _ := strconv.Atoi(c.QueryParam("page"))
	page = max(page, 1)
	list, total, err := h.Registry.ListServers(ctx, registry.ListQuery{Q: f.Q, Status: f.Status, Type: f.Type,
		Limit: serversPerPage, Offset: (page - 1) * serversPerPage})
	if err != nil {
		return err
	}
	counts, err := h.Registry.CountServers(ctx)
	if err != nil {
		return err
	}
	p := PrincipalOf(c)
	v := views.ServersPage{Layout: h.layout(c, "MCP servers", registry.ServersTopic), Filter: f, Total: total,
		Counts: counts, Page: page, Pages: max(1, (total+serversPerPage-1)/serversPerPage),
		CanCreate: p.Can(auth.PermServerCreate), CanImportExp: p.Can(auth.PermServerCreate)}
	v.Live.LastEventID = last
	for _, n := range counts {
		v.All += n
	}
	for _, s := range registry.Statuses {
		v.StatusOpts = append(v.StatusOpts, views.Option{Value: s, Label: strings.ToUpper(s[:1]) + s[1:]})
	}
	v.TypeOpts = typeOptions()
	for _, s := range list {
		v.Servers = append(v.Servers, serverCard(s))
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
		v.PrevURL = pageURL(page - 1)
	}
	if page < v.Pages {
		v.NextURL = pageURL(page + 1)
	}
	return render(c, http.StatusOK, views.Servers(v))
}

func typeOptions() []views.Option {
	return []views.Option{{Value: registry.TypeStdio, Label: "stdio (a local command)"},
		{Value: registry.TypeStreamableHTTP, Label: "Streamable HTTP"}, {Value: registry.TypeSSE, Label: "SSE (legacy HTTP)"}}
}

// serverCard is the view of one server. It is the same for every viewer (live updates
// render it once); role-specific controls are shown by data-perm.
func serverCard(s registry.Server) views.ServerCard {
	target := s.URL
	if s.Type == registry.TypeStdio {
		target = strings.TrimSpace(s.Command + " " + strings.Join(s.Args, " "))
	}
	return views.ServerCard{ID: s.ID, Name: s.Name, Description: s.Description, Type: s.Type, Target: target,
		Status: s.Status, LastError: deref(s.LastError), Enabled: s.Enabled, Trusted: s.Trusted, ToolCount: s.ToolCount,
		LastConnected: s.LastConnected, StatusSince: s.StatusChangedAt}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// New renders the empty add form.
func (h ServersHandler) New(c echo.Context) error {
	typ := registry.TypeStdio
	if !PrincipalOf(c).Can(auth.PermServerCommand) {
		typ = registry.TypeStreamableHTTP
	}
	f := views.ServerForm{Type: typ, Enabled: true, TimeoutMS: registry.DefaultTimeoutMS,
		Retries: registry.DefaultRetries, HealthIntervalMS: registry.DefaultHealthIntervalMS, AuthType: registry.AuthNone}
	return h.formPage(c, http.StatusOK, "", f, nil)
}

func (h ServersHandler) formPage(c echo.Context, status int, id string, f views.ServerForm, test *views.ServerTest) error {
	title, action := "Add an MCP server", "/servers"
	if id != "" {
		title, action = "Edit "+f.Name, "/servers/"+id
	}
	return render(c, status, views.ServerFormView(views.ServerFormPage{Layout: h.layout(c, title), ID: id, Form: f,
		Types: typeOptions(), Test: test, Action: action, CommandLocked: !PrincipalOf(c).Can(auth.PermServerCommand),
		TrustLocked: !PrincipalOf(c).Can(auth.PermServerTrust)}))
}

// Edit renders the edit form of a server; secret values are never in it.
func (h ServersHandler) Edit(c echo.Context) error {
	s, err := h.Registry.GetServer(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return h.formPage(c, http.StatusOK, s.ID, formOf(s), nil)
}

func formOf(s registry.Server) views.ServerForm {
	f := views.ServerForm{Name: s.Name, Description: s.Description, Type: s.Type, Command: s.Command,
		Args: strings.Join(s.Args, "\n"), WorkingDir: s.WorkingDir, URL: s.URL, AuthType: s.AuthType,
		AuthHeader: s.AuthHeader, AuthConfigured: s.AuthConfigured, TimeoutMS: s.TimeoutMS, Retries: s.Retries,
		HealthIntervalMS: s.HealthIntervalMS, Enabled: s.Enabled, Trusted: s.Trusted, AutoEnable: s.AutoEnable}
	for _, n := range s.EnvNames {
		f.Env = append(f.Env, views.SecretRow{Name: n, Configured: true})
	}
	for _, n := range s.HeaderNames {
		f.Headers = append(f.Headers, views.SecretRow{Name: n, Configured: true})
	}
	return f
}

// parsedForm is the submitted form as a patch, plus what to show if it comes back.
type parsedForm struct {
	patch registry.Patch
	view  views.ServerForm
	errs  verr.Error
}

// parseForm reads the add/edit form. Stored secrets (cur) are kept when their value box
// is left empty, removed when their row is removed, and replaced when a value is typed.
func parseForm(c echo.Context, cur *registry.Server) parsedForm {
	var pf parsedForm
	str := func(name string) *string { v := c.FormValue(name); return &v }
	num := func(name string, def int) *int {
		raw := strings.TrimSpace(c.FormValue(name))
		if raw == "" {
			return &def
		}
		n, err := strconv.Atoi(raw)
		if err != nil {
			pf.errs.Add(name, "must be a whole number")
			return nil
		}
		return &n
	}
	checked := func(name string) *bool { v := c.FormValue(name) == "true"; return &v }
	var args []string
	for line := range strings.SplitSeq(strings.ReplaceAll(c.FormValue("args"), "\r\n", "\n"), "\n") {
		if strings.TrimSpace(line) != "" {
			args = append(args, strings.TrimSpace(line))
		}
	}
	p := registry.Patch{Name: str("name"), Description: str("description"), Type: str("type"), Command: str("command"),
		Args: &args, WorkingDir: str("working_dir"), URL: str("url"), AuthType: str("auth_type"), AuthHeader: str("auth_header"),
		TimeoutMS: num("timeout_ms", registry.DefaultTimeoutMS), Retries: num("retries", registry.DefaultRetries),
		HealthIntervalMS: num("health_interval_ms", registry.DefaultHealthIntervalMS),
		Enabled:          checked("enabled"), Trusted: checked("trusted"), AutoEnable: checked("auto_enable")}
	// Only the fields of the chosen type count: switching an edited server from stdio to
	// HTTP drops its command and env instead of failing on them.
	if *p.Type != registry.TypeStdio {
		empty := ""
		p.Command, p.Args, p.WorkingDir = &empty, &[]string{}, &empty
	} else {
		empty, none := "", registry.AuthNone
		p.URL, p.AuthType, p.AuthHeader = &empty, &none, &empty
	}
	var stored map[string]bool
	var storedHeaders map[string]bool
	if cur != nil {
		stored, storedHeaders = setOf(cur.EnvNames), setOf(cur.HeaderNames)
	}
	dropped := false
	p.Env, pf.view.Env, dropped = secretPairs(c, "env", stored, *p.Type == registry.TypeStdio)
	var d2 bool
	p.Headers, pf.view.Headers, d2 = secretPairs(c, "headers", storedHeaders, *p.Type != registry.TypeStdio)
	token := c.FormValue("auth_token")
	switch {
	case c.FormValue("auth_token_clear") == "true" || *p.AuthType == registry.AuthNone:
		empty := ""
		p.AuthToken = &empty
	case token != "":
		p.AuthToken = &token
		d2 = true
	}
	// Without auth.PermServerCommand the stdio fields are locked (and not submitted):
	// what the server runs stays as stored.
	locked := cur != nil && cur.Type == registry.TypeStdio && *p.Type == registry.TypeStdio &&
		!PrincipalOf(c).Can(auth.PermServerCommand)
	if locked {
		p.Command, p.Args, p.WorkingDir, p.Env, p.ReplaceEnv = nil, nil, nil, nil, false
		dropped = false
	}
	pf.patch = p
	pf.view = views.ServerForm{Name: *p.Name, Description: *p.Description, Type: *p.Type, Command: c.FormValue("command"),
		Args: c.FormValue("args"), WorkingDir: c.FormValue("working_dir"), URL: c.FormValue("url"),
		AuthType: c.FormValue("auth_type"), AuthHeader: c.FormValue("auth_header"),
		AuthConfigured: cur != nil && cur.AuthConfigured && c.FormValue("auth_token_clear") != "true",
		TimeoutMS:      valueOr(p.TimeoutMS, registry.DefaultTimeoutMS), Retries: valueOr(p.Retries, registry.DefaultRetries),
		HealthIntervalMS: valueOr(p.HealthIntervalMS, registry.DefaultHealthIntervalMS), Enabled: *p.Enabled,
		Trusted: *p.Trusted, AutoEnable: *p.AutoEnable, Env: pf.view.Env, Headers: pf.view.Headers, SecretsDropped: dropped || d2}
	if locked {
		stored := formOf(*cur)
		pf.view.Command, pf.view.Args, pf.view.WorkingDir, pf.view.Env = stored.Command, stored.Args, stored.WorkingDir, stored.Env
	}
	return pf
}

func valueOr(p *int, def int) int {
	if p == nil {
		return def
	}
	return *p
}

func setOf(names []string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}

// secretPairs reads the name/value rows of env or headers. It returns the patch map
// (value set, nil to remove), the rows to show again (names only) and whether any new
// value was typed (and so must be typed again if the form comes back).
func secretPairs(c echo.Context, field string, stored map[string]bool, applies bool) (map[string]*string, []views.SecretRow, bool) {
	form, _ := c.FormParams()
	names, values := form[field+"_name"], form[field+"_value"]
	out := map[string]*string{}
	var rows []views.SecretRow
	typed := false
	seen := map[string]bool{}
	if applies {
		for i, raw := range names {
			name := strings.TrimSpace(raw)
			val := ""
			if i < len(values) {
				val = values[i]
			}
			if name == "" {
				continue
			}
			seen[name] = true
			rows = append(rows, views.SecretRow{Name: name, Configured: stored[name]})
			switch {
			case val != "":
				out[name] = &val
				typed = true
			case !stored[name]:
				out[name] = &val // a new variable with an empty value
			}
		}
	}
	for name := range stored {
		if !seen[name] {
			out[name] = nil // its row was removed (or the type no longer has env/headers)
		}
	}
	return out, rows, typed
}

// Create saves a new server from the form and starts its session.
func (h ServersHandler) Create(c echo.Context) error {
	pf := parseForm(c, nil)
	if err := pf.errs.Err(); err != nil {
		return h.formInvalid(c, "", pf, err)
	}
	if err := commandCheck(c, registry.ChangesCommand(nil, pf.patch)); err != nil {
		return h.formInvalid(c, "", pf, verr.New("command", err.Error()))
	}
	if err := trustCheck(c, *pf.patch.Trusted); err != nil {
		return h.formInvalid(c, "", pf, verr.New("trusted", strings.TrimPrefix(err.Error(), "registry: ")))
	}
	sv, err := h.Registry.CreateServer(c.Request().Context(), ActorOf(c), specOf(pf.patch))
	if err != nil {
		return h.formInvalid(c, "", pf, err)
	}
	setFlash(c, "success", "Server "+sv.Name+" added."+connectingNote(sv), h.SecureCookies)
	return c.Redirect(http.StatusSeeOther, "/servers/"+sv.ID)
}

func connectingNote(sv registry.Server) string {
	if sv.Enabled {
		return " Connecting now; the status updates live."
	}
	return " It is disabled: enable it to connect."
}

func (h ServersHandler) formInvalid(c echo.Context, id string, pf parsedForm, err error) error {
	fe, ok := formErrors(err)
	if !ok {
		return err
	}
	pf.view.Errors = fe
	return h.formPage(c, http.StatusUnprocessableEntity, id, pf.view, nil)
}

// specOf turns a full patch from the add form into a Spec.
func specOf(p registry.Patch) registry.Spec {
	sp := registry.Spec{Name: *p.Name, Description: *p.Description, Type: *p.Type, Command: *p.Command, Args: *p.Args,
		WorkingDir: *p.WorkingDir, URL: *p.URL, AuthType: *p.AuthType, AuthHeader: *p.AuthHeader,
		TimeoutMS: valueOr(p.TimeoutMS, 0), Retries: p.Retries, HealthIntervalMS: valueOr(p.HealthIntervalMS, 0),
		Enabled: *p.Enabled, Trusted: *p.Trusted, AutoEnable: *p.AutoEnable, Env: map[string]string{}, Headers: map[string]string{}}
	if p.AuthToken != nil {
		sp.AuthToken = *p.AuthToken
	}
	for k, v := range p.Env {
		if v != nil {
			sp.Env[k] = *v
		}
	}
	for k, v := range p.Headers {
		if v != nil {
			sp.Headers[k] = *v
		}
	}
	return sp
}

// Update saves the edit form.
func (h ServersHandler) Update(c echo.Context) error {
	ctx := c.Request().Context()
	cur, err := h.Registry.GetServer(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	pf := parseForm(c, &cur)
	if err := pf.errs.Err(); err != nil {
		return h.formInvalid(c, cur.ID, pf, err)
	}
	if err := commandCheck(c, registry.ChangesCommand(&cur, pf.patch)); err != nil {
		return h.formInvalid(c, cur.ID, pf, verr.New("command", err.Error()))
	}
	if !PrincipalOf(c).Can(auth.PermServerTrust) {
		// The box is disabled for them, so the form does not send it: keep the trust as
		// it is, and refuse a form that tries to set it.
		if *pf.patch.Trusted && !cur.Trusted {
			return h.formInvalid(c, cur.ID, pf, verr.New("trusted", strings.TrimPrefix(registry.ErrTrustChange.Error(), "registry: ")))
		}
		pf.patch.Trusted = &cur.Trusted
		pf.view.Trusted = cur.Trusted
		if registry.ChangesTrustedTarget(cur, pf.patch) {
			return h.formInvalid(c, cur.ID, pf, verr.New("trusted", strings.TrimPrefix(registry.ErrTrustedTargetChange.Error(), "registry: ")))
		}
	}
	pf.patch.KeepCommand = !PrincipalOf(c).Can(auth.PermServerCommand)
	pf.patch.KeepTrust = !PrincipalOf(c).Can(auth.PermServerTrust)
	sv, err := h.Registry.UpdateServer(ctx, ActorOf(c), cur.ID, pf.patch)
	if err != nil {
		return h.formInvalid(c, cur.ID, pf, err)
	}
	setFlash(c, "success", "Server "+sv.Name+" saved.", h.SecureCookies)
	return c.Redirect(http.StatusSeeOther, "/servers/"+sv.ID)
}

// Test tries the submitted form without saving: it connects, pings, lists the tools.
// An htmx request gets only the result panel, so what was typed stays in the form.
func (h ServersHandler) Test(c echo.Context) error {
	ctx := c.Request().Context()
	id := c.Param("id")
	var cur *registry.Server
	if id != "" {
		s, err := h.Registry.GetServer(ctx, id)
		if err != nil {
			return err
		}
		cur = &s
	}
	pf := parseForm(c, cur)
	var result *views.ServerTest
	err := pf.errs.Err()
	if err == nil && commandCheck(c, registry.ChangesCommand(cur, pf.patch)) != nil {
		err = verr.New("command", errCommandDenied.Message)
	}
	var conn registry.Connection
	if err == nil {
		pf.patch.KeepCommand = !PrincipalOf(c).Can(auth.PermServerCommand)
		conn, err = h.Registry.PreviewConnection(ctx, id, pf.patch)
	}
	if err == nil {
		var r mcpclient.TestResult
		if r, err = h.testConnection(c, id, conn); err == nil {
			result = testView(r)
		}
	}
	if c.Request().Header.Get("HX-Request") == "true" {
		if fe, ok := formErrors(err); ok {
			result = &views.ServerTest{Error: "fix the form first: " + strings.Join(fieldMessages(fe), "; ")}
		} else if err != nil {
			return err
		}
		return render(c, http.StatusOK, views.ServerTestResult(result))
	}
	if err != nil {
		return h.formInvalid(c, id, pf, err)
	}
	return h.formPage(c, http.StatusOK, id, pf.view, result)
}

func fieldMessages(fe views.FormErrors) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(fe)) {
		out = append(out, k+" "+fe[k])
	}
	return out
}

func testView(r mcpclient.TestResult) *views.ServerTest {
	return &views.ServerTest{OK: r.OK, Error: r.Error, ConnectMS: r.ConnectMS, LatencyMS: r.LatencyMS,
		ServerName: firstNonEmpty(r.Info.Title, r.Info.Name), Version: r.Info.Version, Protocol: r.Info.ProtocolVersion,
		ToolCount: r.ToolCount, Tools: r.Tools, Stderr: r.Stderr}
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// Show renders the server detail page.
func (h ServersHandler) Show(c echo.Context) error {
	ctx := c.Request().Context()
	last, err := h.Events.LatestID(ctx)
	if err != nil {
		return err
	}
	s, err := h.Registry.GetServer(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	v := views.ServerPage{Layout: h.layout(c, s.Name, registry.ServersTopic), Server: serverCard(s),
		IsStdio: s.Type == registry.TypeStdio}
	v.Live.LastEventID = last
	if s.Info.Name != "" || s.Info.ProtocolVersion != "" {
		v.Info = []views.KV{{Key: "Name", Value: firstNonEmpty(s.Info.Title, s.Info.Name)}, {Key: "Version", Value: s.Info.Version},
			{Key: "Protocol", Value: s.Info.ProtocolVersion}, {Key: "Last connected", Value: stampOf(s.LastConnected)}}
		v.Capabilities = capabilityNames(s.Info.Capabilities)
		v.Instructions = s.Info.Instructions
	}
	v.Connection = connectionKVs(s)
	if v.IsStdio {
		v.Confinement = h.MCP.Confinement()
	}
	snap := h.MCP.Snapshot(s.ID)
	v.Stderr = snap.Stderr
	v.BreakerOpen = snap.BreakerOpen
	if !snap.NextAttempt.IsZero() {
		v.NextAttempt = &snap.NextAttempt
	}
	health, err := h.Registry.HealthHistory(ctx, s.ID, 20)
	if err != nil {
		return err
	}
	okCount := 0
	for _, hc := range health {
		v.Health = append(v.Health, views.HealthRow{At: hc.CheckedAt, OK: hc.OK, LatencyMS: hc.LatencyMS, Error: deref(hc.Error)})
		if hc.OK {
			okCount++
		}
	}
	if len(health) > 0 {
		v.HealthSummary = fmt.Sprintf("%d of the last %d checks passed; one every %s.", okCount, len(health), msDuration(s.HealthIntervalMS))
	} else {
		v.HealthSummary = "One check every " + msDuration(s.HealthIntervalMS) + " while connected."
	}
	if v.Tools, v.Runs, err = serverToolsAndRuns(ctx, h.Registry, s.ID); err != nil {
		return err
	}
	for _, r := range s.Resources {
		v.Resources = append(v.Resources, views.KV{Key: r.URI, Value: firstNonEmpty(r.Title, r.Name, r.Description)})
	}
	for _, pr := range s.Prompts {
		v.Prompts = append(v.Prompts, views.KV{Key: pr.Name, Value: firstNonEmpty(pr.Description, pr.Title)})
	}
	return render(c, http.StatusOK, views.Server(v))
}

func connectionKVs(s registry.Server) []views.KV {
	var kv []views.KV
	if s.Type == registry.TypeStdio {
		kv = append(kv, views.KV{Key: "Command", Value: s.Command})
		if len(s.Args) > 0 {
			kv = append(kv, views.KV{Key: "Arguments", Value: strings.Join(s.Args, " ")})
		}
		if s.WorkingDir != "" {
			kv = append(kv, views.KV{Key: "Working directory", Value: s.WorkingDir})
		}
		if len(s.EnvNames) > 0 {
			kv = append(kv, views.KV{Key: "Environment", Value: strings.Join(s.EnvNames, ", ") + " (values encrypted)"})
		}
	} else {
		kv = append(kv, views.KV{Key: "URL", Value: s.URL})
		if len(s.HeaderNames) > 0 {
			kv = append(kv, views.KV{Key: "Headers", Value: strings.Join(s.HeaderNames, ", ") + " (values encrypted)"})
		}
		switch s.AuthType {
		case registry.AuthBearer:
			kv = append(kv, views.KV{Key: "Authentication", Value: "Bearer token (configured)"})
		case registry.AuthHeader:
			kv = append(kv, views.KV{Key: "Authentication", Value: s.AuthHeader + " header (configured)"})
		}
	}
	kv = append(kv, views.KV{Key: "Timeout", Value: msDuration(s.TimeoutMS)}, views.KV{Key: "Retries", Value: strconv.Itoa(s.Retries)},
		views.KV{Key: "Health check", Value: "every " + msDuration(s.HealthIntervalMS)},
		views.KV{Key: "Auto-enable", Value: onOff(s.AutoEnable)})
	return kv
}

// onOff spells a policy switch.
func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

func msDuration(ms int) string {
	switch {
	case ms%60_000 == 0:
		return fmt.Sprintf("%d min", ms/60_000)
	case ms%1000 == 0:
		return fmt.Sprintf("%d s", ms/1000)
	}
	return fmt.Sprintf("%d ms", ms)
}

func capabilityNames(raw json.RawMessage) []string {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	var out []string
	for k, v := range m {
		var sub map[string]any
		_ = json.Unmarshal(v, &sub)
		name := k
		if sub["listChanged"] == true {
			name += " (list changes)"
		}
		if sub["subscribe"] == true {
			name += " (subscribe)"
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
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
	ref, err := url.Parse(c.Request().Referer())
	if err != nil || ref.Host != c.Request().Host || !strings.HasPrefix(ref.Path, "/servers") {
		return def
	}
	return ref.RequestURI()
}

// Reconnect closes the session and opens a new one.
func (h ServersHandler) Reconnect(c echo.Context) error {
	ctx := c.Request().Context()
	sv, err := h.Registry.GetServer(ctx, c.Param("id"))
	if err == nil {
		err = h.MCP.Reconnect(ctx, sv.ID)
	}
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
	if err == nil {
		err = h.Registry.DeleteServer(ctx, ActorOf(c), sv.ID)
	}
	return h.redirectWithOutcome(c, err, func() string { return "Server " + sv.Name + " deleted." }, "/servers")
}

// serverToolsAndRuns loads the tool table and the latest discovery runs of a server, for
// the detail page and its live updates.
func serverToolsAndRuns(ctx context.Context, reg *registry.Service, id string) ([]views.ToolRow, []views.RunRow, error) {
	tools, err := reg.ServerTools(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	runs, err := reg.DiscoveryRuns(ctx, id, 10)
	if err != nil {
		return nil, nil, err
	}
	var tr []views.ToolRow
	for _, t := range tools {
		var ann struct {
			ReadOnly    bool  `json:"readOnlyHint"`
			Destructive *bool `json:"destructiveHint"`
		}
		_ = json.Unmarshal(t.Annotations, &ann)
		tr = append(tr, views.ToolRow{ID: t.ID, Name: t.Name, Title: t.Title, Description: t.Description, Status: t.Status,
			Version: t.Version(), Available: t.Available, ReadOnly: ann.ReadOnly,
			Destructive: !ann.ReadOnly && ann.Destructive != nil && *ann.Destructive})
	}
	var rr []views.RunRow
	for _, r := range runs {
		rr = append(rr, views.RunRow{ID: r.ID, Trigger: r.Trigger, Actor: r.Actor, OK: r.Status == "succeeded", Error: deref(r.Error),
			Added: r.Added, Updated: r.Updated, Unchanged: r.Unchanged, Removed: r.Removed, Pages: r.Pages,
			DurationMS: float64(r.Duration().Microseconds()) / 1000, At: r.FinishedAt})
	}
	return tr, rr, nil
}

func stampOf(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}
