package web

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/handlers"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/gateway"
	"github.com/toolwarden/toolwarden/web/httperr"
)

// apiError is docs/api.md's error shape: {"error":{"code","message","details"}}.
type apiError struct {
	Error apiErrorBody `json:"error"`
}

type apiErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Details any    `json:"details"` // null when there is nothing structured; always sent (DESIGN §1)
}

// classify maps an error to a status, a stable code, a message for people, and details
// (package httperr, which the handlers' page messages use too).
func classify(err error) (int, string, string, any) {
	r := httperr.Classify(err)
	return r.Status, r.Code, r.Message, r.Details
}

// audited is an error whose refusal its service already wrote to the audit log.
type audited interface{ Audited() bool }

// recordDenial writes a refused request to the audit log (result denied): every 403,
// and a 401 of a request that brought credentials (an unknown, revoked or expired
// token; another scheme's header is a proxy's, not a credential of ours). Refusals a
// service already recorded are not written twice.
func (s *Server) recordDenial(c echo.Context, err error, status int, code, msg string) {
	req := c.Request()
	if status != http.StatusForbidden {
		if _, token := bearer(req.Header.Get(echo.HeaderAuthorization)); status != http.StatusUnauthorized || !token {
			return
		}
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
	http.StatusGone:                "No longer here",
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
	if f, ok := fault.As(err); ok && f.RetryAfter > 0 {
		c.Response().Header().Set("Retry-After", handlers.RetryAfter(f.RetryAfter))
	}
	req := c.Request()
	if req.Method == http.MethodPost && (req.URL.Path == MCPPath || req.URL.Path == MessagesPath) && rpcRefusal(status) {
		_ = c.Blob(status, echo.MIMEApplicationJSON, gateway.Refusal(status, msg))
		return
	}
	if handlers.IsAPI(c) || req.URL.Path == "/ws" || req.URL.Path == "/metrics" || BearerOnly(req.URL.Path) || strings.Contains(req.Header.Get("Accept"), "application/json") {
		if status == http.StatusUnauthorized {
			c.Response().Header().Set("WWW-Authenticate", `Bearer realm="toolwarden"`)
		}
		_ = c.JSON(status, apiError{Error: apiErrorBody{Code: code, Message: msg, Details: details}})
		return
	}
	if status == http.StatusUnauthorized {
		// htmx follows a redirect itself and would swap the sign-in page into the
		// fragment's target: it is told to send the whole page there instead, back to
		// the page it shows.
		if req.Header.Get("HX-Request") == "true" {
			c.Response().Header().Set("HX-Redirect", "/login?next="+url.QueryEscape(s.currentPage(req)))
			_ = c.NoContent(http.StatusUnauthorized)
			return
		}
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
	if rerr := s.shell.RenderError(c, status, title, msg); rerr != nil {
		s.log.Error("render error page", "err", rerr)
	}
}

// rpcRefusal: a refusal of an MCP client's POST with this status is a JSON-RPC error
// (gateway.Refusal). 401 and 403 say the credentials are wrong for every call, and a
// 404 would tell the client its session is gone: those keep their own answer.
func rpcRefusal(status int) bool {
	return status >= 400 && status < 500 && status != http.StatusUnauthorized && status != http.StatusForbidden &&
		status != http.StatusNotFound
}

// currentPage is the path (and query) of the page an htmx request came from
// (HX-Current-URL), to return to after signing in: "/" when it is missing or of another
// origin, so sign-in never sends anyone off this site.
func (s *Server) currentPage(req *http.Request) string {
	u, err := url.Parse(req.Header.Get("HX-Current-URL"))
	if err != nil || u.Scheme+"://"+u.Host != handlers.Origin(req, s.deps.TrustedProxies) || !strings.HasPrefix(u.Path, "/") || strings.HasPrefix(u.Path, "//") {
		return "/"
	}
	return u.RequestURI()
}
