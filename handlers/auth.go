package handlers

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/views"
)

// SessionHandler serves sign-in and sign-out.
type SessionHandler struct {
	*Shell
	Auth *auth.Service
}

// LoginForm shows the sign-in page (or goes home when already signed in).
func (h SessionHandler) LoginForm(c echo.Context) error {
	next := safeNext(c.QueryParam("next"))
	if PrincipalOf(c) != nil {
		return c.Redirect(http.StatusSeeOther, next)
	}
	p := views.LoginPage{Next: next}
	if c.QueryParam("signed_out") != "" {
		p.Notice = "You are signed out."
	}
	return render(c, http.StatusOK, views.Login(p))
}

// Login checks the form fields username and password and starts a session.
func (h SessionHandler) Login(c echo.Context) error {
	username, password := c.FormValue("username"), c.FormValue("password")
	next := safeNext(c.FormValue("next"))
	req := auth.LoginRequest{Username: username, Password: password, IP: c.RealIP(),
		UserAgent: c.Request().UserAgent(), RequestID: RequestID(c)}
	if old, err := c.Cookie(SessionCookieName(c, h.SecureCookies)); err == nil {
		req.OldSession = old.Value
	}
	sess, err := h.Auth.Login(c.Request().Context(), req)
	throttled, isThrottled := auth.ThrottleOf(err)
	switch {
	case isThrottled:
		return render(c, http.StatusTooManyRequests, views.Login(views.LoginPage{Username: username, Next: next,
			Error: throttledSentence(c, throttled, "Too many failed sign-ins.", "Too many sign-ins at once.")}))
	case errors.Is(err, auth.ErrInvalidCredentials):
		return render(c, http.StatusUnauthorized, views.Login(views.LoginPage{Username: username, Next: next,
			Error: "Wrong username or password."}))
	case err != nil:
		return err
	}
	setSessionCookie(c, sess, h.SecureCookies)
	return c.Redirect(http.StatusSeeOther, next)
}

// Logout ends the session.
func (h SessionHandler) Logout(c echo.Context) error {
	if err := h.Auth.Logout(c.Request().Context(), PrincipalOf(c), ActorOf(c)); err != nil && !errors.Is(err, auth.ErrUnauthenticated) {
		return err
	}
	c.SetCookie(&http.Cookie{Name: SessionCookieName(c, h.SecureCookies), Value: "", Path: "/", HttpOnly: true, Secure: secureCookie(c, h.SecureCookies),
		SameSite: http.SameSiteLaxMode, MaxAge: -1})
	return c.Redirect(http.StatusSeeOther, "/login?signed_out=1")
}

// safeNext keeps post-login redirects on this site: a path only, with none of the
// characters browsers strip or reinterpret (tabs, newlines, backslashes) that would let
// "/\t/evil.example" become "//evil.example".
func safeNext(next string) string {
	if next == "" || len(next) > 2048 || next[0] != '/' || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/login") {
		return "/"
	}
	for _, r := range next {
		if r < 0x21 || r == 0x7f || r == '\\' {
			return "/"
		}
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil {
		return "/"
	}
	return next
}

// throttledSentence says on a form why an attempt was refused (failed: too many failures;
// busy: admission) and when to try again, and sets Retry-After.
func throttledSentence(c echo.Context, th auth.Throttle, failed, busy string) string {
	c.Response().Header().Set("Retry-After", RetryAfter(th.RetryAfter))
	why := failed
	if th.Busy {
		why = busy
	}
	return why + " Try again in " + th.RetryAfter.Round(time.Second).String() + "."
}

// RetryAfter formats a wait as whole seconds, rounded up, for the Retry-After header.
func RetryAfter(d time.Duration) string {
	return strconv.Itoa(max(int((d+time.Second-1)/time.Second), 1))
}
