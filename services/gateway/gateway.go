// Package gateway is Toolwarden as an MCP server (issue #19): one MCP endpoint in front
// of every enabled tool of every registered server. A caller is an API token's user;
// tools/list shows the enabled tools that user may call, by qualified name, with their
// pinned definitions; tools/call goes through router.Call like every other call
// (source gateway), so admission, validation, risk, rate limits and records are the
// router's.
//
// The HTTP side is go-sdk's streamable transport behind go-sdk's bearer-token check:
// a stateful handler (Mcp-Session-Id) for clients of protocol 2025-06-18 and
// 2025-11-25, and a stateless one for 2026-07-28, which the SDK accepts only there.
// One Gateway serves both from one URL, choosing by the request's
// Mcp-Protocol-Version header (which the SDK requires on every 2026-07-28 request); a
// version the SDK does not know is refused (refuseVersion).
// The legacy SSE transport (/sse and /messages/) is served over the same server
// (sse.go).
package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	mcpauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/writebound"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/secrets"
)

// DefaultWriteTimeout is Options.WriteTimeout's default.
const DefaultWriteTimeout = 30 * time.Second

// statelessVersion is the first protocol version go-sdk serves only statelessly.
const statelessVersion = "2026-07-28"

// knownVersions are the protocol versions go-sdk speaks, newest first. A request's
// Mcp-Protocol-Version is looked up here, not compared as a string: "9" or
// "2026-07-28x" sorts after statelessVersion and would be taken for a stateless one.
var knownVersions = mcp.SupportedProtocolVersions()

// Options tunes a Gateway; zero fields take the defaults shown.
type Options struct {
	Logger *slog.Logger
	// Version is Toolwarden's version, sent as the server's version.
	Version string
	// SessionTimeout closes a stateful session idle this long. Default 30 minutes.
	SessionTimeout time.Duration
	// Executions and Bus hold a call that needs approval until a person decides
	// (hold.go); without them such a call is refused with approval_required.
	Executions *executions.Service
	Bus        *events.Bus
	// Hold is how long a call waits for a decision before it answers that it is
	// still pending. Default 50 seconds: under the minute many clients allow a call.
	Hold time.Duration
	// Keys sign the requestState of a 2026-07-28 call waiting for approval (elicit.go);
	// without them such a client is held like any other.
	Keys *secrets.Keyring
	// MaxWaiting is how many of one user's calls may wait for approval at once; a
	// call past it is refused (hold.go). Default 20.
	MaxWaiting int
	// MaxAwaiting is how many toolwarden__await_execution waits one user may hold
	// open at once; one past it answers at once that the execution is still pending,
	// as a wait's end does (hold.go). Default twice MaxWaiting: a wait on each call
	// awaiting approval, and as many on calls approved and running.
	MaxAwaiting int
	// MaxSessions is how many stateful MCP sessions (streamable HTTP before
	// 2026-07-28, and SSE) one user may hold open at once; an initialize past it is
	// refused (sessions.go). Default 64.
	MaxSessions int
	// PageSize is how many tools a tools/list page holds. Default 500.
	PageSize int
	// ListChangedDelay gathers the changes of this long into one
	// notifications/tools/list_changed. Default 250 milliseconds.
	ListChangedDelay time.Duration
	// WriteTimeout bounds each write and flush of a response to an MCP client; a client
	// that stops reading then loses its stream instead of holding the session's lock
	// (and so every notification) for good. Default DefaultWriteTimeout.
	WriteTimeout time.Duration
	// Sessions are the upstream sessions whose resources and prompts are passed
	// through, and Journal where their reads and gets are audited (passthrough.go).
	Sessions *mcpclient.Manager
	Journal  db.TxBeginner
}

