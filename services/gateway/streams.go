package gateway

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	mcpauth "github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/events"
)

// streams are the open long-lived streams (a stateful session's GET stream, an SSE
// session's stream) by user, so that revoking a token, disabling a user or changing
// their role ends the streams their credential no longer opens: a request is checked
// when it comes, but a stream would otherwise outlive its credential until the client
// leaves.
type streams struct {
	mu     sync.Mutex
	byUser map[string]map[*stream]struct{}
}

type stream struct {
	p      *auth.Principal
	cancel context.CancelFunc
}

// track returns a context for the stream of req, which the gateway cancels once the
// request's token no longer authenticates, and the function that ends the tracking.
func (g *Gateway) track(req *http.Request) (context.Context, func()) {
	c, ok := callerOfInfo(mcpauth.TokenInfoFromContext(req.Context()))
	if !ok {
		return context.WithCancel(req.Context())
	}
	return g.trackFor(req.Context(), c.p)
}

// trackFor is track for a stream of principal p's whose context is parent.
func (g *Gateway) trackFor(parent context.Context, p *auth.Principal) (context.Context, func()) {
	ctx, cancel := context.WithCancel(parent)
	if p.TokenID == "" {
		return ctx, cancel
	}
	st := &stream{p: p, cancel: cancel}
	if exp := p.TokenExpiresAt; exp != nil {
		// Expiry publishes nothing: the stream ends when its token does.
		t := time.AfterFunc(time.Until(*exp), cancel)
		context.AfterFunc(ctx, func() { t.Stop() })
	}
	uid := p.User.ID
	g.open.mu.Lock()
	if g.open.byUser == nil {
		g.open.byUser = map[string]map[*stream]struct{}{}
	}
	if g.open.byUser[uid] == nil {
		g.open.byUser[uid] = map[*stream]struct{}{}
	}
	g.open.byUser[uid][st] = struct{}{}
	g.open.mu.Unlock()
	return ctx, func() {
		cancel()
		g.open.mu.Lock()
		delete(g.open.byUser[uid], st)
		if len(g.open.byUser[uid]) == 0 {
			delete(g.open.byUser, uid)
		}
		g.open.mu.Unlock()
	}
}

// recheck ends the streams of user id whose token no longer authenticates.
func (g *Gateway) recheck(uid string) {
	g.open.mu.Lock()
	var sts []*stream
	for st := range g.open.byUser[uid] {
		sts = append(sts, st)
	}
	g.open.mu.Unlock()
	for _, st := range sts {
		// From the database, not the token cache: this may run before the cache is
		// cleared for the very change that called it.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := g.auth.CurrentRole(ctx, st.p)
		cancel()
		if errors.Is(err, auth.ErrNoLongerValid) {
			st.cancel()
		} else if err != nil {
			g.log.Warn("gateway: re-check a stream's token", "err", err)
		}
	}
}

// credentialChanging are the events after which a user's token may no longer open
// what it opened.
var credentialChanging = map[string]bool{string(events.TokenRevoked): true, string(events.UserChanged): true,
	string(events.SessionEnded): true}

// watchCredentials follows the sessions topic for followed's bus watch (changed.go).
func (g *Gateway) credentialEvent(ev events.Event) {
	if ev.Topic != auth.SessionsTopic || !credentialChanging[ev.Kind] {
		return
	}
	var s events.Session
	if ev.Decode(&s) != nil || s.UserID == "" {
		return
	}
	go g.recheck(s.UserID)
}
