package handlers

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"

	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/configcode"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/verr"
	"github.com/toolwarden/toolwarden/views"
	"github.com/toolwarden/toolwarden/web/httperr"
)

// maxImportBytes bounds an uploaded configuration file.
const maxImportBytes = 1 << 20

// ImportExportHandler serves configuration as code in the browser and the API: export as
// YAML, import (native YAML, claude_desktop_config.json, .mcp.json, VS Code mcp.json)
// with a preview of what would change.
type ImportExportHandler struct {
	*Shell
	Registry *registry.Service
	// ConfigCode is the whole configuration (GET /api/v1/export, POST /api/v1/import and
	// the import page, which takes both a servers file and a whole configuration).
	ConfigCode *configcode.Service
}

// Export downloads every server registration as YAML, without secret values.
func (h ImportExportHandler) Export(c echo.Context) error {
	out, err := h.Registry.Export(c.Request().Context())
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderContentDisposition, `attachment; filename="toolwarden-servers.yaml"`)
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.Blob(http.StatusOK, "application/yaml; charset=utf-8", out)
}

// ImportForm renders the upload form.
func (h ImportExportHandler) ImportForm(c echo.Context) error {
	return render(c, http.StatusOK, views.Import(views.ImportPage{Layout: h.layout(c, "Import servers")}))
}

// ImportPreview parses the uploaded (or pasted) file and shows the plan; nothing changes.
func (h ImportExportHandler) ImportPreview(c echo.Context) error {
	name, data, err := uploaded(c)
	page := views.ImportPage{Layout: h.layout(c, "Import servers"), Prune: c.FormValue("prune") == "true", FileName: name}
	// Pasted text comes back with any error, to be fixed where it is (a file is the
	// person's own to fix; its content is not echoed).
	if content := c.FormValue("content"); len(content) <= maxImportBytes {
		page.Content = content // one refused for its size is not sent back
	}
	if err != nil {
		page.Error = err.Error()
		return render(c, http.StatusUnprocessableEntity, views.Import(page))
	}
	plan, _, err := h.planAll(c, name, data, page.Prune)
	if err != nil {
		if problems, ok := registry.ProblemsOf(err); ok {
			page.Error = "The file could not be read:"
			for _, p := range problems {
				page.Problems = append(page.Problems, p.String())
			}
			return render(c, http.StatusUnprocessableEntity, views.Import(page))
		}
		return err
	}
	page.Plan = configPlanView(plan)
	if !plan.HasErrors() {
		page.Content = "" // the preview's apply form carries the sealed file instead
		if page.Sealed, err = h.Registry.SealUpload(PrincipalOf(c).User.ID, name, data); err != nil {
			return err
		}
		page.Digest = plan.Digest()
	}
	status := http.StatusOK
	if plan.HasErrors() {
		status = http.StatusUnprocessableEntity
	}
	return render(c, status, views.Import(page))
}