// Gateway serves MCP over HTTP. It is an http.Handler; Close ends its open streams.
type Gateway struct {
	router    *router.Router
	auth      *auth.Service
	exec      *executions.Service
	bus       *events.Bus
	opts      Options
	log       *slog.Logger
	server    *mcp.Server
	stateful  http.Handler
	stateless http.Handler
	bearer    func(http.Handler) http.Handler
	pass      passthrough
	sse       *sseSessions // the legacy SSE transport (sse.go)

	stop     context.Context
	stopOnce sync.Once
	cancel   context.CancelFunc
	unfollow func()
	open     streams      // the long-lived streams and POSTs, ended when their credential is (streams.go)
	held     held         // the open stateful sessions by user (sessions.go)
	calls    sessionCalls // the stateful sessions' requests under way (sessioncalls.go)
	awaits   awaits       // the open toolwarden__await_execution waits by user (hold.go)
	holding  holding      // the open holds by execution (hold.go)
	elicited elicited     // the approval links a session's client answered (elicit.go)
	owed     owed         // the list_changed owed to users whose streams recheck ended (streams.go)
	// send is the SDK's sending handler, below the gateway's sending middleware: it sends
	// a notification to one session (sendListChanged).
	send mcp.MethodHandler
}

// New returns the gateway over the router (every call) and the auth service (tokens).
func New(r *router.Router, a *auth.Service, opts *Options) *Gateway {
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.SessionTimeout <= 0 {
		o.SessionTimeout = 30 * time.Minute
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.Hold <= 0 {
		o.Hold = 50 * time.Second
	}
	if o.MaxWaiting <= 0 {
		o.MaxWaiting = executions.DefaultMaxWaiting
	}
	if o.MaxAwaiting <= 0 {
		o.MaxAwaiting = 2 * o.MaxWaiting
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = 64
	}
	if o.PageSize <= 0 {
		o.PageSize = 500
	}
	if o.ListChangedDelay <= 0 {
		o.ListChangedDelay = 250 * time.Millisecond
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	g := &Gateway{router: r, auth: a, exec: o.Executions, bus: o.Bus, opts: o, log: o.Logger,
		pass: passthrough{sessions: o.Sessions, journal: o.Journal}}
	if g.bus == nil {
		g.exec = nil // a held call waits on the bus
	}
	g.stop, g.cancel = context.WithCancel(context.Background())
	// Tools are answered per caller by middleware (tools.go); the capability is
	// declared here, with list_changed (changed.go). Resources and prompts likewise
	// (passthrough.go).
	g.server = mcp.NewServer(&mcp.Implementation{Name: "toolwarden", Title: "Toolwarden", Version: o.Version},
		&mcp.ServerOptions{Logger: o.Logger, Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true},
			Resources: &mcp.ResourceCapabilities{}, Prompts: &mcp.PromptCapabilities{}}})
	g.server.AddReceivingMiddleware(g.limitSessions, g.endWithSession, g.tools, g.passthrough)
	g.server.AddSendingMiddleware(g.owedOnListen)
	g.follow()
	g.sse = g.newSSE() // after every middleware that reads the caller
	get := func(*http.Request) *mcp.Server { return g.server }
	// The SDK's localhost/DNS-rebinding protection stays on (the options' zero value).
	g.stateful = mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{Logger: o.Logger, SessionTimeout: o.SessionTimeout})
	g.stateless = mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{Logger: o.Logger, Stateless: true,
		PropagateRequestCancellation: true})
	// Toolwarden's API tokens expire or not; AuthenticateToken refuses an expired one
	// on every request, so the SDK need not see an expiry.
	g.bearer = mcpauth.RequireBearerToken(g.verify, &mcpauth.RequireBearerTokenOptions{AllowMissingExpiration: true})
	return g
}

// Close ends the stateful sessions' GET streams and the SSE sessions' streams, now and
// from now on: such a stream never ends by itself and would hold the HTTP server's
// drain until its deadline.
// POST and DELETE requests are left to finish (a tool call in flight is answered).
func (g *Gateway) Close() {
	g.stopOnce.Do(func() {
		g.cancel()
		g.unfollow()
	})
}

