package web

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/handlers"
	"github.com/toolwarden/toolwarden/internal/httpmethod"
	"github.com/toolwarden/toolwarden/internal/replicahop"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/decide"
	"github.com/toolwarden/toolwarden/services/fault"
)

// observe handles the request's error (so the status is final), then logs one
// structured access line and records metrics.
func (s *Server) observe(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		defer func() {
			// A handler that broke its answer off after sending part of it
			// (http.ErrAbortHandler) is still counted and logged, as aborted.
			if r := recover(); r != nil {
				if r == http.ErrAbortHandler {
					s.record(c, time.Since(start), true)
				}
				panic(r)
			}
		}()
		if err := next(c); err != nil {
			c.Error(err)
		}
		s.record(c, time.Since(start), false)
		return nil
	}
}

// record logs the request's access line and records its metrics.
func (s *Server) record(c echo.Context, took time.Duration, aborted bool) {
	req, res := c.Request(), c.Response()
	route := c.Path()
	if route == "" {
		route = "unmatched"
	}
	// Any token is a method to Go's server, before authentication: only the standard
	// ones get their own series, or anyone could add series without end.
	method := httpmethod.Label(req.Method)
	s.metrics.requests.WithLabelValues(method, route, strconv.Itoa(res.Status)).Inc()
	s.metrics.duration.WithLabelValues(method, route).Observe(took.Seconds())
	if strings.HasPrefix(req.URL.Path, "/static/") || req.URL.Path == "/healthz" || req.URL.Path == "/metrics" {
		return // keep the log about what people and agents do
	}
	attrs := []any{"method", req.Method, "path", req.URL.Path, "status", res.Status,
		"took_ms", float64(took.Microseconds()) / 1000, "bytes", res.Size, "ip", c.RealIP(),
		"request_id", handlers.RequestID(c)}
	if aborted {
		attrs = append(attrs, "aborted", true) // its answer was cut off after its status
	}
	if up, _ := c.Get(upstreamRequestIDKey).(string); up != "" {
		attrs = append(attrs, "upstream_request_id", up) // to match a proxy's log line to ours
	}
	if p := handlers.PrincipalOf(c); p != nil {
		attrs = append(attrs, "user", p.User.Username)
	}
	s.log.Info("http", attrs...)
}

// upstreamRequestIDKey holds the id-shaped X-Request-ID a request came with, for the
// access log only.
const upstreamRequestIDKey = "tw.upstream_request_id"

// dropForeignRequestID takes X-Request-ID off every request, so the request-id
// middleware generates the id that is answered and recorded. The audit page links
// "every entry of this request" by that id: a caller naming it could tie its entries to
// other people's, and a proxy may pass a client's header through unchanged. An
// id-shaped one (replicahop.ValidRequestID) is kept for the access log. A request
// another replica forwards is no exception: its id is the one its signed hop carries
// (replicaHop), as the header beside the hop could be rewritten on the way.
func dropForeignRequestID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Request().Header
		if id := h.Get(echo.HeaderXRequestID); id != "" {
			h.Del(echo.HeaderXRequestID)
			if replicahop.ValidRequestID(id) {
				c.Set(upstreamRequestIDKey, id)
			}
		}
		return next(c)
	}
}

// securityHeaderNames are the headers securityHeaders sets.
var securityHeaderNames = []string{"Content-Security-Policy", "X-Content-Type-Options", "X-Frame-Options", "Referrer-Policy",
	"Cross-Origin-Opener-Policy", "Permissions-Policy", "Strict-Transport-Security"}

// securityHeaders sets the CSP with a fresh nonce per request (templ renders it on our
// script tags) and the other hardening headers, on every answer, refusals included.
func (s *Server) securityHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		nonce := base64.StdEncoding.EncodeToString(b)
		req := c.Request()
		c.SetRequest(req.WithContext(templ.WithNonce(req.Context(), nonce)))
		h := c.Response().Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self' 'nonce-"+nonce+"'; style-src 'self'; "+
			"img-src 'self' data:; media-src data:; font-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; "+
			"base-uri 'none'; object-src 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=(), payment=()")
		return next(c)
	}
}

// transportSecurity gives a request that came over TLS — directly, through a trusted
// proxy that says so (X-Forwarded-Proto), or to the replica that forwarded it (a
// replica hop's origin) — HSTS and Secure cookies. It runs after replicaHop, which
// tells it the forwarded client's origin.
func (s *Server) transportSecurity(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if handlers.OverTLS(c.Request(), s.deps.TrustedProxies) {
			c.Response().Header().Set("Strict-Transport-Security", "max-age=63072000; includeSubDomains")
			handlers.MarkSecure(c)
		}
		return next(c)
	}
}

// errCrossOrigin is returned for a cross-site state-changing request.
var errCrossOrigin = echo.NewHTTPError(http.StatusForbidden, "cross-origin request refused: state-changing requests must come from this site's own pages")

// crossOriginProtection refuses unsafe-method requests that a browser marks as coming
// from another site (Go's http.CrossOriginProtection: Sec-Fetch-Site, then Origin).
// Requests without those headers (curl, agents with a bearer token) pass.
func crossOriginProtection() echo.MiddlewareFunc {
	cop := http.NewCrossOriginProtection()
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if err := cop.Check(c.Request()); err != nil {
				return errCrossOrigin
			}
			return next(c)
		}
	}
}

