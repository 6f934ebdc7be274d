package gateway

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A stateful session (streamable HTTP before 2026-07-28, or SSE) holds memory and
// goroutines until its client ends it or it idles out (Options.SessionTimeout), so one
// user's token could otherwise open them without end. Each user may hold
// Options.MaxSessions at once; an initialize past that is refused with what to do,
// and the session the SDK made for it is closed. Stateless 2026-07-28 requests hold
// nothing between requests and are not counted.

// A 2026-07-28 subscriptions/listen request is a stream too: it stays open until its
// client leaves. It counts against the same limit while it is open, ends when its
// credential no longer opens it (streams.go), and ends when the gateway closes, so it
// does not hold the HTTP server's drain.

// held counts the open stateful sessions and listen streams by user id.
type held struct {
	mu     sync.Mutex
	byUser map[string]int
	// counted are the sessions counted in byUser: an initialize sent again on a live
	// session (the SDK refuses it after the middleware) counts nothing more.
	counted map[*mcp.ServerSession]bool
}

// refusedSessionGrace is how long a refused session stays, so its error answer
// reaches the client before the session is closed.
const refusedSessionGrace = time.Second

func (g *Gateway) limitSessions(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "initialize" && method != methodListen {
			return next(ctx, method, req)
		}
		c := callerOf(req)
		if c == nil {
			return next(ctx, method, req)
		}
		if method == methodListen {
			if n, ok := g.admitStream(c.p.User.ID); !ok {
				return nil, &jsonrpc.Error{Code: codeRateLimited, Message: fmt.Sprintf(
					"too many MCP streams: %s has %d open, the most one person may; close listens and sessions you no longer use",
					c.p.User.Username, n)}
			}
			defer g.releaseStream(c.p.User.ID)
			tracked, done := g.trackStream(context.WithValue(ctx, listenKey{}, c.p.User.ID), c.p, true)
			defer done()
			defer context.AfterFunc(g.stop, done)()
			return next(tracked, method, req)
		}
		ss, ok := req.GetSession().(*mcp.ServerSession)
		if !ok || ctx.Value(sseSessionKey{}) != nil { // an SSE session counts from its stream's opening (openSSE)
			return next(ctx, method, req)
		}
		uid := c.p.User.ID
		if !g.countSession(ss) {
			return next(ctx, method, req) // counted already: the SDK answers a second initialize
		}
		if n, ok := g.admitStream(uid); !ok {
			g.uncountSession(ss)
			time.AfterFunc(refusedSessionGrace, func() { _ = ss.Close() })
			return nil, &jsonrpc.Error{Code: codeRateLimited, Message: fmt.Sprintf(
				"too many MCP sessions: %s has %d open, the most one person may; end sessions you no longer use "+
					"(DELETE /mcp with their Mcp-Session-Id), or wait for idle ones to close after %s", c.p.User.Username, n, g.opts.SessionTimeout)}
		}
		go func() {
			_ = ss.Wait()
			g.uncountSession(ss)
			g.releaseStream(uid)
			g.elicited.forgetSession(ss.ID())
		}()
		return next(ctx, method, req)
	}
}

// methodListen is the 2026-07-28 request that holds a stream of notifications open.
const methodListen = "subscriptions/listen"

// admitStream counts one more session or stream of user uid's, unless they hold the most one
// person may (n).
func (g *Gateway) admitStream(uid string) (n int, ok bool) {
	g.held.mu.Lock()
	defer g.held.mu.Unlock()
	if g.held.byUser == nil {
		g.held.byUser = map[string]int{}
	}
	if n := g.held.byUser[uid]; n >= g.opts.MaxSessions {
		return n, false
	}
	g.held.byUser[uid]++
	return 0, true
}

// countSession marks ss as counted, and reports false when it was already.
func (g *Gateway) countSession(ss *mcp.ServerSession) bool {
	g.held.mu.Lock()
	defer g.held.mu.Unlock()
	if g.held.counted[ss] {
		return false
	}
	if g.held.counted == nil {
		g.held.counted = map[*mcp.ServerSession]bool{}
	}
	g.held.counted[ss] = true
	return true
}

func (g *Gateway) uncountSession(ss *mcp.ServerSession) {
	g.held.mu.Lock()
	defer g.held.mu.Unlock()
	delete(g.held.counted, ss)
}

// releaseStream counts one session or stream of user uid's less.
func (g *Gateway) releaseStream(uid string) {
	g.held.mu.Lock()
	defer g.held.mu.Unlock()
	if g.held.byUser[uid]--; g.held.byUser[uid] <= 0 {
		delete(g.held.byUser, uid)
	}
}