// ImportApply applies a previewed import. The plan is made again against the current
// registrations and applied only if it is the plan that was shown: otherwise the new
// plan is shown for another look.
func (h ImportExportHandler) ImportApply(c echo.Context) error {
	ctx := c.Request().Context()
	name, data, err := h.Registry.OpenUpload(PrincipalOf(c).User.ID, c.FormValue("sealed"))
	if err != nil {
		setFlash(c, "error", err.Error(), h.SecureCookies)
		return c.Redirect(http.StatusSeeOther, "/servers/import")
	}
	prune := c.FormValue("prune") == "true"
	plan, _, err := h.planAll(c, name, data, prune)
	if err != nil {
		return err
	}
	if plan.HasErrors() || plan.Digest() != c.FormValue("digest") {
		page := views.ImportPage{Layout: h.layout(c, "Import servers"), FileName: name, Prune: prune, Plan: configPlanView(plan)}
		status := http.StatusUnprocessableEntity
		if !plan.HasErrors() {
			status = http.StatusConflict
			page.Error = "What the file changes (its servers, or the tools it lists) changed since it was previewed. This is the plan as it stands now: apply it if it is still what you want."
			page.Sealed, page.Digest = c.FormValue("sealed"), plan.Digest()
		}
		return render(c, status, views.Import(page))
	}
	res, err := h.ConfigCode.Apply(ctx, ActorOf(c), plan)
	partial := errors.Is(err, configcode.ErrPartial)
	if err != nil && !partial {
		return err
	}
	msg := "Imported " + filepath.Base(name) + ": " + res.Servers.String()
	if partial {
		// The first transaction committed: what it changed is named, not only counted.
		msg = "Imported " + filepath.Base(name) + " in part: " + res.Servers.String()
	}
	if len(res.Changed) > 0 {
		msg += "; " + views.Plural(len(res.Changed), "other change", "other changes")
		if partial {
			msg += " (" + strings.Join(res.Changed, ", ") + ")"
		}
	}
	if len(res.Unapplied) > 0 {
		var why []string
		for _, u := range res.Unapplied {
			why = append(why, u.String())
		}
		msg += fmt.Sprintf(". Not applied (%d): %s", len(res.Unapplied), strings.Join(why, "; "))
	}
	kind := "success"
	if partial {
		kind, msg = "error", msg+". "+h.partialImport(err)
	}
	setFlash(c, kind, msg, h.SecureCookies)
	return c.Redirect(http.StatusSeeOther, "/servers")
}

// partialImport says why an import stopped after its first transaction had committed
// (configcode.ErrPartial), as the API shows the cause, logging a cause that is ours.
func (h ImportExportHandler) partialImport(err error) string {
	r := httperr.Classify(err)
	if r.Status >= http.StatusInternalServerError {
		h.Logger.Error("handlers: import applied in part", "err", err)
	}
	return "The import stopped before the settings of the tools of the servers it discovered (" + strings.TrimSuffix(r.Message, ".") +
		"): import the file again to apply the rest."
}

// planAll parses and plans a whole configuration (servers with the checks plan makes;
// categories, tools and settings need auth.PermSettings, an administrator's).
func (h ImportExportHandler) planAll(c echo.Context, name string, data []byte, prune bool) (*configcode.Plan, []string, error) {
	// No ${VAR} expansion from the browser: it would read Toolwarden's own environment.
	file, err := configcode.Parse(name, data, registry.ParseOptions{ExpandEnv: false})
	if err != nil {
		return nil, nil, err
	}
	p := PrincipalOf(c)
	refused := (file.HasTools || file.HasCats || file.Settings != nil) && !p.Can(auth.PermSettings)
	if refused {
		// Not planned at all: the refusal says so, and planning them costs work (each
		// listed tool against the stored ones) for a plan that cannot be applied.
		file.Tools, file.Categories, file.Settings, file.HasTools, file.HasCats = nil, nil, nil, false, false
	}
	plan, err := h.ConfigCode.Plan(c.Request().Context(), file, configcode.ImportOptions{Prune: prune, CompareSecrets: p.Can(auth.PermServerCommand),
		Token: p.Kind == audit.ActorToken, Actor: ActorOf(c)})
	if err != nil {
		return nil, nil, err
	}
	before := len(plan.Servers.Errors)
	denied := h.deny(c, plan.Servers)
	plan.Errors = append(plan.Errors, plan.Servers.Errors[before:]...)
	if refused {
		denied = append(denied, "configuration")
		plan.Errors = append(plan.Errors, registry.Problem{File: plan.File, Field: "tools",
			Message: "sets categories, tools' settings, permissions or run-time settings; only administrators can import those (import the servers alone, or ask an administrator)"})
	}
	return plan, denied, nil
}

