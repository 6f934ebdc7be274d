package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/handlers"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/planner"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/toolstate"
	"github.com/toolwarden/toolwarden/services/verr"
)

// apiError is DESIGN §1's error shape: {"error":{"code","message","details"}}.
type apiError struct {
	Error apiErrorBody `json:"error"`
}

type apiErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Details any    `json:"details,omitempty"`
}

// classify maps an error to a status, a stable code, a message for people, and details.
func classify(err error) (int, string, string, any) {
	var ve *verr.Error
	var ce *auth.ConflictError
	var te *auth.ThrottledError
	var he *echo.HTTPError
	var fe *handlers.ForbiddenError
	var ie *toolstate.IllegalError
	var tce *toolstate.ConflictError
	var tse *tools.StaleError
	var re *router.Error
	var nu *planner.NotUnderstood
	var xc *executions.ConflictError
	var xp *executions.PhraseError
	var xf *executions.ForbiddenError
	var xs *executions.StaleError
	var xl *executions.PlannerError
	switch {
	case errors.As(err, &re):
		return re.Status(), re.Code, re.Message, re.Details
	case errors.As(err, &nu):
		return http.StatusUnprocessableEntity, "not_understood", nu.Message, map[string]any{"fragment": nu.Fragment, "offset": nu.Offset}
	case errors.As(err, &xl):
		return http.StatusBadGateway, "planner_unavailable", xl.Error(), nil
	case errors.As(err, &xc):
		return http.StatusConflict, "conflict", xc.Error(), map[string]any{"status": xc.Current}
	case errors.As(err, &xp):
		return http.StatusUnprocessableEntity, "wrong_phrase", xp.Error(), nil
	case errors.As(err, &xf):
		return http.StatusForbidden, "forbidden", xf.Message, nil
	case errors.As(err, &xs):
		return http.StatusConflict, "stale_plan", xs.Message, nil
	case errors.Is(err, executions.ErrNotFound):
		return http.StatusNotFound, "not_found", "Not found.", nil
	case errors.As(err, &ve):
		return http.StatusBadRequest, "invalid_input", ve.Error(), ve.Fields
	case errors.Is(err, auth.ErrNotFound), errors.Is(err, registry.ErrNotFound), errors.Is(err, tools.ErrNotFound):
		return http.StatusNotFound, "not_found", "Not found.", nil
	case errors.Is(err, mcpclient.ErrNotConnected):
		return http.StatusConflict, "not_connected", err.Error(), nil
	case errors.Is(err, auth.ErrUnauthenticated):
		return http.StatusUnauthorized, "unauthenticated", "Sign in, or send an API token as 'Authorization: Bearer <token>'.", nil
	case errors.As(err, &fe):
		return http.StatusForbidden, "forbidden", fe.Message, nil
	case errors.Is(err, registry.ErrCommandChange):
		return http.StatusForbidden, "forbidden", strings.TrimPrefix(registry.ErrCommandChange.Error(), "registry: "), nil
	case errors.Is(err, registry.ErrTrustChange), errors.Is(err, registry.ErrTrustedTargetChange):
		return http.StatusForbidden, "forbidden", strings.TrimPrefix(err.Error(), "registry: "), nil
	case errors.Is(err, handlers.ErrForbidden):
		return http.StatusForbidden, "forbidden", "Your role does not allow this.", nil
	case errors.Is(err, auth.ErrTokenMintsToken):
		return http.StatusForbidden, "forbidden", err.Error(), nil
	case errors.As(err, &ce):
		return http.StatusConflict, "conflict", ce.Message, nil
	case errors.Is(err, toolstate.ErrOverrideRequired):
		return http.StatusUnprocessableEntity, "override_required", err.Error(), nil
	case errors.As(err, &ie):
		return http.StatusConflict, "illegal_transition", err.Error(), map[string]string{"from": ie.From, "to": ie.To}
	case errors.As(err, &tce):
		return http.StatusConflict, "conflict", err.Error(), nil
	case errors.As(err, &tse):
		return http.StatusConflict, "stale_configuration", err.Error(), map[string]int{"current_version": tse.Current}
	case errors.As(err, &te):
		return http.StatusTooManyRequests, "rate_limited", te.Error(), map[string]any{"retry_after_seconds": int(te.RetryAfter.Seconds())}
	case errors.As(err, &he):
		msg := fmt.Sprint(he.Message)
		if he.Internal != nil && he.Code >= 500 {
			msg = http.StatusText(he.Code)
		}
		return he.Code, codeFor(he.Code), msg, nil
	}
	return http.StatusInternalServerError, "internal", "Something went wrong on our side; it has been logged.", nil
}

