package handlers

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/internal/textcheck"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/schema"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/verr"
	"github.com/toolwarden/toolwarden/views"
)

// The Compensation tab of the tool page (/tools/:id/compensation): the compensation that undoes
// a completed step of the tool when an execution fails and its plan brings no undo
// step of its own ("undo X with Y, mapping arguments"). Reading it needs tool.inspect,
// changing it tool.configure (the API is /api/v1/tools/:id/compensation).

// Compensation renders the Compensation tab.
func (h ToolPageHandler) Compensation(c echo.Context) error {
	ctx := c.Request().Context()
	last, err := h.Events.LatestID(ctx) // before the tool: a change in between is replayed (Show)
	if err != nil {
		return err
	}
	it, err := h.Tools.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	r, err := h.toolCompensation(c, it, nil, nil)
	if err != nil {
		return err
	}
	return h.renderCompensation(c, http.StatusOK, it, r, last)
}

// SetCompensation sets, changes or (remove=true, or no undo tool and no arguments)
// removes the compensation. Bad input changes nothing: the tab comes back (422) with
// the input kept and each error next to its field.
func (h ToolPageHandler) SetCompensation(c echo.Context) error {
	ctx := c.Request().Context()
	last, err := h.Events.LatestID(ctx) // for the page a bad form comes back on (Show)
	if err != nil {
		return err
	}
	it, err := h.Tools.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	form, m, err := parseCompensation(c)
	if c.FormValue("remove") == "true" {
		form, m, err = views.ToolCompensationForm{}, nil, nil
	}
	if err == nil {
		err = h.Executions.SetCompensation(ctx, ActorOf(c), it.ID, form.UndoTool, m)
	}
	if err != nil {
		fe, ok := formErrors(err)
		if !ok {
			return err
		}
		r, rerr := h.toolCompensation(c, it, &form, fe)
		if rerr != nil {
			return rerr
		}
		return h.renderCompensation(c, http.StatusUnprocessableEntity, it, r, last)
	}
	msg := "A completed step of " + it.QualifiedName() + " is now undone with " + form.UndoTool + " when its execution fails or is rolled back."
	if form.UndoTool == "" {
		msg = "The compensation of " + it.QualifiedName() + " was removed: only undo steps of plans undo it now."
	}
	setFlash(c, "success", msg, h.SecureCookies)
	return c.Redirect(http.StatusSeeOther, views.ToolCompensationURL(it.ID))
}

// parseCompensation reads the form: the undo tool and one row per argument (name, from,
// value; rows left empty are skipped). It checks what only the form can get wrong
// (a value that is not JSON, a name given twice); the service checks the rest.
func parseCompensation(c echo.Context) (views.ToolCompensationForm, map[string]executions.MappedArgument, error) {
	fp, _ := c.FormParams()
	form := views.ToolCompensationForm{UndoTool: strings.TrimSpace(fp.Get("undo_tool"))}
	names, froms, values := fp["arg_name"], fp["arg_from"], fp["arg_value"]
	at := func(s []string, i int) string {
		if i < len(s) {
			return strings.TrimSpace(s[i])
		}
		return ""
	}
	e := &verr.Error{}
	m := map[string]executions.MappedArgument{}
	for i := range max(len(names), len(froms), len(values)) {
		row := views.ToolCompensationArg{Name: at(names, i), From: at(froms, i), Value: at(values, i)}
		if row == (views.ToolCompensationArg{}) {
			continue
		}
		form.Rows = append(form.Rows, row)
		field := "/argument_map/" + row.Name
		switch {
		case row.Name == "":
			e.Add("/argument_map", "every mapped argument needs a name: the undo tool's argument it sets")
			continue
		case slices.ContainsFunc(form.Rows[:len(form.Rows)-1], func(r views.ToolCompensationArg) bool { return r.Name == row.Name }):
			e.Add(field, "is mapped twice; keep one row for it")
			continue
		case row.Value != "" && !json.Valid([]byte(row.Value)):
			e.Add(field, `the fixed value must be JSON: text in quotes ("like this"); numbers, true, false and null as they are`)
			continue
		case row.Value != "" && textcheck.Problem([]byte(row.Value)) != "":
			e.Add(field, "the fixed value: "+textcheck.Problem([]byte(row.Value)))
			continue
		}
		a := executions.MappedArgument{From: row.From}
		if row.Value != "" {
			a.Value = json.RawMessage(row.Value)
		}
		m[row.Name] = a
	}
	return form, m, e.Err()
}

// renderCompensation renders the tool page with the Compensation tab, following events
// after last (read before it was).
func (h ToolPageHandler) renderCompensation(c echo.Context, status int, it tools.Item, r *views.ToolCompensationTab, last int64) error {
	v := h.toolPageAt(c, it, views.ToolTabCompensation, last)
	v.Compensation = r
	return render(c, status, views.Tool(v))
}

// toolCompensation builds the tab: the compensation in force and, for those who may change
// it, the form (what was submitted, or else what is in force).
func (h ToolPageHandler) toolCompensation(c echo.Context, it tools.Item, form *views.ToolCompensationForm, errs views.FormErrors) (*views.ToolCompensationTab, error) {
	ctx := c.Request().Context()
	r := &views.ToolCompensationTab{Action: views.ToolCompensationURL(it.ID), CanEdit: PrincipalOf(c).Can(auth.PermToolConfigure), Errors: errs}
	comp, err := h.Executions.CompensationOf(ctx, it.ID)
	if err != nil {
		return nil, err
	}
	if comp != nil {
		shown := &views.ToolCompensation{UndoToolID: comp.UndoToolID, UndoTool: comp.UndoToolID, UpdatedBy: comp.UpdatedBy}
		undo, err := h.Tools.Get(ctx, comp.UndoToolID)
		switch {
		case errors.Is(err, tools.ErrNotFound):
			shown.UndoMissing = true
		case err != nil:
			return nil, err
		default:
			shown.UndoTool = undo.QualifiedName()
			shown.UndoDisabled = undo.Status != "enabled"
		}
		names := make([]string, 0, len(comp.ArgumentMap))
		for n := range comp.ArgumentMap {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			a := comp.ArgumentMap[n]
			shown.Arguments = append(shown.Arguments, views.ToolCompensationArg{Name: n, From: a.From, Value: string(a.Value)})
		}
		r.Configured = shown
	}
	if !r.CanEdit {
		return r, nil
	}
	switch {
	case form != nil:
		r.Form = *form
	case r.Configured != nil:
		r.Form = views.ToolCompensationForm{UndoTool: r.Configured.UndoTool, Rows: r.Configured.Arguments}
	}
	// Undo tools are most often on the same server (create_file → delete_file).
	page, err := h.Tools.List(ctx, tools.Query{Server: it.ServerID, Limit: tools.MaxLimit, Brief: true})
	if err != nil {
		return nil, err
	}
	for _, t := range page.Items {
		if t.ID != it.ID {
			r.UndoTools = append(r.UndoTools, t.QualifiedName())
		}
	}
	slices.Sort(r.UndoTools)
	for _, p := range schema.Parameters(it.InputSchema) {
		r.Pointers = append(r.Pointers, "/"+strings.ReplaceAll(strings.ReplaceAll(p.Name, "~", "~0"), "/", "~1"))
	}
	return r, nil
}
