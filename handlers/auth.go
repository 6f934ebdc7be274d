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
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/views"
	"github.com/toolwarden/toolwarden/web/httperr"
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
	if dev, err := c.Cookie(deviceCookieName(c, h.SecureCookies)); err == nil {
		req.Device = dev.Value
	}
	sess, err := h.Auth.Login(c.Request().Context(), req)
	throttled, isThrottled := auth.ThrottleOf(err)
	switch {
	case isThrottled:
		return render(c, http.StatusTooManyRequests, views.Login(views.LoginPage{Username: username, Next: next,
			Error: throttledSentence(c, err, throttled, "Too many failed sign-ins.", "Too many sign-ins at once.")}))
	case errors.Is(err, auth.ErrInvalidCredentials):
		return render(c, http.StatusUnauthorized, views.Login(views.LoginPage{Username: username, Next: next,
			Error: "Wrong username or password."}))
	case err != nil:
		return err
	}
	setSessionCookie(c, sess, h.SecureCookies)
	setDeviceCookie(c, sess, h.SecureCookies)
	return c.Redirect(http.StatusSeeOther, next)
}

// DeviceCookie names the device cookie (auth's devices.go): proof that this browser
// signed in to the account before, which lets it sign in while guesses from many
// addresses have the account throttled. Signing out keeps it.
const DeviceCookie = "tw_device"

// deviceCookieName is DeviceCookie with the __Host- prefix whenever the cookie is
// Secure, as the session cookie's (SessionCookieName).
func deviceCookieName(c echo.Context, always bool) string {
	if secureCookie(c, always) {
		return "__Host-" + DeviceCookie
	}
	return DeviceCookie
}

// setDeviceCookie gives the browser the sign-in's device cookie, renewed for
// auth.DeviceTTL, with the session cookie's flags.
func setDeviceCookie(c echo.Context, sess auth.Session, secure bool) {
	if sess.Device == "" {
		return
	}
	c.SetCookie(&http.Cookie{Name: deviceCookieName(c, secure), Value: sess.Device, Path: "/", HttpOnly: true,
		Secure: secureCookie(c, secure), SameSite: http.SameSiteLaxMode, Expires: time.Now().Add(auth.DeviceTTL),
		MaxAge: int(auth.DeviceTTL / time.Second)})
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

// throttledSentence says on a form why an attempt was refused (err, whose throttle is
// th; failed: too many failures; busy: admission) and when to try again, and sets
// Retry-After.
func throttledSentence(c echo.Context, err error, th auth.Throttle, failed, busy string) string {
	c.Response().Header().Set("Retry-After", RetryAfter(th.RetryAfter))
	if f, ok := fault.As(err); ok && th.Scope == auth.ScopeAccount {
		// Its own words: only browsers that signed in before get through, and until when.
		return httperr.Sentence(f.Message)
	}
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
