package handlers

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf16"

	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/verr"
	"github.com/toolwarden/toolwarden/views"
)

// The Access tab of the tool page (/tools/:id/access) and its API
// (/api/v1/tools/:id/permissions): who may call a tool by role, and the per-user
// overrides (user_tool_permissions) that win over the role. Reading them needs
// tool.inspect; changing them needs users.manage, because an override changes what one
// user may do, as a role change does.

// The tab strip is built from tool.go's tables: the Access tab joins them here, with
// its label and the rule that only tool.inspect shows it.
// Access renders the Access tab.
func (h ToolPageHandler) Access(c echo.Context) error {
	ctx := c.Request().Context()
	last, err := h.Events.LatestID(ctx) // before the tool: a change in between is replayed (Show)
	if err != nil {
		return err
	}
	it, err := h.Tools.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	a, err := h.toolAccess(c, it, views.AccessForm{}, nil)
	if err != nil {
		return err
	}
	return h.renderAccess(c, http.StatusOK, it, a, last)
}

// SetAccess adds, changes (access=allow|deny) or removes (access=role) one user's
// rule. Bad input changes nothing and shows the form again with each error next to its
// field. htmx gets the panel alone, always 200 (htmx does not swap error statuses); a
// browser without it gets 422 with the whole page, or a redirect on success.
func (h ToolPageHandler) SetAccess(c echo.Context) error {
	ctx := c.Request().Context()
	last, err := h.Events.LatestID(ctx) // for the whole page a bad form comes back on (Show)
	if err != nil {
		return err
	}
	it, err := h.Tools.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	form := views.AccessForm{Username: strings.TrimSpace(c.FormValue("username")), Access: c.FormValue("access")}
	canUse, err := parseAccess(form)
	if err == nil {
		err = h.Tools.SetPermission(ctx, ActorOf(c), it.ID, form.Username, canUse)
	}
	htmx := c.Request().Header.Get("HX-Request") == "true"
	if err != nil {
		fe, ok := formErrors(err)
		if !ok {
			return err
		}
		a, aerr := h.toolAccess(c, it, form, fe)
		if aerr != nil {
			return aerr
		}
		if htmx {
			return render(c, http.StatusOK, views.ToolAccessPanel(toolCard(it), *a))
		}
		return h.renderAccess(c, http.StatusUnprocessableEntity, it, a, last)
	}
	msg := accessOutcome(it, form.Username, canUse)
	if !htmx {
		setFlash(c, "success", msg, h.SecureCookies)
		return c.Redirect(http.StatusSeeOther, views.ToolAccessURL(it.ID))
	}
	a, err := h.toolAccess(c, it, views.AccessForm{}, nil)
	if err != nil {
		return err
	}
	a.Notice = msg
	// The panel is swapped whole and the focus stays on Save (or goes to a neighbouring
	// row after a Remove): a notice inserted with its text is not reliably read, so the
	// page's lasting live region says it too.
	announceHX(c, msg)
	return render(c, http.StatusOK, views.ToolAccessPanel(toolCard(it), *a))
}

// announceHX has an htmx answer said aloud by the page's #announce live region: the
// HX-Trigger event tw-announce, which app.js passes to its announce. The header is
// ASCII (JSON \u escapes), since browsers read header bytes as Latin-1.
func announceHX(c echo.Context, msg string) {
	b, _ := json.Marshal(map[string]string{"tw-announce": msg}) // a map of strings always marshals
	var h strings.Builder
	for _, r := range string(b) {
		switch {
		case r < 0x80:
			h.WriteRune(r)
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(&h, `\u%04x\u%04x`, r1, r2)
		default:
			fmt.Fprintf(&h, `\u%04x`, r)
		}
	}
	c.Response().Header().Set("HX-Trigger", h.String())
}

// parseAccess checks the form (every problem at once) and reads its access field:
// allow, deny, or role (nil: the role decides again).
func parseAccess(f views.AccessForm) (*bool, error) {
	e := &verr.Error{}
	if f.Username == "" {
		e.Add("username", "is required: the user the rule is for")
	}
	var canUse *bool
	switch f.Access {
	case views.AccessAllow, views.AccessDeny:
		b := f.Access == views.AccessAllow
		canUse = &b
	case views.AccessByRole:
	case "":
		e.Add("access", "is required: allow or deny")
	default:
		e.Add("access", "must be allow or deny")
	}
	return canUse, e.Err()
}

