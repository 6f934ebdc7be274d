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

// ChangePassword changes one's own password from the form; other sessions end, and
// this one goes on under a new cookie.
func (h AccountHandler) ChangePassword(c echo.Context) error {
	sess, err := h.Auth.ChangePassword(c.Request().Context(), ActorOf(c), PrincipalOf(c), c.FormValue("current_password"), c.FormValue("new_password"))
	if throttled, ok := auth.ThrottleOf(err); ok {
		// On the form, as sign-in says it: the person keeps the page they were on.
		return render(c, http.StatusTooManyRequests, views.AccountPassword(views.AccountPasswordPage{
			Layout: h.layout(c, "Change your password"),
			Errors: views.FormErrors{"current_password": throttledSentence(c, err, throttled, "Too many wrong passwords.", "Too many sign-ins or password changes at once.")}}))
	}
	if fe, ok := formErrors(err); ok {
		return render(c, http.StatusUnprocessableEntity, views.AccountPassword(views.AccountPasswordPage{
			Layout: h.layout(c, "Change your password"), Errors: fe}))
	}
	if err != nil {
		return err
	}
	setSessionCookie(c, sess, h.SecureCookies)
	setDeviceCookie(c, sess, h.SecureCookies)
	return c.Redirect(http.StatusSeeOther, "/account/password?changed=1")
}

// setSessionCookie gives the browser the session's cookie, with the flags of sign-in.
func setSessionCookie(c echo.Context, sess auth.Session, secure bool) {
	c.SetCookie(&http.Cookie{Name: SessionCookieName(c, secure), Value: sess.Token, Path: "/", HttpOnly: true,
		Secure: secureCookie(c, secure), SameSite: http.SameSiteLaxMode, Expires: sess.ExpiresAt})
}

// passwordChange is the body of POST /api/v1/me/password.
type passwordChange struct {
	CurrentPassword string `json:"current_password"`
	NewPassword     string `json:"new_password"`
}

// APIChangePassword changes the caller's own password (a session only: an API token
// gets 403, and so never a cookie); the caller's other sessions end, and this one goes
// on under a new cookie.
func (h AccountHandler) APIChangePassword(c echo.Context) error {
	var in passwordChange
	if err := bindJSONStrict(c, &in); err != nil {
		return err
	}
	sess, err := h.Auth.ChangePassword(c.Request().Context(), ActorOf(c), PrincipalOf(c), in.CurrentPassword, in.NewPassword)
	if err != nil {
		return err
	}
	setSessionCookie(c, sess, h.SecureCookies)
	setDeviceCookie(c, sess, h.SecureCookies)
	return c.JSON(http.StatusOK, map[string]any{"changed": true})
}