func codeFor(status int) string {
	switch status {
	case http.StatusNotFound:
		return "not_found"
	case http.StatusMethodNotAllowed:
		return "method_not_allowed"
	case http.StatusUnauthorized:
		return "unauthenticated"
	case http.StatusForbidden:
		return "forbidden"
	case http.StatusRequestEntityTooLarge:
		return "too_large"
	case http.StatusBadRequest:
		return "bad_request"
	case http.StatusTooManyRequests:
		return "rate_limited"
	}
	if status >= 500 {
		return "internal"
	}
	return strings.ReplaceAll(strings.ToLower(http.StatusText(status)), " ", "_")
}

// audited is an error whose refusal its service already wrote to the audit log.
type audited interface{ Audited() bool }

// recordDenial writes a refused request to the audit log (result denied): every 403,
// and a 401 of a request that brought credentials (an unknown, revoked or expired
// token). Refusals a service already recorded are not written twice.
func (s *Server) recordDenial(c echo.Context, err error, status int, code, msg string) {
	req := c.Request()
	if status != http.StatusForbidden && (status != http.StatusUnauthorized || req.Header.Get(echo.HeaderAuthorization) == "") {
		return
	}
	var a audited
	if errors.As(err, &a) && a.Audited() {
		return
	}
	if s.deps.Denials == nil {
		return
	}
	d := audit.Denial{Actor: handlers.ActorOf(c), Method: req.Method, Route: c.Path(), Path: req.URL.Path, Status: status,
		Code: code, Reason: msg}
	if rerr := s.deps.Denials.Record(context.WithoutCancel(req.Context()), d); rerr != nil {
		s.log.Error("audit: a refused request was not recorded", "err", rerr, "path", req.URL.Path)
	}
}

var pageTitles = map[int]string{
	http.StatusBadRequest:          "That request was not valid",
	http.StatusForbidden:           "You do not have access",
	http.StatusNotFound:            "Page not found",
	http.StatusMethodNotAllowed:    "Not allowed",
	http.StatusConflict:            "That cannot be done right now",
	http.StatusUnprocessableEntity: "That was not understood",
	http.StatusBadGateway:          "An upstream service failed",
	http.StatusTooManyRequests:     "Slow down",
}

// handleError is the one error handler: JSON for the API, an error page (or a
// redirect to sign in) for pages.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	status, code, msg, details := classify(err)
	s.recordDenial(c, err, status, code, msg)
	if status >= 500 {
		s.log.Error("request failed", "err", err, "method", c.Request().Method, "path", c.Request().URL.Path,
			"request_id", handlers.RequestID(c))
	}
	var te *auth.ThrottledError
	var re *router.Error
	switch {
	case errors.As(err, &te):
		c.Response().Header().Set("Retry-After", handlers.RetryAfter(te.RetryAfter))
	case errors.As(err, &re) && re.RetryAfter > 0:
		c.Response().Header().Set("Retry-After", handlers.RetryAfter(re.RetryAfter))
	}
	req := c.Request()
	if handlers.IsAPI(c) || req.URL.Path == "/ws" || strings.Contains(req.Header.Get("Accept"), "application/json") {
		if status == http.StatusUnauthorized {
			c.Response().Header().Set("WWW-Authenticate", `Bearer realm="toolwarden"`)
		}
		_ = c.JSON(status, apiError{Error: apiErrorBody{Code: code, Message: msg, Details: details}})
		return
	}
	if status == http.StatusUnauthorized {
		next := "/"
		if req.Method == http.MethodGet {
			next = req.URL.RequestURI()
		}
		_ = c.Redirect(http.StatusSeeOther, "/login?next="+url.QueryEscape(next))
		return
	}
	title := pageTitles[status]
	if title == "" {
		title = "Something went wrong"
	}
	if rerr := s.deps.RenderError(c, status, title, msg); rerr != nil {
		s.log.Error("render error page", "err", rerr)
	}
}