// accessOutcome says what a rule now means for the user.
func accessOutcome(it tools.Item, username string, canUse *bool) string {
	switch {
	case canUse == nil:
		return "The role of " + username + " decides again whether they may call " + it.QualifiedName() + "."
	case *canUse:
		return username + " may call " + it.QualifiedName() + ", whatever their role."
	}
	return username + " may not call " + it.QualifiedName() + ", whatever their role."
}

// renderAccess renders the tool page with the Access tab, following events after last
// (read before it was).
func (h ToolPageHandler) renderAccess(c echo.Context, status int, it tools.Item, a *views.ToolAccess, last int64) error {
	v := h.toolPageAt(c, it, views.ToolTabAccess, last)
	v.Access = a
	return render(c, status, views.Tool(v))
}

// toolAccess builds the Access tab: the role table, the overrides and, for those who may
// change them, the form with the usernames it suggests.
func (h ToolPageHandler) toolAccess(c echo.Context, it tools.Item, form views.AccessForm, errs views.FormErrors) (*views.ToolAccess, error) {
	ctx := c.Request().Context()
	perms, err := h.Tools.Permissions(ctx, it.ID)
	if err != nil {
		return nil, err
	}
	a := &views.ToolAccess{Action: views.ToolAccessURL(it.ID), CanEdit: PrincipalOf(c).Can(auth.PermUsers), Form: form, Errors: errs}
	for _, r := range auth.Roles {
		a.Roles = append(a.Roles, views.AccessRole{Role: string(r), Label: r.Label(), CanUse: r.Can(auth.PermToolUse)})
	}
	for _, p := range perms {
		role := auth.Role(p.Role)
		a.Rules = append(a.Rules, views.AccessRule{Username: p.Username, Role: p.Role, RoleLabel: role.Label(), CanUse: p.CanUse,
			RoleCanUse: role.Can(auth.PermToolUse)})
	}
	if !a.CanEdit {
		return a, nil
	}
	users, err := h.Auth.ListUsers(ctx)
	if err != nil {
		return nil, err
	}
	for _, u := range users {
		a.Users = append(a.Users, u.Username)
	}
	return a, nil
}

// API.

// APIPermissions lists the per-user overrides of one tool:
// {"permissions":[{"user_id","username","can_use","role"}]}.
func (h ToolPageHandler) APIPermissions(c echo.Context) error {
	it, err := h.Tools.Get(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return h.writePermissions(c, it.ID)
}

// permissionInput is the body of PUT /api/v1/tools/:id/permissions. can_use is raw so
// that null (the role decides again) and a missing field can be told apart.
type permissionInput struct {
	Username string          `json:"username"`
	CanUse   json.RawMessage `json:"can_use"`
}

// APISetPermission sets one user's override: {"username":"bob","can_use":true|false|null};
// 200 with the tool's overrides as they are now, 400 naming the field at fault, 404 for
// an unknown tool.
func (h ToolPageHandler) APISetPermission(c echo.Context) error {
	ctx := c.Request().Context()
	it, err := h.Tools.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	var in permissionInput
	if err := bindJSONStrict(c, &in); err != nil {
		return err
	}
	var canUse *bool
	switch string(in.CanUse) {
	case "null":
	case "":
		return verr.New("can_use", "is required: true (allow), false (deny) or null (the role decides)")
	default:
		var b bool
		if err := json.Unmarshal(in.CanUse, &b); err != nil {
			return verr.New("can_use", "must be true (allow), false (deny) or null (the role decides)")
		}
		canUse = &b
	}
	if err := h.Tools.SetPermission(ctx, ActorOf(c), it.ID, strings.TrimSpace(in.Username), canUse); err != nil {
		return err
	}
	return h.writePermissions(c, it.ID)
}

func (h ToolPageHandler) writePermissions(c echo.Context, id string) error {
	perms, err := h.Tools.Permissions(c.Request().Context(), id)
	if err != nil {
		return err
	}
	if perms == nil {
		perms = []tools.Permission{}
	}
	return c.JSON(http.StatusOK, map[string]any{"permissions": perms})
}