// plan parses and plans an import. Servers whose stdio command the file changes, when
// the caller may not (auth.PermServerCommand), are returned in denied and are errors of
// the plan, so it cannot be applied.
func (h ImportExportHandler) plan(c echo.Context, name string, data []byte, prune bool) (plan *registry.Plan, denied []string, err error) {
	// No ${VAR} expansion from the browser: it would read Toolwarden's own environment.
	cfg, err := registry.ParseConfig(name, data, registry.ParseOptions{ExpandEnv: false})
	if err != nil {
		return nil, nil, err
	}
	admin := PrincipalOf(c).Can(auth.PermServerCommand)
	plan, err = h.Registry.PlanImport(c.Request().Context(), cfg, registry.ImportOptions{Prune: prune, CompareSecrets: admin, Actor: ActorOf(c)})
	if err != nil {
		return nil, nil, err
	}
	return plan, h.deny(c, plan), nil
}

// deny adds to plan an error for each server whose change the caller may not make
// (stdio commands: auth.PermServerCommand; trust: auth.PermServerTrust; updates and
// deletions: auth.PermServerEdit and auth.PermServerDelete, as the servers' pages
// need) and names them.
func (h ImportExportHandler) deny(c echo.Context, plan *registry.Plan) []string {
	return denyImport(PrincipalOf(c).Can, plan)
}

func denyImport(can func(auth.Permission) bool, plan *registry.Plan) (denied []string) {
	for _, need := range []struct {
		action, why string
		perm        auth.Permission
	}{
		{registry.PlanUpdate, "updates this server, which needs the permission to edit servers", auth.PermServerEdit},
		{registry.PlanDelete, "deletes this server (prune), which needs the permission to delete servers", auth.PermServerDelete},
	} {
		if can(need.perm) {
			continue
		}
		for _, it := range plan.Items {
			if it.Action == need.action {
				denied = append(denied, it.Name)
				plan.Errors = append(plan.Errors, registry.Problem{File: plan.File, Server: it.Name, Message: need.why})
			}
		}
	}
	for _, need := range []struct {
		names      func() []string
		field, why string
		perm       auth.Permission
	}{
		{plan.CommandChanges, "command", "sets what this stdio server runs on the Toolwarden host (command, args, env or working directory); only administrators can import that", auth.PermServerCommand},
		{plan.TrustChanges, "trusted", "marks this server trusted or untrusted, or changes what a trusted server runs or where it points, which decides how risky its tools are; only administrators can import that", auth.PermServerTrust},
	} {
		if can(need.perm) {
			continue
		}
		for _, n := range need.names() {
			denied = append(denied, n)
			plan.Errors = append(plan.Errors, registry.Problem{File: plan.File, Server: n, Field: need.field, Message: need.why})
		}
	}
	return denied
}

// uploaded returns the file from the "file" field, or the "content" textarea.
func uploaded(c echo.Context) (string, []byte, error) {
	if fh, err := c.FormFile("file"); err == nil && fh.Size > 0 {
		if fh.Size > maxImportBytes {
			return "", nil, fmt.Errorf("the file is %d bytes; at most %d are accepted", fh.Size, maxImportBytes)
		}
		f, err := fh.Open()
		if err != nil {
			return "", nil, err
		}
		defer f.Close()
		data, err := io.ReadAll(io.LimitReader(f, maxImportBytes+1))
		return uploadName(fh.Filename), data, err
	}
	content := c.FormValue("content")
	if strings.TrimSpace(content) == "" {
		return "", nil, errors.New("choose a file, or paste its content")
	}
	if len(content) > maxImportBytes {
		return "", nil, fmt.Errorf("the pasted text is over %d bytes", maxImportBytes)
	}
	name := "pasted"
	if n := strings.TrimSpace(c.FormValue("filename")); n != "" {
		name = uploadName(n)
	}
	return name, []byte(content), nil
}

// uploadName is a file's name (uploaded, or given for pasted text or an API body) made
// text: the form check sees no file name, and RFC 2231's filename* carries any bytes,
// which failed the import at its audit row.
func uploadName(name string) string {
	name = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return -1
		}
		return r
	}, strings.ToValidUTF8(name, "\uFFFD"))
	if name = filepath.Base(name); name == "." || name == "/" {
		return "upload"
	}
	return name
}

