package gateway

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"reflect"
	"sync"

	mcpauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/writebound"
	"github.com/toolwarden/toolwarden/services/fault"
)

// The legacy SSE transport (MCP 2024-11-05), for clients that predate streamable
// HTTP: GET SSEPath opens a session and its stream of server messages, whose first
// event names the session's endpoint, MessagesPath?sessionid=…; the client POSTs its
// messages there. go-sdk's SSEHandler serves both over the gateway's one server, behind
// the same bearer check as /mcp. What the SDK leaves to us:
//
//   - A POST to a session's endpoint carries a bearer token of its own, which the SDK
//     neither compares with the token that opened the session nor hands to the server
//     (SSE requests have no TokenInfo). The gateway binds each session to the token of
//     the GET that opened it: a POST with any other token is refused (403, recorded by
//     the HTTP layer as a denied request), and the caller of the session's requests is
//     the token's user as the latest accepted POST's check found them (its role now,
//     its address).
//   - The SDK announces the endpoint relative to the GET's URL; the GET is handed to
//     it as if made to MessagesPath, so the endpoint is MessagesPath?sessionid=….
//
// The SDK's localhost/DNS-rebinding protection is on (SSEOptions' zero value), for the
// GET and the POSTs alike.
const (
	SSEPath      = "/sse"
	MessagesPath = "/messages/"
)

// sseSessions is the gateway's side of the SSE sessions: which token opened each.
type sseSessions struct {
	handler *mcp.SSEHandler
	mu      sync.Mutex
	byID    map[string]*sseSession
}

// sseSession is one SSE session, bound to the API token that opened it.
type sseSession struct {
	tokenID string
	stream  context.Context // the GET's; its requests end with it (sessioncalls.go)

	mu   sync.Mutex
	id   string             // the SDK's session id, once announced
	info *mcpauth.TokenInfo // the latest verified request's; the caller of the session's requests
}

func (s *sseSession) current() (string, *mcpauth.TokenInfo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id, s.info
}

// sseSessionKey holds the *sseSession in the GET's context, which the SDK passes on to
// the contexts of the session's requests.
type sseSessionKey struct{}

// newSSE builds the SSE side over g.server. It adds a receiving middleware that gives
// an SSE session's requests their caller, so it must be added after every middleware
// that reads the caller (it then runs before them).
func (g *Gateway) newSSE() *sseSessions {
	s := &sseSessions{byID: map[string]*sseSession{}}
	s.handler = mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return g.server }, nil)
	g.server.AddReceivingMiddleware(g.sseCaller)
	return s
}

// ErrOtherToken refuses a message posted to an SSE session with a token other than the
// one that opened it.
var ErrOtherToken = fault.Forbidden("this SSE session was opened with another API token; post with the token that opened it")

// ServeSSE authenticates the bearer token and serves the legacy SSE transport: GET
// SSEPath opens a session, POST MessagesPath?sessionid=… posts a message to one. It
// answers every request itself but one: a message posted with another token than the
// session's is left unanswered and ErrOtherToken returned, for the caller to answer
// and record as a refusal.
func (g *Gateway) ServeSSE(w http.ResponseWriter, req *http.Request) error {
	var refused error
	g.bearer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
			g.openSSE(w, r)
		case http.MethodPost:
			refused = g.postSSE(w, r)
		default:
			w.Header().Set("Allow", "GET, POST")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		}
	})).ServeHTTP(&challenge{ResponseWriter: w}, req)
	return refused
}

// openSSE serves a session's stream until the client goes, the session closes or the
// gateway is closed.
func (g *Gateway) openSSE(w http.ResponseWriter, req *http.Request) {
	if g.stop.Err() != nil {
		http.Error(w, "Toolwarden is shutting down; connect again in a moment", http.StatusServiceUnavailable)
		return
	}
	info := mcpauth.TokenInfoFromContext(req.Context())
	c, ok := callerOfInfo(info)
	if !ok {
		http.Error(w, "no authenticated caller", http.StatusUnauthorized)
		return
	}
	// Counted from the stream's opening, not from its initialize: the SDK holds a
	// session for the stream at once, so streams that never initialize would otherwise
	// go past the limit.
	uid := c.p.User.ID
	if n, ok := g.admitStream(uid); !ok {
		http.Error(w, fmt.Sprintf("too many MCP sessions: %s has %d open, the most one person may; close sessions you no longer use",
			c.p.User.Username, n), http.StatusTooManyRequests)
		return
	}
	defer g.releaseStream(uid)
	sess := &sseSession{tokenID: c.p.TokenID, info: info}
	tracked, done := g.track(req)
	defer done()
	ctx, cancel := context.WithCancel(context.WithValue(tracked, sseSessionKey{}, sess))
	defer cancel()
	sess.stream = ctx
	defer context.AfterFunc(g.stop, cancel)()
	r := req.Clone(ctx)
	r.URL.Path, r.URL.RawPath = MessagesPath, ""

	bw, finish := writebound.Within(w, g.opts.WriteTimeout)
	defer finish()
	ew := &endpointWriter{ResponseWriter: bw, announced: func(id string) {
		sess.mu.Lock()
		sess.id = id
		sess.mu.Unlock()
		g.sse.mu.Lock()
		g.sse.byID[id] = sess
		g.sse.mu.Unlock()
	}}
	defer func() {
		if id, _ := sess.current(); id != "" {
			g.sse.mu.Lock()
			delete(g.sse.byID, id)
			g.sse.mu.Unlock()
			g.elicited.forgetSession(id)
		}
	}()
	g.sse.handler.ServeHTTP(ew, r)
}

