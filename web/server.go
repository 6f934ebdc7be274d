// Package web builds the HTTP server: middleware, the route table, the error handler,
// the websocket hub and the static files.
package web

import (
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/toolwarden/toolwarden/handlers"
	"github.com/toolwarden/toolwarden/internal/loglimit"
	"github.com/toolwarden/toolwarden/internal/replicahop"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/static"
)

// Server is the HTTP side of Toolwarden.
type Server struct {
	e       *echo.Echo
	deps    *handlers.Deps
	shell   *handlers.Shell
	log     *slog.Logger
	hub     *hub
	metrics *metrics
	table   []Route
	// hops checks the requests other replicas forward here (nil without a keyring).
	hops *replicahop.Verifier
	// hopLog bounds the warnings about refused hops: anyone may send the header.
	hopLog *loglimit.Budget
	// closing is closed when the server begins to stop: requests held open for other
	// replicas (a test run's watch) end then, not at the drain's end.
	closing   chan struct{}
	closeOnce sync.Once
}

// hopLogBurst warnings about refused replica hops may be logged at once, then one
// every hopLogEvery, each saying how many were left out before it.
const (
	hopLogBurst = 10
	hopLogEvery = 10 * time.Second
)

// New builds the server. bus delivers events to websocket clients.
func New(deps *handlers.Deps, bus *events.Bus) *Server {
	log := deps.Logger
	if log == nil {
		log = slog.Default()
	}
	if deps.RunHops == nil {
		deps.RunHops = &handlers.PersonLimits{}
	}
	s := &Server{e: echo.New(), deps: deps, shell: deps.Shell(), log: log, closing: make(chan struct{}), hopLog: loglimit.New(hopLogEvery, hopLogBurst)}
	if deps.Keys != nil {
		self := ""
		if deps.Replicas != nil {
			self = deps.Replicas.Self().ID
		}
		s.hops = replicahop.NewVerifier(deps.Keys, self)
		if deps.Replicas != nil {
			s.hops.Clock = deps.Replicas.Now
		}
	}
	s.hub = newHub(deps, bus, log)
	if deps.LiveClients == nil {
		deps.LiveClients = s.hub.count
	}
	s.metrics = newMetrics(func() float64 { return float64(s.hub.count()) }, func() float64 { return float64(s.hub.renders.Load()) },
		func() float64 { return float64(s.hub.rechecks.Load()) }, deps.Router, deps.Executions, log)
	e := s.e
	e.HideBanner, e.HidePort = true, true
	e.IPExtractor = clientIP(deps.TrustedProxies, log)
	e.HTTPErrorHandler = s.handleError

	// First: every write of every answer, the error handler's too, has a deadline.
	e.Use(writeDeadline(deps.DownloadStall))
	e.Use(dropForeignRequestID, middleware.RequestID())
	e.Use(s.observe)
	e.Use(middleware.RecoverWithConfig(middleware.RecoverConfig{DisablePrintStack: true,
		LogErrorFunc: func(c echo.Context, err error, stack []byte) error {
			s.log.Error("panic", "err", err, "request_id", handlers.RequestID(c), "stack", string(stack))
			return err
		}}))
	e.Use(s.securityHeaders) // first: a body refused for its size gets them too
	e.Use(middleware.BodyLimit("4M"), bodyDeadline(deps.BodyReadTimeout))
	// A forwarded request is checked before anything that goes by its client: it then
	// carries that client's address and origin (HSTS, Secure cookies).
	e.Use(s.replicaHop)
	e.Use(s.transportSecurity)
	e.Use(crossOriginProtection())
	e.Use(s.authenticate)

	staticFiles, _ := fs.Sub(static.FS, ".")
	e.GET(static.Prefix+"*", echo.WrapHandler(staticHandler(staticFiles)))

	s.table = s.routes()
	methods := map[string][]string{}
	for _, r := range s.table {
		methods[r.Path] = append(methods[r.Path], r.Method)
	}
	// Bad text is refused after the permission check: a refused request is recorded as
	// denied whatever it carries.
	for _, r := range s.table {
		e.Add(r.Method, r.Path, r.Handler, requirePermission(r.Perm), s.recheckSlowBody, refuseBadText)
		switch {
		case r.Method != http.MethodGet:
		case headAllowed(r.Path):
			e.Add(http.MethodHead, r.Path, r.Handler, requirePermission(r.Perm), refuseBadText)
		default:
			// Refused here rather than left unrouted, where echo would try a parameter
			// route beside it (HEAD /api/v1/audit/export reached /api/v1/audit/:id).
			e.Add(http.MethodHead, r.Path, refuseHead(strings.Join(methods[r.Path], ", ")))
		}
	}
	return s
}