func planView(p *registry.Plan) *views.ImportPlan {
	v := &views.ImportPlan{Format: p.Format, CanApply: !p.HasErrors(),
		Summary: fmt.Sprintf("%d to create, %d to update, %d to delete, %d unchanged, %d kept",
			p.Count(registry.PlanCreate), p.Count(registry.PlanUpdate), p.Count(registry.PlanDelete),
			p.Count(registry.PlanUnchanged), p.Count(registry.PlanKeep))}
	for _, it := range p.Items {
		iv := views.ImportItem{Action: it.Action, Name: it.Name, Type: it.Type}
		for _, ch := range it.Changes {
			iv.Changes = append(iv.Changes, ch.String())
		}
		// A deletion's compensations and per-user rules that go with it, shown before it
		// is applied as the server page's Delete shows them.
		iv.Changes = append(iv.Changes, it.Removes()...)
		v.Items = append(v.Items, iv)
	}
	for _, w := range p.Warnings {
		v.Warnings = append(v.Warnings, w.String())
	}
	for _, e := range p.Errors {
		v.Errors = append(v.Errors, e.String())
	}
	return v
}

// importBody reads an import's body (bounded) and the file name it is known by.
func importBody(c echo.Context) (string, []byte, error) {
	data, err := io.ReadAll(io.LimitReader(c.Request().Body, maxImportBytes+1))
	if err != nil {
		return "", nil, err
	}
	if len(data) > maxImportBytes {
		return "", nil, verr.New("body", fmt.Sprintf("must be at most %d bytes", maxImportBytes))
	}
	name := "body"
	if n := c.QueryParam("filename"); n != "" {
		name = uploadName(n)
	}
	return name, data, nil
}

// importRefusal is why a planned import may not go on: the file could not be read, the
// person may not import what it holds (denied), or the plan has errors.
func importRefusal(err error, denied bool, problems []registry.Problem) error {
	if ps, ok := registry.ProblemsOf(err); ok {
		return problemsError(ps)
	}
	if err != nil {
		return err
	}
	if denied {
		var why []string
		for _, p := range problems {
			why = append(why, p.String())
		}
		return fault.Forbidden("only administrators can import this file: " + strings.Join(why, "; "))
	}
	if len(problems) > 0 {
		return problemsError(problems)
	}
	return nil
}

// APIExport returns the YAML export.
func (h ImportExportHandler) APIExport(c echo.Context) error { return h.Export(c) }

// importFlags reads an API import's ?dry_run and ?prune as booleans (1, t, true, TRUE…),
// refusing anything else: read loosely, a dry_run=1 applied the import and, with prune,
// deleted what the file left out. A bare ?dry_run is a dry run, the safe reading.
func importFlags(c echo.Context) (dryRun, prune bool, err error) {
	var ve verr.Error
	// bare is how a name given without a value reads ("" is refused).
	flag := func(name, bare string) bool {
		vs, ok := c.QueryParams()[name]
		switch {
		case !ok:
			return false
		case len(vs) > 1:
			ve.Add(name, "must be given once")
			return false
		case vs[0] == "":
			vs = []string{bare}
		}
		b, err := strconv.ParseBool(vs[0])
		if err != nil {
			ve.Add(name, "must be true or false")
		}
		return b
	}
	dryRun, prune = flag("dry_run", "true"), flag("prune", "")
	return dryRun, prune, ve.Err()
}

