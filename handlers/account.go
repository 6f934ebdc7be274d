package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/views"
)

// AccountHandler serves what a signed-in person changes about their own account.
type AccountHandler struct {
	*Shell
	Auth *auth.Service
}

// PasswordForm shows the form that changes one's own password.
func (h AccountHandler) PasswordForm(c echo.Context) error {
	return render(c, http.StatusOK, views.AccountPassword(views.AccountPasswordPage{Layout: h.layout(c, "Change your password"),
		Done: c.QueryParam("changed") != ""}))
}

// ChangePassword changes one's own password from the form; other sessions end.
func (h AccountHandler) ChangePassword(c echo.Context) error {
	err := h.Auth.ChangePassword(c.Request().Context(), ActorOf(c), PrincipalOf(c), c.FormValue("current_password"), c.FormValue("new_password"))
	if fe, ok := formErrors(err); ok {
		return render(c, http.StatusUnprocessableEntity, views.AccountPassword(views.AccountPasswordPage{
			Layout: h.layout(c, "Change your password"), Errors: fe}))
	}
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/account/password?changed=1")
}

// passwordChange is the body of POST /api/v1/me/password.
type passwordChange struct {
	CurrentPassword string `json:"current_password"`
	NewPassword     string `json:"new_password"`
}

// APIChangePassword changes the caller's own password (a session only: an API token
// gets 403); the caller's other sessions end.
func (h AccountHandler) APIChangePassword(c echo.Context) error {
	var in passwordChange
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	if err := h.Auth.ChangePassword(c.Request().Context(), ActorOf(c), PrincipalOf(c), in.CurrentPassword, in.NewPassword); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"changed": true})
}
