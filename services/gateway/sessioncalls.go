package gateway

import (
	"context"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Ending a session ends its requests. go-sdk's session Close waits for the requests
// under way and cancels none, and neither a stateful session's DELETE nor a dropped SSE
// stream reaches a request's context (the SDK detaches them from the HTTP requests).
// So a held call would wait out its hold and its execution stay awaiting approval for
// a client that is gone, and a call under way upstream would run on. The gateway
// cancels them itself: a stateful session's requests when its owner DELETEs it
// (before the SDK closes it), an SSE session's when its stream ends. A cancelled held
// call withdraws its execution (hold.go); a cancelled upstream call is cancelled there.

// sessionCalls are the requests under way of the stateful streamable sessions, by
// session id. Each entry lives as long as its request.
type sessionCalls struct {
	mu     sync.Mutex
	byID   map[string]map[*inflight]struct{}
	ending map[ending]int // sessions being deleted, whose new requests are cancelled at once
}

// inflight is one request under way: its caller's user and how to cancel it.
type inflight struct {
	uid    string
	cancel context.CancelFunc
}

type ending struct{ session, uid string }

// endWithSession gives every request a context that ends with its session.
func (g *Gateway) endWithSession(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if strings.HasPrefix(method, "notifications/") {
			return next(ctx, method, req)
		}
		if sess, ok := ctx.Value(sseSessionKey{}).(*sseSession); ok && sess.stream != nil {
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			defer context.AfterFunc(sess.stream, cancel)()
			return next(ctx, method, req)
		}
		ss, _ := req.GetSession().(*mcp.ServerSession)
		c := callerOf(req)
		if ss == nil || ss.ID() == "" || c == nil {
			return next(ctx, method, req)
		}
		ctx, done := g.calls.add(ctx, ss.ID(), c.p.User.ID)
		defer done()
		return next(ctx, method, req)
	}
}

// add registers a request of user uid's in session id, whose context is parent; done
// ends and forgets it.
func (s *sessionCalls) add(parent context.Context, id, uid string) (ctx context.Context, done func()) {
	ctx, cancel := context.WithCancel(parent)
	f := &inflight{uid: uid, cancel: cancel}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ending[ending{id, uid}] > 0 {
		cancel()
	}
	if s.byID == nil {
		s.byID = map[string]map[*inflight]struct{}{}
	}
	if s.byID[id] == nil {
		s.byID[id] = map[*inflight]struct{}{}
	}
	s.byID[id][f] = struct{}{}
	return ctx, func() {
		cancel()
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.byID[id], f)
		if len(s.byID[id]) == 0 {
			delete(s.byID, id)
		}
	}
}

// end cancels the requests of user uid's in session id, and those that come until
// the returned function is called (once the SDK has closed the session).
func (s *sessionCalls) end(id, uid string) (ended func()) {
	k := ending{id, uid}
	s.mu.Lock()
	if s.ending == nil {
		s.ending = map[ending]int{}
	}
	s.ending[k]++
	var cancels []context.CancelFunc
	for f := range s.byID[id] {
		if f.uid == uid { // the SDK binds a session to the user who opened it
			cancels = append(cancels, f.cancel)
		}
	}
	s.mu.Unlock()
	for _, cancel := range cancels {
		cancel()
	}
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.ending[k]--; s.ending[k] <= 0 {
			delete(s.ending, k)
		}
	}
}