// APIImport plans (and unless ?dry_run=true, applies) the request body as a
// configuration file named by ?filename= (the format is detected from the content).
// A plan with errors is 400 invalid_input with each problem in details.
func (h ImportExportHandler) APIImport(c echo.Context) error {
	dryRun, prune, err := importFlags(c)
	if err != nil {
		return err
	}
	name, data, err := importBody(c)
	if err != nil {
		return err
	}
	plan, denied, err := h.plan(c, name, data, prune)
	if err != nil {
		return importRefusal(err, false, nil)
	}
	if err := importRefusal(nil, len(denied) > 0, plan.Errors); err != nil {
		return err
	}
	if dryRun {
		return c.JSON(http.StatusOK, map[string]any{"dry_run": true, "plan": plan})
	}
	res, err := h.Registry.ApplyImport(c.Request().Context(), ActorOf(c), plan)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"dry_run": false, "plan": plan, "result": res})
}

func problemsError(ps []registry.Problem) error {
	var ve verr.Error
	for _, p := range ps {
		field := p.Field
		if p.Server != "" {
			field = "servers/" + p.Server + "/" + p.Field
		}
		ve.Add(strings.TrimSuffix(field, "/"), p.Message)
	}
	return ve.Err()
}

// configPlanView is a whole configuration's plan for the import page: the servers as
// before, then categories, settings and tools with their changes, and what cannot be
// applied.
func configPlanView(p *configcode.Plan) *views.ImportPlan {
	v := planView(p.Servers)
	v.CanApply = !p.HasErrors()
	v.Errors = nil
	for _, e := range p.Errors {
		v.Errors = append(v.Errors, e.String())
	}
	for _, it := range p.Items {
		iv := views.ImportItem{Action: it.Action, Name: it.Name, Type: it.Kind}
		for _, ch := range it.Changes {
			iv.Changes = append(iv.Changes, ch.String())
		}
		v.Others = append(v.Others, iv)
	}
	for _, u := range p.Unapplied {
		v.NotApplied = append(v.NotApplied, u.String())
	}
	if len(p.Items) > 0 || len(p.Unapplied) > 0 {
		v.Summary += fmt.Sprintf("; %s to change, %d after discovery, %d not applied",
			views.Plural(p.Count(configcode.KindTool, registry.PlanUpdate), "tool", "tools"),
			p.Count(configcode.KindTool, configcode.ActionPending), len(p.Unapplied))
	}
	return v
}

// APIExportAll returns the whole configuration as YAML (services/configcode), without
// secret values.
func (h ImportExportHandler) APIExportAll(c echo.Context) error {
	out, err := h.ConfigCode.Export(c.Request().Context())
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderContentDisposition, `attachment; filename="toolwarden-config.yaml"`)
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.Blob(http.StatusOK, "application/yaml; charset=utf-8", out)
}

// APIImportAll plans (and unless ?dry_run=true, applies) the request body as a whole
// configuration named by ?filename=. A file with errors is 400 invalid_input naming each
// problem; what cannot be applied is listed in not_applied and the rest applies. An
// import that failed after its first transaction committed (configcode.ErrPartial) is
// the error import_partial, with its cause's status and the result in its details.
func (h ImportExportHandler) APIImportAll(c echo.Context) error {
	dryRun, prune, err := importFlags(c)
	if err != nil {
		return err
	}
	name, data, err := importBody(c)
	if err != nil {
		return err
	}
	plan, denied, err := h.planAll(c, name, data, prune)
	if err != nil {
		return importRefusal(err, false, nil)
	}
	if err := importRefusal(nil, len(denied) > 0, plan.Errors); err != nil {
		return err
	}
	if dryRun {
		return c.JSON(http.StatusOK, map[string]any{"dry_run": true, "plan": plan, "diff": plan.String()})
	}
	res, err := h.ConfigCode.Apply(c.Request().Context(), ActorOf(c), plan)
	if errors.Is(err, configcode.ErrPartial) {
		// An error (with its cause's status: a script checking it must not take this for
		// success) whose details say what the committed part changed.
		r := httperr.Classify(err)
		return c.JSON(r.Status, map[string]any{"error": map[string]any{"code": "import_partial", "message": h.partialImport(err),
			"details": map[string]any{"partial": true, "cause": r.Code, "result": res}}})
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"dry_run": false, "plan": plan, "diff": plan.String(), "result": res})
}
