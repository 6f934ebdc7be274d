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

// held counts the open stateful sessions by user id.
type held struct {
	mu     sync.Mutex
	byUser map[string]int
}

// refusedSessionGrace is how long a refused session stays, so its error answer
// reaches the client before the session is closed.
const refusedSessionGrace = time.Second

func (g *Gateway) limitSessions(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "initialize" {
			return next(ctx, method, req)
		}
		c := callerOf(req)
		ss, ok := req.GetSession().(*mcp.ServerSession)
		if c == nil || !ok {
			return next(ctx, method, req)
		}
		uid := c.p.User.ID
		g.held.mu.Lock()
		if g.held.byUser == nil {
			g.held.byUser = map[string]int{}
		}
		if n := g.held.byUser[uid]; n >= g.opts.MaxSessions {
			g.held.mu.Unlock()
			time.AfterFunc(refusedSessionGrace, func() { _ = ss.Close() })
			return nil, &jsonrpc.Error{Code: codeRateLimited, Message: fmt.Sprintf(
				"too many MCP sessions: %s has %d open, the most one person may; end sessions you no longer use "+
					"(DELETE /mcp with their Mcp-Session-Id), or wait for idle ones to close after %s", c.p.User.Username, n, g.opts.SessionTimeout)}
		}
		g.held.byUser[uid]++
		g.held.mu.Unlock()
		go func() {
			_ = ss.Wait()
			g.held.mu.Lock()
			if g.held.byUser[uid]--; g.held.byUser[uid] <= 0 {
				delete(g.held.byUser, uid)
			}
			g.held.mu.Unlock()
		}()
		return next(ctx, method, req)
	}
}
