package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/views"
)

// UsersHandler serves user management (pages and API), for administrators.
type UsersHandler struct {
	*Shell
	Auth *auth.Service
}

func (h UsersHandler) page(c echo.Context, status int, form views.NewUserForm, revealed *views.Secret) error {
	users, err := h.Auth.ListUsers(c.Request().Context())
	if err != nil {
		return err
	}
	p := views.UsersPage{Layout: h.layout(c, "Users"), Form: form, Revealed: revealed, SelfID: PrincipalOf(c).User.ID}
	for _, r := range auth.Roles {
		p.Roles = append(p.Roles, views.RoleOption{Value: string(r), Label: r.Label()})
	}
	for _, u := range users {
		p.Users = append(p.Users, views.UserRow{ID: u.ID, Username: u.Username, Name: u.Name(), Role: string(u.Role),
			RoleLabel: u.Role.Label(), Disabled: u.Disabled(), LastLogin: u.LastLoginAt, CreatedAt: u.CreatedAt})
	}
	if p.Form.Role == "" {
		p.Form.Role = string(auth.RoleToolUser)
	}
	return render(c, status, views.Users(p))
}

// List renders the users page.
func (h UsersHandler) List(c echo.Context) error {
	return h.page(c, http.StatusOK, views.NewUserForm{}, nil)
}

// Create adds a user from the form; a generated password is shown once.
func (h UsersHandler) Create(c echo.Context) error {
	in := auth.NewUser{Username: c.FormValue("username"), DisplayName: c.FormValue("display_name"),
		Role: auth.Role(c.FormValue("role")), Password: c.FormValue("password")}
	u, generated, err := h.Auth.CreateUser(c.Request().Context(), ActorOf(c), in)
	if fe, ok := formErrors(err); ok {
		return h.page(c, http.StatusUnprocessableEntity, views.NewUserForm{Username: in.Username, DisplayName: in.DisplayName,
			Role: string(in.Role), Errors: fe}, nil)
	}
	if err != nil {
		return err
	}
	if generated != "" {
		return h.page(c, http.StatusCreated, views.NewUserForm{}, &views.Secret{Title: "User " + u.Username + " created",
			Value: generated, Note: "This is their password. It is shown only now: copy it and pass it on safely."})
	}
	setFlash(c, "success", "User "+u.Username+" created.", h.SecureCookies)
	return c.Redirect(http.StatusSeeOther, "/users")
}

// SetRole changes a user's role from the form.
func (h UsersHandler) SetRole(c echo.Context) error {
	ctx := c.Request().Context()
	role := auth.Role(c.FormValue("role"))
	before, _ := h.Auth.GetUser(ctx, c.Param("id")) // only for the message: SetRole checks all
	u, err := h.Auth.SetRole(ctx, ActorOf(c), c.Param("id"), role)
	return h.afterAction(c, err, func() string {
		if before.ID == u.ID && before.Role == role {
			return u.Username + " already is " + u.Role.Label() + "; nothing changed."
		}
		return u.Username + " is now " + u.Role.Label() + "."
	})
}

// Disable disables a user.
func (h UsersHandler) Disable(c echo.Context) error {
	u, err := h.Auth.SetDisabled(c.Request().Context(), ActorOf(c), c.Param("id"), true)
	return h.afterAction(c, err, func() string { return u.Username + " is disabled and signed out." })
}

// Enable re-enables a user.
func (h UsersHandler) Enable(c echo.Context) error {
	u, err := h.Auth.SetDisabled(c.Request().Context(), ActorOf(c), c.Param("id"), false)
	return h.afterAction(c, err, func() string { return u.Username + " is enabled." })
}

// ResetPassword sets a new random password and shows it once.
func (h UsersHandler) ResetPassword(c echo.Context) error {
	ctx := c.Request().Context()
	if ActorOf(c).Kind == audit.ActorToken {
		return auth.ErrTokenGivesAccess // before the lookup: whoever it names, a token may not
	}
	u, err := h.Auth.GetUser(ctx, c.Param("id"))
	if err == nil {
		var pw string
		if pw, err = h.Auth.ResetPassword(ctx, ActorOf(c), u.ID, ""); err == nil {
			return h.page(c, http.StatusOK, views.NewUserForm{}, &views.Secret{Title: "New password for " + u.Username,
				Value: pw, Note: "Their sessions have ended. The password is shown only now: copy it and pass it on safely."})
		}
	}
	return h.afterAction(c, err, nil)
}

// afterAction redirects back to the list with a flash saying what happened.
func (h UsersHandler) afterAction(c echo.Context, err error, ok func() string) error {
	return h.redirectWithOutcome(c, err, ok, "/users")
}

// APIList returns every user.
func (h UsersHandler) APIList(c echo.Context) error {
	users, err := h.Auth.ListUsers(c.Request().Context())
	if err != nil {
		return err
	}
	if users == nil {
		users = []auth.User{}
	}
	return c.JSON(http.StatusOK, map[string]any{"users": users})
}

// APIGet returns one user.
func (h UsersHandler) APIGet(c echo.Context) error {
	u, err := h.Auth.GetUser(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, u)
}

// APICreate adds a user; a generated password is returned once as "password".
func (h UsersHandler) APICreate(c echo.Context) error {
	var in auth.NewUser
	if err := bindJSONCreate(c, &in); err != nil {
		return err
	}
	u, generated, err := h.Auth.CreateUser(c.Request().Context(), ActorOf(c), in)
	if err != nil {
		return err
	}
	out := map[string]any{"user": u}
	if generated != "" {
		out["password"] = generated
	}
	return secretJSON(c, http.StatusCreated, out)
}

// APIUpdate changes a user's role and/or disabled flag, all or nothing:
// {"role": "...", "disabled": bool}.
func (h UsersHandler) APIUpdate(c echo.Context) error {
	var in auth.UserChange
	if _, err := bindJSONChange(c, &in); err != nil {
		return err
	}
	u, err := h.Auth.UpdateUser(c.Request().Context(), ActorOf(c), c.Param("id"), in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, u)
}

// APIResetPassword sets {"password": "..."} or, when absent, a random password that is
// returned once.
func (h UsersHandler) APIResetPassword(c echo.Context) error {
	var in struct {
		Password string `json:"password"`
	}
	if c.Request().ContentLength != 0 {
		// A misspelt key ({"new_password": ...}) must not set a random password instead.
		if err := bindJSONStrict(c, &in); err != nil {
			return err
		}
	}
	generated, err := h.Auth.ResetPassword(c.Request().Context(), ActorOf(c), c.Param("id"), in.Password)
	if err != nil {
		return err
	}
	out := map[string]any{"status": "ok"}
	if generated != "" {
		out["password"] = generated
	}
	return secretJSON(c, http.StatusOK, out)
}
