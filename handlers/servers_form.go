package handlers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/verr"
	"github.com/toolwarden/toolwarden/views"
)

// New renders the empty add form.
func (h ServersHandler) New(c echo.Context) error {
	typ := registry.TypeStdio
	if !PrincipalOf(c).Can(auth.PermServerCommand) {
		typ = registry.TypeStreamableHTTP
	}
	f := views.ServerForm{Type: typ, Enabled: true, TimeoutMS: registry.DefaultTimeoutMS,
		Retries: registry.DefaultRetries, HealthIntervalMS: registry.DefaultHealthIntervalMS, AuthType: registry.AuthNone}
	return h.formPage(c, http.StatusOK, "", f, views.ServerFormTyped{}, nil)
}

func (h ServersHandler) formPage(c echo.Context, status int, id string, f views.ServerForm, typed views.ServerFormTyped, test *views.ServerTest) error {
	title, action := "Add an MCP server", "/servers"
	if id != "" {
		title, action = "Edit "+f.Name, "/servers/"+id
	}
	return render(c, status, views.ServerFormView(views.ServerFormPage{Layout: h.layout(c, title), ID: id, Form: f,
		Types: typeOptions(), Test: test, Action: action, CommandLocked: !PrincipalOf(c).Can(auth.PermServerCommand),
		TrustLocked: !PrincipalOf(c).Can(auth.PermServerTrust)}, typed))
}