// postSSE passes a message to its session if the request's token is the one that
// opened the session, and returns ErrOtherToken, having written nothing, if not.
func (g *Gateway) postSSE(w http.ResponseWriter, req *http.Request) error {
	id := req.URL.Query().Get("sessionid")
	g.sse.mu.Lock()
	sess := g.sse.byID[id]
	g.sse.mu.Unlock()
	if sess == nil {
		// Unknown, ended, or not yet announced: the SDK is never asked.
		http.Error(w, "session not found: open one with GET "+SSEPath, http.StatusNotFound)
		return nil
	}
	info := mcpauth.TokenInfoFromContext(req.Context())
	c, ok := callerOfInfo(info)
	if !ok || c.p.TokenID == "" || c.p.TokenID != sess.tokenID {
		return ErrOtherToken
	}
	sess.mu.Lock()
	sess.info = info
	sess.mu.Unlock()
	g.sse.handler.ServeHTTP(w, req)
	return nil
}

// callerOfInfo is the caller verify put in a TokenInfo.
func callerOfInfo(info *mcpauth.TokenInfo) (caller, bool) {
	if info == nil {
		return caller{}, false
	}
	c, ok := info.Extra[principalKey].(caller)
	return c, ok && c.p != nil
}

// sseCaller gives a request of an SSE session what the streamable transport gives each
// request: the token's TokenInfo (so callerOf finds the caller), the tracking a POST
// has (streams.go: a role that loses what a call needs ends it, as it ends a streamable
// POST; the SSE POST itself was answered at once), and, for a tool call that names no
// conversation, the session's id as its conversation, as a stateful /mcp session's
// calls have theirs.
func (g *Gateway) sseCaller(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		sess, ok := ctx.Value(sseSessionKey{}).(*sseSession)
		if !ok || req.GetExtra() != nil {
			return next(ctx, method, req)
		}
		id, info := sess.current()
		setExtra(req, &mcp.RequestExtra{TokenInfo: info})
		if cr, ok := req.(*mcp.CallToolRequest); ok && cr.Params != nil && id != "" {
			if _, given := cr.Params.Meta["conversation_id"].(string); !given {
				if cr.Params.Meta == nil {
					cr.Params.Meta = mcp.Meta{}
				}
				cr.Params.Meta["conversation_id"] = id
			}
		}
		c, ok := callerOfInfo(info)
		if !ok {
			return next(ctx, method, req)
		}
		tracked, done := g.trackFor(ctx, c.p)
		defer done()
		res, err := next(tracked, method, req)
		if tracked.Err() != nil && ctx.Err() == nil {
			// Its answer would still reach the client on the stream, open while its
			// token is revoked or its role rechecked (the stream ends then too).
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf(
				"this request ended: the API token of %s no longer allows it (revoked, expired, or the role changed)", c.p.User.Username)}
		}
		return res, err
	}
}

// extraType is the type of ServerRequest's Extra field.
var extraType = reflect.TypeFor[*mcp.RequestExtra]()

// setExtra sets the Extra field of a server request (an *mcp.ServerRequest[P] of any
// P: the SDK offers no setter, and its SSE transport leaves the field nil).
func setExtra(req mcp.Request, ex *mcp.RequestExtra) {
	v := reflect.ValueOf(req)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return
	}
	if f := v.Elem().FieldByName("Extra"); f.IsValid() && f.CanSet() && f.Type() == extraType {
		f.Set(reflect.ValueOf(ex))
	}
}

// endpointWriter reads the session id from the endpoint event, the stream's first
// write, and reports it before the client can read it.
type endpointWriter struct {
	http.ResponseWriter
	announced func(id string)
	done      bool
}

var endpointData = []byte("event: endpoint\ndata: " + MessagesPath + "?sessionid=")

func (e *endpointWriter) Write(b []byte) (int, error) {
	if !e.done {
		e.done = true
		if rest, ok := bytes.CutPrefix(b, endpointData); ok {
			if id, _, ok := bytes.Cut(rest, []byte("\n")); ok && len(id) > 0 {
				e.announced(string(id))
			}
		}
	}
	return e.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController flush the stream.
func (e *endpointWriter) Unwrap() http.ResponseWriter { return e.ResponseWriter }