// ServeHTTP authenticates the bearer token and serves the request on the handler of
// its protocol era.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method == http.MethodGet {
		ctx, cancel := context.WithCancel(req.Context())
		defer cancel()
		defer context.AfterFunc(g.stop, cancel)()
		req = req.WithContext(ctx)
	}
	version := req.Header.Get("Mcp-Protocol-Version")
	known := version == "" || slices.Contains(knownVersions, version)
	h := g.stateful
	if known && version >= statelessVersion {
		h = g.stateless
	}
	// The SDK's middleware writes the 401 itself; the challenge writer adds the
	// WWW-Authenticate header it leaves out without OAuth metadata, and the MCP
	// handler gets the real writer (streams need its Flush), its writes bounded.
	g.bearer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		out := w
		if !known {
			refuseVersion(w, r, version)
			return
		}
		if refuseBatch(w, r) {
			return
		}
		if r.Method == http.MethodGet || r.Method == http.MethodPost {
			// A POST is tracked too: its answer may stream for as long as the call blocks,
			// and must not reach a client whose credential ended meanwhile. Its context
			// ending cancels the call (the stateless handler propagates it; a stateful
			// session's unanswered calls are cancelled by the SDK fork's cancelUnanswered).
			// A stateful session's GET is its standalone stream, which may be owed a
			// list_changed once it is open (owed, streams.go).
			c, ok := callerOfInfo(mcpauth.TokenInfoFromContext(r.Context()))
			getStream := r.Method == http.MethodGet && h == g.stateful
			ctx, done := context.WithCancel(r.Context())
			if ok {
				ctx, done = g.trackStream(r.Context(), c.p, getStream)
			}
			defer done()
			r = r.WithContext(ctx)
			if ok && getStream {
				uid, sid := c.p.User.ID, r.Header.Get("Mcp-Session-Id")
				out = &openedStream{ResponseWriter: w, opened: func() { g.owedOnGet(uid, sid) }}
			}
		}
		if r.Method == http.MethodDelete && h == g.stateful {
			// The SDK's Close waits for the session's requests: they are ended first.
			if c, ok := callerOfInfo(mcpauth.TokenInfoFromContext(r.Context())); ok && r.Header.Get("Mcp-Session-Id") != "" {
				defer g.calls.end(r.Header.Get("Mcp-Session-Id"), c.p.User.ID)()
			}
		}
		// Each write and flush is bounded, so that a client that stops reading fails the
		// write (and the SDK drops its stream) instead of blocking it, with the
		// transport's lock held, for good.
		bw, finish := writebound.Within(out, g.opts.WriteTimeout)
		defer finish()
		h.ServeHTTP(bw, r)
	})).
		ServeHTTP(&challenge{ResponseWriter: w}, req)
}

// maxIDProbe is how much of a refused request's body is read for its id.
const maxIDProbe = 64 << 10

