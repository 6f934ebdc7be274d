package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/handlers"
	"github.com/toolwarden/toolwarden/services/gateway"
)

// MCPPath is Toolwarden's MCP endpoint (services/gateway): streamable HTTP, both
// protocol eras.
const MCPPath = "/mcp"

// SSEPath and MessagesPath are the legacy SSE transport's endpoints (services/gateway):
// GET SSEPath opens a session's stream, POST MessagesPath?sessionid=… posts to it.
const (
	SSEPath      = gateway.SSEPath
	MessagesPath = gateway.MessagesPath
)

// BearerOnly reports whether path accepts only an API token (Authorization: Bearer):
// a session cookie is no credential there, so a browser that is signed in cannot be
// made to call tools through it, and a refusal is a 401 with WWW-Authenticate, never
// a redirect to the sign-in page.
func BearerOnly(path string) bool { return path == MCPPath || path == SSEPath || path == MessagesPath }

// mcp serves the MCP endpoint. The route's permission has already found the token's
// user; the gateway checks the token again through the SDK's bearer middleware (an
// answer from the token cache) and takes the client's address as this server decided
// it (behind trusted proxies).
func (s *Server) mcp(c echo.Context) error {
	g := s.deps.Gateway
	if g == nil {
		return echo.NewHTTPError(http.StatusNotFound)
	}
	g.ServeHTTP(c.Response(), s.withClient(c))
	return nil
}

// sse serves the legacy SSE transport, as mcp serves /mcp. A message posted to a
// session with another token than the one that opened it comes back as an error: the
// error handler answers 403 and records the refusal.
func (s *Server) sse(c echo.Context) error {
	g := s.deps.Gateway
	if g == nil {
		return echo.NewHTTPError(http.StatusNotFound)
	}
	return g.ServeSSE(c.Response(), s.withClient(c)) // a refusal is answered and audited as any 403
}

// withClient is the request with what the gateway records of its client and the URL
// its links use (the origin the client reached, behind trusted proxies).
func (s *Server) withClient(c echo.Context) *http.Request {
	req := c.Request()
	return req.WithContext(gateway.WithClient(req.Context(), c.RealIP(), handlers.RequestID(c),
		handlers.Origin(req, s.deps.TrustedProxies)))
}