// Edit renders the edit form of a server; secret values are never in it.
func (h ServersHandler) Edit(c echo.Context) error {
	s, err := h.Registry.GetServer(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	if s.Type == registry.TypeBuiltin {
		return registry.ErrBuiltinFixed
	}
	return h.formPage(c, http.StatusOK, s.ID, formOf(s), views.ServerFormTyped{}, nil)
}

func formOf(s registry.Server) views.ServerForm {
	f := views.ServerForm{Name: s.Name, Description: s.Description, Type: s.Type, Command: s.Command,
		Args: strings.Join(s.Args, "\n"), WorkingDir: s.WorkingDir, URL: s.URL, Template: s.Template, AuthType: s.AuthType,
		AuthHeader: s.AuthHeader, AuthConfigured: s.AuthConfigured, TimeoutMS: s.TimeoutMS, Retries: s.Retries,
		HealthIntervalMS: s.HealthIntervalMS, Enabled: s.Enabled, Trusted: s.Trusted, AutoEnable: s.AutoEnable,
		Version: s.UpdatedAt.Format(time.RFC3339Nano)}
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
	typed views.ServerFormTyped
	errs  verr.Error
	// argLines is the line of the arguments box each argument is on (1 on): the
	// registry names an argument by its place among them.
	argLines []int
}

// parseForm reads the add/edit form. Stored secrets (cur) are kept when their value box
// is left empty, removed when their row is removed, and replaced when a value is typed.
func parseForm(c echo.Context, cur *registry.Server) parsedForm {
	var pf parsedForm
	str := func(name string) *string { v := c.FormValue(name); return &v }
	pf.typed.Numbers = map[string]string{}
	num := func(name string, def, lo, hi int, unit string) *int {
		raw := strings.TrimSpace(c.FormValue(name))
		if raw == "" {
			return &def
		}
		n, err := strconv.Atoi(raw)
		if err != nil {
			pf.typed.Numbers[name] = raw // shown back as typed, not as the default
			if errors.Is(err, strconv.ErrRange) {
				pf.errs.Add(name, fmt.Sprintf("is out of range: must be between %d and %d%s", lo, hi, unit))
			} else {
				pf.errs.Add(name, "must be a whole number")
			}
			return nil
		}
		return &n
	}
	checked := func(name string) *bool { v := c.FormValue(name) == "true"; return &v }
	var args []string
	typed := strings.ReplaceAll(c.FormValue("args"), "\r\n", "\n")
	// A browser drops the line break that opens a text box's text.
	if cur != nil && (typed == strings.Join(cur.Args, "\n") || "\n"+typed == strings.Join(cur.Args, "\n")) {
		// The arguments as the form showed them: kept exactly, so an edit of another
		// field does not trim an argument set through the API ("--sep", " ").
		args = cur.Args
		pf.argLines = argLinesOf(cur.Args, typed != strings.Join(cur.Args, "\n"))
	} else {
		i := 0
		for line := range strings.SplitSeq(typed, "\n") {
			i++
			if strings.TrimSpace(line) != "" {
				args = append(args, strings.TrimSpace(line))
				pf.argLines = append(pf.argLines, i)
			}
		}
	}
	p := registry.Patch{Name: str("name"), Description: str("description"), Type: str("type"), Command: str("command"),
		Args: &args, WorkingDir: str("working_dir"), URL: str("url"), Template: str("template"), AuthType: str("auth_type"), AuthHeader: str("auth_header"),
		TimeoutMS: num("timeout_ms", registry.DefaultTimeoutMS, registry.MinTimeoutMS, registry.MaxTimeoutMS, " milliseconds"),
		Retries:   num("retries", registry.DefaultRetries, 0, registry.MaxRetries, ""),
		HealthIntervalMS: num("health_interval_ms", registry.DefaultHealthIntervalMS, registry.MinHealthIntervalMS,
			registry.MaxHealthIntervalMS, " milliseconds"),
		Enabled: checked("enabled"), Trusted: checked("trusted"), AutoEnable: checked("auto_enable")}
	// Only the fields of the chosen type count: switching an edited server from stdio to
	// HTTP drops its command and env instead of failing on them.
	isHTTP := *p.Type == registry.TypeSSE || *p.Type == registry.TypeStreamableHTTP
	if *p.Type != registry.TypeStdio {
		empty := ""
		p.Command, p.Args, p.WorkingDir = &empty, &[]string{}, &empty
	}
	if !isHTTP {
		empty, none := "", registry.AuthNone
		p.URL, p.AuthType, p.AuthHeader = &empty, &none, &empty
	}
	if *p.Type != registry.TypeTemplate {
		empty := ""
		p.Template = &empty
	}
	var stored map[string]bool
	var storedHeaders map[string]bool
	if cur != nil {
		stored, storedHeaders = setOf(cur.EnvNames), setOf(cur.HeaderNames)
	}
	// Without auth.PermServerCommand the stdio fields are locked (and not submitted):
	// what the server runs stays as stored.
	locked := cur != nil && cur.Type == registry.TypeStdio && *p.Type == registry.TypeStdio &&
		!PrincipalOf(c).Can(auth.PermServerCommand)
	var envErrs verr.Error
	dropped := false
	p.Env, pf.view.Env, pf.typed.EnvOrig, dropped = secretPairs(c, "env", "variable", stored, *p.Type == registry.TypeStdio, &envErrs)
	if !locked {
		pf.errs.Fields = append(pf.errs.Fields, envErrs.Fields...)
	}
	var d2 bool
	p.Headers, pf.view.Headers, pf.typed.HeadersOrig, d2 = secretPairs(c, "headers", "header", storedHeaders, isHTTP, &pf.errs)
	token := c.FormValue("auth_token")
	// Authentication none needs no empty token here: the registry drops the stored one
	// then. Sending one would read as a new credential, which a tool manager may not set
	// on a trusted server (registry.ChangesTrustedTarget).
	switch {
	case c.FormValue("auth_token_clear") == "true":
		empty := ""
		p.AuthToken = &empty
	case *p.AuthType == registry.AuthNone:
	case token != "":
		p.AuthToken = &token
		d2 = true
	}
	if locked {
		p.Command, p.Args, p.WorkingDir, p.Env, p.ReplaceEnv = nil, nil, nil, nil, false
		dropped = false
	}
	pf.patch = p
	pf.view = views.ServerForm{Name: *p.Name, Description: *p.Description, Type: *p.Type, Command: c.FormValue("command"),
		Args: c.FormValue("args"), WorkingDir: c.FormValue("working_dir"), URL: c.FormValue("url"), Template: c.FormValue("template"),
		AuthType: c.FormValue("auth_type"), AuthHeader: c.FormValue("auth_header"),
		AuthConfigured: cur != nil && cur.AuthConfigured && c.FormValue("auth_token_clear") != "true",
		TimeoutMS:      valueOr(p.TimeoutMS, registry.DefaultTimeoutMS), Retries: valueOr(p.Retries, registry.DefaultRetries),
		HealthIntervalMS: valueOr(p.HealthIntervalMS, registry.DefaultHealthIntervalMS), Enabled: *p.Enabled,
		Trusted: *p.Trusted, AutoEnable: *p.AutoEnable, Env: pf.view.Env, Headers: pf.view.Headers, SecretsDropped: dropped || d2}
	if locked {
		stored := formOf(*cur)
		pf.view.Command, pf.view.Args, pf.view.WorkingDir, pf.view.Env = stored.Command, stored.Args, stored.WorkingDir, stored.Env
		pf.typed.EnvOrig, pf.argLines = nil, argLinesOf(cur.Args, false)
	}
	// The version the edit form was opened at: saving refuses it once someone else saved
	// (the form sends every field, so it would undo their change). It comes back as sent,
	// so a form that came back stale stays refused until reloaded.
	if cur != nil {
		pf.view.Version = c.FormValue("updated_at")
		if at, err := time.Parse(time.RFC3339Nano, pf.view.Version); err == nil {
			pf.patch.ExpectUpdatedAt = &at
		}
	}
	return pf
}

// commandField is the field a refusal to set what runs on the host is shown at: the
// command of a stdio server, the YAML of a template server.
func (pf parsedForm) commandField() string {
	if pf.patch.Type != nil && *pf.patch.Type == registry.TypeTemplate {
		return "template"
	}
	return "command"
}

// argLinesOf is the line each argument is on when args are shown one a line (an
// argument can hold line breaks); dropped: the box's first line break was lost.
func argLinesOf(args []string, dropped bool) []int {
	lines := make([]int, len(args))
	line := 1
	if dropped {
		line = 0
	}
	for i, a := range args {
		lines[i] = max(line, 1)
		line += strings.Count(a, "\n") + 1
	}
	return lines
}

// fieldErrors is formErrors with each argument's problem (the registry's args/N) at
// the arguments box, by its line: the form has no box of its own for an argument.
func (pf parsedForm) fieldErrors(err error) (views.FormErrors, bool) {
	fe, ok := formErrors(err)
	if !ok {
		return fe, false
	}
	type argErr struct{ i, line int }
	var found []argErr
	for k := range fe {
		rest, isArg := strings.CutPrefix(k, "args/")
		n, err := strconv.Atoi(rest)
		if !isArg || err != nil || n < 0 {
			continue
		}
		line := n + 1
		if n < len(pf.argLines) {
			line = pf.argLines[n]
		}
		found = append(found, argErr{n, line})
	}
	slices.SortFunc(found, func(a, b argErr) int { return a.i - b.i })
	var lines []string
	if fe["args"] != "" {
		lines = append(lines, fe["args"])
	}
	for _, a := range found {
		key := "args/" + strconv.Itoa(a.i)
		for msg := range strings.SplitSeq(fe[key], "\n") {
			lines = append(lines, fmt.Sprintf("line %d: %s", a.line, msg))
		}
		delete(fe, key)
	}
	if len(lines) > 0 {
		fe["args"] = strings.Join(lines, "\n")
	}
	return fe, true
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
// (value set, nil to remove), the rows to show again (names only) with the stored name
// each had (sent with the row, so a rename is known as one), and whether any new value
// was typed (and so must be typed again if the form comes back). Rows that would lose a
// secret are refused into errs: a value without a name, a stored row renamed with its
// value box left empty (stored values are never shown, so none can follow the new
// name), and a name on two rows (the later would silently win).
func secretPairs(c echo.Context, field, noun string, stored map[string]bool, applies bool, errs *verr.Error) (map[string]*string, []views.SecretRow, []string, bool) {
	form, _ := c.FormParams()
	names, values, origs := form[field+"_name"], form[field+"_value"], form[field+"_orig"]
	out := map[string]*string{}
	var rows []views.SecretRow
	var rowOrigs []string
	var emptyNew []views.SecretRow
	typed := false
	seen := map[string]int{} // name -> its row
	if applies {
		for i, raw := range names {
			name := strings.TrimSpace(raw)
			val, orig := "", ""
			if i < len(values) {
				val = values[i]
			}
			if i < len(origs) && stored[origs[i]] {
				orig = origs[i]
			}
			renamed := orig != "" && orig != name
			row := views.SecretRow{Name: name, Configured: stored[name] && !renamed, Row: i + 1}
			if name == "" {
				if val != "" {
					rows, rowOrigs = append(rows, row), append(rowOrigs, orig)
					errs.Add(row.ErrorKey(field), fmt.Sprintf("row %d has a value but no name: name this %s, or remove the row", i+1, noun))
					typed = true
				}
				continue // a blank row
			}
			rows, rowOrigs = append(rows, row), append(rowOrigs, orig)
			if first, dup := seen[name]; dup {
				errs.Add(views.SecretRow{Row: i + 1}.ErrorKey(field), fmt.Sprintf("row %d: %s is already the name of row %d: give this %s another name, or remove the row",
					i+1, name, first, noun))
				typed = typed || val != ""
				continue
			}
			seen[name] = i + 1
			switch {
			case val != "":
				out[name] = &val
				typed = true
			case renamed:
				errs.Add(row.ErrorKey(field), fmt.Sprintf("enter the value of %s: renamed from %s, it keeps no value (a stored value is never shown, so it cannot follow the new name), so type it again, or put back the name %s to keep the stored one",
					name, orig, orig))
			case !stored[name]:
				out[name] = &val // a new variable with an empty value
				emptyNew = append(emptyNew, row)
			}
		}
	}
	var gone []string
	for name := range stored {
		if seen[name] == 0 {
			out[name] = nil // its row was removed (or the type no longer has env/headers)
			gone = append(gone, name)
		}
	}
	// A form sent without the stored names (opened before they were sent): a rename
	// reads as one stored row gone and one new row left empty; a removal beside a new
	// variable that is empty on purpose (a flag) is not one.
	if len(origs) == 0 && len(gone) == 1 && len(emptyNew) == 1 {
		for _, r := range emptyNew {
			errs.Add(r.ErrorKey(field), fmt.Sprintf("enter the value of %s: a renamed %s keeps no value (%s is no longer in the form), so type it again",
				r.Name, noun, strings.Join(gone, ", ")))
		}
	}
	return out, rows, rowOrigs, typed
}

// Create saves a new server from the form and starts its session.
func (h ServersHandler) Create(c echo.Context) error {
	pf := parseForm(c, nil)
	if err := pf.errs.Err(); err != nil {
		return h.formInvalid(c, "", pf, err)
	}
	if err := commandCheck(c, registry.ChangesCommand(nil, pf.patch)); err != nil {
		return h.formInvalid(c, "", pf, verr.New(pf.commandField(), err.Error()))
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
	fe, ok := pf.fieldErrors(err)
	if !ok {
		return err
	}
	pf.view.Errors = fe
	return h.formPage(c, http.StatusUnprocessableEntity, id, pf.view, pf.typed, nil)
}

// specOf turns a full patch from the add form into a Spec.
func specOf(p registry.Patch) registry.Spec {
	sp := registry.Spec{Name: *p.Name, Description: *p.Description, Type: *p.Type, Command: *p.Command, Args: *p.Args,
		WorkingDir: *p.WorkingDir, URL: *p.URL, Template: *p.Template, AuthType: *p.AuthType, AuthHeader: *p.AuthHeader,
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
		return h.formInvalid(c, cur.ID, pf, verr.New(pf.commandField(), err.Error()))
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
	if f, _ := fault.As(err); f != nil && f.Code == registry.CodeStale {
		pf.view.Errors = views.FormErrors{"updated_at": staleServerForm}
		return h.formPage(c, http.StatusConflict, cur.ID, pf.view, pf.typed, nil)
	}
	if err != nil {
		return h.formInvalid(c, cur.ID, pf, err)
	}
	setFlash(c, "success", "Server "+sv.Name+" saved.", h.SecureCookies)
	return c.Redirect(http.StatusSeeOther, "/servers/"+sv.ID)
}

// staleServerForm is shown at the top of an edit form saved after someone else saved the server.
const staleServerForm = "Someone else changed this server since you opened this form. Reload it to see their changes, then make yours again: what you typed is below."

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
		err = verr.New(pf.commandField(), errCommandDenied.Message)
	}
	var conn registry.Connection
	if err == nil {
		pf.patch.KeepCommand = !PrincipalOf(c).Can(auth.PermServerCommand)
		conn, err = h.Registry.PreviewConnection(ctx, id, pf.patch)
	}
	htmx := c.Request().Header.Get("HX-Request") == "true"
	if err == nil && htmx {
		// In the background: the fragment shows its progress and a Cancel button, and
		// polls until it ends (a page that stops polling abandons it).
		if err = h.Registry.AuditTest(ctx, ActorOf(c), id, conn); err == nil {
			run := h.MCP.StartTest(conn, PrincipalOf(c).User.ID)
			return render(c, http.StatusOK, views.ServerTestRunning(h.testRunView(run.ID, run.Progress(h.MCP.TestTimeout()))))
		}
	}
	if err == nil && !htmx {
		var r mcpclient.TestResult
		if r, err = h.testConnection(c, id, conn); err == nil {
			result = testView(r)
		}
	}
	if htmx {
		if fe, ok := pf.fieldErrors(err); ok {
			result = &views.ServerTest{FormProblems: fieldMessages(fe)}
		} else if err != nil {
			return err
		}
		return render(c, http.StatusOK, views.ServerTestResult(result))
	}
	if err != nil {
		return h.formInvalid(c, id, pf, err)
	}
	return h.formPage(c, http.StatusOK, id, pf.view, pf.typed, result)
}

func fieldMessages(fe views.FormErrors) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(fe)) {
		for _, line := range strings.Split(fe[k], "\n") { // a template's problems, one a line
			out = append(out, k+" "+line)
		}
	}
	return out
}