// bearer is the token of an Authorization header of the Bearer scheme, whose name is
// read without regard to case (RFC 9110).
func bearer(authz string) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(authz), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(tok), true
}

// TokenExpiresHeader is set on every answer to an API token whose owner is being warned
// of its end (auth.WarnFrom): when it ends (RFC 3339).
const TokenExpiresHeader = "Toolwarden-Token-Expires"

// authenticate attaches the caller (bearer token or session cookie; only a bearer
// token on BearerOnly paths) when there is one.
// Routes decide whether one is needed (requirePermission).
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if strings.HasPrefix(c.Request().URL.Path, "/static/") {
			return next(c)
		}
		ctx := c.Request().Context()
		// Another scheme (a Basic-auth proxy in front passes its own header on) is not
		// Toolwarden's: the caller is who their session cookie says, or nobody.
		if tok, ok := bearer(c.Request().Header.Get(echo.HeaderAuthorization)); ok {
			p, err := s.deps.Auth.AuthenticateToken(ctx, tok)
			if errors.Is(err, auth.ErrUnauthenticated) {
				return echo.NewHTTPError(http.StatusUnauthorized, "the API token is unknown, revoked or expired, or its user is disabled")
			}
			if err != nil {
				return err
			}
			handlers.SetPrincipal(c, p)
			c.Set(authenticatedAtKey, time.Now())
			// An agent learns that its token is about to end from every answer.
			if exp, from := p.TokenExpiresAt, p.TokenWarnFrom; exp != nil && from != nil && !time.Now().Before(*from) {
				c.Response().Header().Set(TokenExpiresHeader, exp.UTC().Format(time.RFC3339))
			}
			return next(c)
		}
		if BearerOnly(c.Request().URL.Path) {
			return next(c) // no session cookies here
		}
		if ck, err := c.Cookie(handlers.SessionCookieName(c, s.deps.SecureCookies)); err == nil && ck.Value != "" {
			p, err := s.deps.Auth.Authenticate(ctx, ck.Value)
			switch {
			case err == nil:
				handlers.SetPrincipal(c, p)
				c.Set(authenticatedAtKey, time.Now())
			case !errors.Is(err, auth.ErrUnauthenticated):
				return err
			}
		}
		return next(c)
	}
}

// authenticatedAtKey holds when the request's caller was authenticated (recheckSlowBody).
const authenticatedAtKey = "toolwarden.authenticated_at"

// slowBody is how long a request's body may take to arrive after its caller was
// authenticated before the caller is checked again.
const slowBody = 2 * time.Second

// recheckSlowBody reads a request's body before its handler and, when it came more than
// slowBody after the caller was authenticated (the headers), checks the caller again:
// a client that trickles its body (bodyDeadline allows a minute) must not act with a
// session that was signed out, a token that was revoked or a role that was taken away
// meanwhile. A request whose body came at once costs nothing more.
func (s *Server) recheckSlowBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		p := handlers.PrincipalOf(c)
		at, _ := c.Get(authenticatedAtKey).(time.Time)
		if p == nil || at.IsZero() || req.Body == nil || req.Body == http.NoBody || req.Method == http.MethodGet || req.Method == http.MethodHead {
			return next(c)
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			if mb := (*http.MaxBytesError)(nil); errors.As(err, &mb) {
				return echo.NewHTTPError(http.StatusRequestEntityTooLarge, "the request body is too large")
			}
			return err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		if time.Since(at) < slowBody {
			return next(c)
		}
		role, err := s.deps.Auth.CurrentRole(req.Context(), p)
		if errors.Is(err, auth.ErrNoLongerValid) {
			return echo.NewHTTPError(http.StatusUnauthorized, "your session or token ended while the request was being sent: nothing was done")
		}
		if err != nil {
			return err
		}
		if role != p.User.Role {
			return echo.NewHTTPError(http.StatusForbidden, "your role changed while the request was being sent: nothing was done; send it again")
		}
		return next(c)
	}
}

// requirePermission refuses callers whose role lacks perm.
func requirePermission(perm auth.Permission) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if perm == auth.PermPublic || perm == auth.PermReplica && hopFrom(c) != "" {
				return next(c)
			}
			p := handlers.PrincipalOf(c)
			if p == nil {
				return auth.ErrUnauthenticated
			}
			if auth.PersonOnly(perm) {
				// Decisions belong to people: an API token gets 403 whatever its role.
				if err := decide.Person(handlers.ActorOf(c), personVerb(perm)); err != nil {
					return err
				}
			}
			if !p.Can(perm) {
				if perm == auth.PermReplica {
					return handlers.ErrForbidden // replicas' own routes: nothing a person asks for
				}
				// Named, so the person knows what to ask an administrator for.
				return fault.Forbidden(fmt.Sprintf("Your role (%s) does not allow this: it needs the %s permission.", p.User.Role.Label(), perm))
			}
			return next(c)
		}
	}
}

// personVerb says what a person-only permission decides, for the refusal.
func personVerb(perm auth.Permission) string {
	if perm == auth.PermCollaborate {
		return "answer questions or revoke grants"
	}
	return "approve, reject or roll back executions"
}