// refuseHead answers a HEAD to a route without one: 405, naming the route's methods.
func refuseHead(allow string) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Response().Header().Set(echo.HeaderAllow, allow)
		return echo.ErrMethodNotAllowed
	}
}

// noHead are GET routes that do work or record something for each request: an export
// streams and records the whole log, and a check reads the whole chain and records it.
var noHead = map[string]bool{"/api/v1/audit/export": true, "/api/v1/audit/verify": true}

// headAllowed reports whether GET route path also answers HEAD (405 when not). A HEAD
// runs the whole handler and Go drops the body, so a websocket (/ws, a terminal's
// socket), a stream, the MCP transports (BearerOnly), the replicas' internal routes
// (a hop's nonce, a held watch) and noHead get none; ordinary pages and reads do.
func headAllowed(path string) bool {
	return !strings.HasSuffix(path, "/ws") && !BearerOnly(path) &&
		!strings.HasPrefix(path, "/internal/") && !noHead[path]
}

// clientIP is how a request's client address is found: the peer address, unless the
// peer is one of the trusted proxies, in which case X-Forwarded-For is read from the
// right, past the trusted proxies, to the first address that is not one. Nothing else
// is believed: X-Forwarded-For is set by whoever sends the request, and sign-in
// throttling per address must not be that easy to dodge (echo would trust private and
// loopback peers by default; that is turned off).
func clientIP(proxies []netip.Prefix, log *slog.Logger) echo.IPExtractor {
	if len(proxies) == 0 {
		direct := echo.ExtractIPDirect()
		var warned sync.Once
		return func(r *http.Request) string {
			ip := direct(r)
			// Behind a proxy nobody named, every client has the proxy's address: sign-in
			// throttling would slow them all together. Say so once.
			if r.Header.Get(echo.HeaderXForwardedFor) != "" {
				if a, err := netip.ParseAddr(ip); err == nil && (a.IsLoopback() || a.IsPrivate()) {
					warned.Do(func() {
						log.Warn("requests come through a proxy (they carry X-Forwarded-For from "+ip+"), but --trusted-proxy is not set: "+
							"every client then has the proxy's address, and sign-in throttling slows them all together; set --trusted-proxy to the proxy's address",
							"peer", ip)
					})
				}
			}
			return ip
		}
	}
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, p := range proxies {
		opts = append(opts, echo.TrustIPRange(&net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}))
	}
	return echo.ExtractIPFromXFFHeader(opts...)
}

// ServeHTTP makes the server an http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.e.ServeHTTP(w, r) }

// Shutdown closes the websocket connections, telling clients to reconnect later, and
// ends the MCP sessions' GET streams and the SSE sessions' streams (calls in flight
// finish).
func (s *Server) Shutdown() {
	s.closeOnce.Do(func() { close(s.closing) })
	s.hub.shutdown()
	if s.deps.Gateway != nil {
		s.deps.Gateway.Close()
	}
}

// staticHandler serves the embedded files. Versioned URLs (?v=hash, see static.URL)
// never change content, so browsers may keep them for a year.
func staticHandler(files fs.FS) http.Handler {
	fsrv := http.StripPrefix(strings.TrimSuffix(static.Prefix, "/"), http.FileServerFS(files))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r) // no directory listings
			return
		}
		if r.URL.Query().Get("v") != "" {
			w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		} else {
			w.Header().Set("Cache-Control", "no-cache")
		}
		fsrv.ServeHTTP(w, r)
	})
}