func (h ServersHandler) testRunView(id string, p mcpclient.TestProgress) views.ServerTestRun {
	return views.ServerTestRun{ID: id, Replica: h.MCP.Replica(), Step: p.Step, ElapsedS: int(p.Elapsed.Seconds()), LimitS: int(p.Limit.Seconds())}
}

// TestProgress is the fragment of a connection test running in the background: its
// step while it runs (polled), its result once it ended.
func (h ServersHandler) TestProgress(c echo.Context) error {
	run, ok := h.MCP.TestRunOf(c.Param("run"), PrincipalOf(c).User.ID)
	// The page polls the status alone; an ended test replaces the whole panel: the
	// panel around the poll that asked, so a poll still in flight when its panel was
	// replaced (Cancel, another test) lands in the old one, never in the new.
	whole := func(t *views.ServerTest) error {
		c.Response().Header().Set("HX-Retarget", "closest .test-result")
		c.Response().Header().Set("HX-Reswap", "outerHTML")
		return render(c, http.StatusOK, views.ServerTestResult(t))
	}
	if !ok {
		return whole(&views.ServerTest{Error: "this test is over and its result is gone; test again"})
	}
	p := run.Progress(h.MCP.TestTimeout())
	if p.Done {
		return whole(testView(p.Result))
	}
	return render(c, http.StatusOK, views.ServerTestStatus(h.testRunView(run.ID, p)))
}

// TestCancel stops a connection test running in the background and shows its result.
func (h ServersHandler) TestCancel(c echo.Context) error {
	run, ok := h.MCP.TestRunOf(c.Param("run"), PrincipalOf(c).User.ID)
	if !ok {
		return render(c, http.StatusOK, views.ServerTestResult(nil))
	}
	run.Cancel()
	ctx, cancel := context.WithTimeout(c.Request().Context(), 5*time.Second)
	defer cancel()
	r, err := run.Wait(ctx)
	if err != nil {
		return render(c, http.StatusOK, views.ServerTestResult(&views.ServerTest{Error: "cancelled"}))
	}
	return render(c, http.StatusOK, views.ServerTestResult(testView(r)))
}

func testView(r mcpclient.TestResult) *views.ServerTest {
	return &views.ServerTest{OK: r.OK, Error: r.Error, ConnectMS: r.ConnectMS, LatencyMS: r.LatencyMS,
		ServerName: firstNonEmpty(r.Info.Title, r.Info.Name), Version: r.Info.Version, Protocol: r.Info.ProtocolVersion,
		ToolCount: r.ToolCount, Tools: r.Tools, ToolsCut: r.ToolsCut, Stderr: r.Stderr, Busy: r.Busy}
}
