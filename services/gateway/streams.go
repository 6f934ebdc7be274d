package gateway

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"time"

	mcpauth "github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/events"
)

// streams are the open long-lived streams (a stateful session's GET stream, an SSE
// session's stream) and the POST requests under way, by user, so that revoking a
// token, disabling a user or changing their role ends what their credential no longer
// opens: a request is checked when it comes, but a stream, or a call that blocks
// (held for approval, a collaboration, a long command), would otherwise outlive its
// credential until the client leaves, and answer a client that is no longer allowed.
type streams struct {
	mu     sync.Mutex
	byUser map[string]map[*stream]struct{}
}

// A role that loses the permissions a call needs (lostPermission) ends a user's
// streams as well as their requests: a stream (a stateful session's GET, an SSE
// session's, a subscriptions/listen) carries the server's messages (tools/list_changed,
// passed-through notifications) to a client its role no longer lets call through
// /mcp. A client that opens it again is admitted under its role as it is then.
type stream struct {
	p      *auth.Principal
	cancel context.CancelFunc
	// standalone marks a stateful session's GET stream or a subscriptions/listen: the
	// streams that carry tools/list_changed, whose ending by recheck leaves a list_changed
	// owed (owed).
	standalone bool
}

// track returns a context for the stream or POST request req, which the gateway
// cancels once the request's token no longer authenticates or its user's role lost a
// permission (recheck), and the function that ends the tracking.
func (g *Gateway) track(req *http.Request) (context.Context, func()) {
	c, ok := callerOfInfo(mcpauth.TokenInfoFromContext(req.Context()))
	if !ok {
		return context.WithCancel(req.Context())
	}
	return g.trackFor(req.Context(), c.p)
}

// trackFor is track for a stream or request of principal p's whose context is parent.
func (g *Gateway) trackFor(parent context.Context, p *auth.Principal) (context.Context, func()) {
	return g.trackStream(parent, p, false)
}

// trackStream is trackFor, for a standalone stream (a GET or a listen) when standalone.
func (g *Gateway) trackStream(parent context.Context, p *auth.Principal, standalone bool) (context.Context, func()) {
	ctx, cancel := context.WithCancel(parent)
	if p.TokenID == "" {
		return ctx, cancel
	}
	st := &stream{p: p, cancel: cancel, standalone: standalone}
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

// recheck ends the streams and requests of user id whose token no longer
// authenticates, or whose user's role lost a permission since they were opened.
func (g *Gateway) recheck(uid string) {
	g.open.mu.Lock()
	var sts []*stream
	for st := range g.open.byUser[uid] {
		sts = append(sts, st)
	}
	g.open.mu.Unlock()
	// One look per token: a client may hold many requests under way on one token.
	type current struct {
		role auth.Role
		err  error
	}
	seen := map[string]current{}
	for _, st := range sts {
		cur, ok := seen[st.p.TokenID]
		if !ok {
			// From the database, not the token cache: this may run before the cache is
			// cleared for the very change that called it.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			cur.role, cur.err = g.auth.CurrentRole(ctx, st.p)
			cancel()
			seen[st.p.TokenID] = cur
		}
		role, err := cur.role, cur.err
		if errors.Is(err, auth.ErrNoLongerValid) || err == nil && lostPermission(st.p.User.Role, role) {
			if st.standalone {
				g.owed.add(uid)
			}
			st.cancel()
		} else if err != nil {
			g.log.Warn("gateway: re-check a stream's token", "err", err)
		}
	}
}

// lostPermission reports whether role now lacks a permission role was (a request was
// admitted with) granted that a call through /mcp needs: using tools, or asking for an
// approval. Another one lost (managing users) does not cut a write off half-way.
func lostPermission(was, now auth.Role) bool {
	return slices.ContainsFunc([]auth.Permission{auth.PermToolUse, auth.PermExecutionCreate}, func(p auth.Permission) bool {
		return was.Can(p) && !now.Can(p)
	})
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

// owedFor is how long a list_changed stays owed to a user whose stream recheck ended:
// about as long as a client may take to open its stream again; after it, a stream opened
// is taken for a new client's, which lists its tools anyway.
const owedFor = 30 * time.Minute

// owed counts, by user, the standalone streams that recheck ended. Their role's change
// sent tools/list_changed some 260 ms later (follow), to streams no longer open: the SDK
// keeps no notification for a stream that is closed, and a client opens its stream again
// after a second or more, so it would keep listing the tools of the role it lost. The
// next stream the user opens (as many as were ended) is sent one list_changed at once,
// on that session alone (sendListChanged); not every new stream, which would make a
// client list again on every reconnect, and hide from the tests whether a change was
// announced at all.
type owed struct {
	mu     sync.Mutex
	byUser map[string]owedLists
}

type owedLists struct {
	n     int
	until time.Time
}

// add owes user uid one list_changed more.
func (o *owed) add(uid string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	for u, ow := range o.byUser {
		if now.After(ow.until) {
			delete(o.byUser, u)
		}
	}
	if o.byUser == nil {
		o.byUser = map[string]owedLists{}
	}
	ow := o.byUser[uid]
	o.byUser[uid] = owedLists{n: ow.n + 1, until: now.Add(owedFor)}
}

// take reports whether user uid is owed a list_changed, and counts it paid.
func (o *owed) take(uid string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	ow, ok := o.byUser[uid]
	if !ok {
		return false
	}
	if ow.n <= 1 || time.Now().After(ow.until) {
		delete(o.byUser, uid)
	} else {
		ow.n--
		o.byUser[uid] = ow
	}
	return time.Now().Before(ow.until)
}