// refuseVersion answers a request whose Mcp-Protocol-Version is not one the SDK speaks
// as the specification says (2025-06-18 transports, "Protocol Version Header": 400;
// SEP-2575: a JSON-RPC error UnsupportedProtocolVersion whose data names the supported
// versions, as the SDK answers a 2026-07-28-style request it cannot serve), so the
// client can pick one. The error carries the request's id when its body is a call,
// null otherwise (JSON-RPC 2.0, as the SDK's encoder would leave it out).
func refuseVersion(w http.ResponseWriter, r *http.Request, version string) {
	var id any
	if r.Method == http.MethodPost && r.Body != nil {
		if b, err := io.ReadAll(io.LimitReader(r.Body, maxIDProbe)); err == nil {
			if msg, err := jsonrpc.DecodeMessage(b); err == nil {
				if call, ok := msg.(*jsonrpc.Request); ok && call.IsCall() {
					id = call.ID.Raw()
				}
			}
		}
	}
	data, _ := json.Marshal(mcp.UnsupportedProtocolVersionData{Supported: knownVersions, Requested: version})
	out, err := json.Marshal(struct {
		JSONRPC string         `json:"jsonrpc"`
		ID      any            `json:"id"`
		Error   *jsonrpc.Error `json:"error"`
	}{"2.0", id, &jsonrpc.Error{Code: mcp.CodeUnsupportedProtocolVersion, Message: fmt.Sprintf(
		"unsupported protocol version %q (Mcp-Protocol-Version); this server supports %s", version, strings.Join(knownVersions, ", ")),
		Data: data}})
	if err != nil {
		http.Error(w, "unsupported protocol version", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(out)
}

// challenge adds WWW-Authenticate to a 401.
type challenge struct{ http.ResponseWriter }

func (c *challenge) WriteHeader(code int) {
	if code == http.StatusUnauthorized && c.Header().Get("WWW-Authenticate") == "" {
		c.Header().Set("WWW-Authenticate", `Bearer realm="toolwarden"`)
	}
	c.ResponseWriter.WriteHeader(code)
}

// principalKey holds the caller in TokenInfo.Extra.
const principalKey = "toolwarden.principal"

// clientKey carries what the HTTP layer knows of the client (ClientOf).
type clientKey struct{}

type client struct{ ip, requestID, base, userAgent string }

// WithClient records the client's address (as the HTTP layer decided it, behind
// trusted proxies) and the request's id, for the audit rows of its calls, and the
// URL this server is reached at (scheme and host, no path), for the links it sends.
func WithClient(ctx context.Context, ip, requestID, base string) context.Context {
	return context.WithValue(ctx, clientKey{}, client{ip: ip, requestID: requestID, base: strings.TrimRight(base, "/")})
}

// caller is the authenticated user of a request and where the request came from.
type caller struct {
	p      *auth.Principal
	client client
}

// errTokenCheck answers a token that could not be checked (the database not answering).
var errTokenCheck = errors.New("the API token could not be checked now; try again shortly")

// verify is the SDK's TokenVerifier over Toolwarden's API tokens: a session cookie or
// anything else is not a credential here.
func (g *Gateway) verify(ctx context.Context, token string, req *http.Request) (*mcpauth.TokenInfo, error) {
	p, err := g.auth.AuthenticateToken(ctx, token)
	if errors.Is(err, auth.ErrUnauthenticated) {
		return nil, fmt.Errorf("%w: the API token is unknown, revoked or expired, or its user is disabled", mcpauth.ErrInvalidToken)
	}
	if err != nil {
		// The SDK answers this error's text (500): a database's names its user, database
		// and socket. The reason is the server's log's.
		level := slog.LevelError
		if errors.Is(ctx.Err(), context.Canceled) {
			level = slog.LevelDebug // the client hung up during the check
		}
		g.log.Log(ctx, level, "gateway: check an API token", "err", err)
		return nil, errTokenCheck
	}
	cl, ok := req.Context().Value(clientKey{}).(client)
	if !ok {
		cl.ip, _, _ = net.SplitHostPort(req.RemoteAddr)
		cl.base = "http://" + req.Host
	}
	cl.userAgent = req.UserAgent()
	return &mcpauth.TokenInfo{UserID: p.User.ID, Extra: map[string]any{principalKey: caller{p: p, client: cl}}}, nil
}

// callerOf is the caller of an MCP request (nil without a verified token).
func callerOf(req mcp.Request) *caller {
	ex := req.GetExtra()
	if ex == nil || ex.TokenInfo == nil {
		return nil
	}
	c, ok := ex.TokenInfo.Extra[principalKey].(caller)
	if !ok {
		return nil
	}
	return &c
}

// actor is the caller as the audit log names it.
func (c *caller) actor() audit.Actor {
	a := c.p.Actor(c.client.ip, c.client.requestID)
	a.UserAgent = c.client.userAgent
	return a
}
