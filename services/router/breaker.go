package router

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sony/gobreaker/v2"

	"github.com/toolwarden/toolwarden/services/mcpclient"
)

// Circuit states as BreakerState reports them.
const (
	CircuitClosed   = "closed"
	CircuitOpen     = "open"
	CircuitHalfOpen = "half-open"
)

// BreakerState is the state of one server's call circuit: closed (calls pass), open
// (calls fail at once until the cooldown ends) or half-open (one trial call decides).
type BreakerState struct {
	ServerID string
	Server   string // the server's name, as the calls named it
	State    string
	Since    time.Time // when it entered State
	// Failures counts the failed calls in a row (while closed) that may open it.
	Failures uint32
	// Until is when an open circuit lets a trial call through (zero unless open).
	Until time.Time
}

// callBreaker is one server's circuit plus when it last changed state, which gobreaker
// does not keep.
type callBreaker struct {
	cb *gobreaker.CircuitBreaker[*mcp.CallToolResult]

	mu     sync.Mutex
	since  time.Time
	server string // renamed with the server (Router.follow)
}

// name is the server's current name as the circuit knows it.
func (b *callBreaker) name() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.server
}

// forgetBreaker drops the call circuit of a deleted server, so Breakers (and the
// metrics made of them) no longer list it.
func (r *Router) forgetBreaker(serverID string) {
	r.breakers.Delete(serverID)
}

// renameBreaker gives the call circuit of a renamed server its new name; its state is
// kept (the connection did not change with the name).
func (r *Router) renameBreaker(serverID, name string) {
	if b, ok := r.breakers.Load(serverID); ok && name != "" {
		cb := b.(*callBreaker)
		cb.mu.Lock()
		cb.server = name
		cb.mu.Unlock()
	}
}

// breaker returns the call circuit of server serverID (named server), creating it closed.
func (r *Router) breaker(serverID, server string) *callBreaker {
	if b, ok := r.breakers.Load(serverID); ok {
		return b.(*callBreaker)
	}
	got, _ := r.breakers.LoadOrStore(serverID, r.newBreaker(serverID, server))
	return got.(*callBreaker)
}

func (r *Router) newBreaker(serverID, server string) *callBreaker {
	b := &callBreaker{server: server, since: time.Now()}
	limit := r.opts.BreakerFailures
	b.cb = gobreaker.NewCircuitBreaker[*mcp.CallToolResult](gobreaker.Settings{
		Name: serverID, Timeout: r.opts.BreakerCooldown,
		ReadyToTrip:  func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= limit },
		IsSuccessful: func(err error) bool { return err == nil },
		// A caller that gave up, a call that timed out, an answer over the size cap (the
		// session read past it and goes on) or a call the server refused says nothing
		// about the server's health, and is not a success either: counted as one, calls
		// cancelled or refused between failing ones would keep the circuit from opening,
		// and a trial call ending so would close it.
		IsExcluded: func(err error) bool {
			return serverRefused(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
				errors.Is(err, mcpclient.ErrIdentityChanged) || errors.Is(err, mcpclient.ErrResultTooLarge) ||
				errors.Is(err, mcpclient.ErrDefinitionDiffers)
		},
		OnStateChange: func(string, gobreaker.State, gobreaker.State) {
			b.mu.Lock()
			b.since = time.Now()
			b.mu.Unlock()
		},
	})
	return b
}

// resetBreaker closes the call circuit of a server whose session just (re)opened: the
// failures that opened it were the old session's. A fresh circuit replaces the old one,
// so calls of the old session that fail late count against the old one only.
func (r *Router) resetBreaker(serverID string) {
	old, ok := r.breakers.Load(serverID)
	if !ok {
		return
	}
	ob := old.(*callBreaker)
	if ob.cb.State() == gobreaker.StateClosed && ob.cb.Counts().ConsecutiveFailures == 0 {
		return
	}
	r.breakers.Store(serverID, r.newBreaker(serverID, ob.name()))
	r.log.Info("router: call circuit closed: the server connected again", "server", ob.name())
}

func (b *callBreaker) state(serverID string, cooldown time.Duration) BreakerState {
	st := b.cb.State() // first: it may move an open circuit to half-open, and since with it
	b.mu.Lock()
	since, server := b.since, b.server
	b.mu.Unlock()
	out := BreakerState{ServerID: serverID, Server: server, Since: since, Failures: b.cb.Counts().ConsecutiveFailures}
	switch st {
	case gobreaker.StateOpen:
		out.State, out.Until = CircuitOpen, since.Add(cooldown)
	case gobreaker.StateHalfOpen:
		out.State = CircuitHalfOpen
	default:
		out.State = CircuitClosed
	}
	return out
}

// Breaker returns the call circuit of server serverID; a server no call has reached
// yet is closed since the router started.
func (r *Router) Breaker(serverID string) BreakerState {
	if b, ok := r.breakers.Load(serverID); ok {
		return b.(*callBreaker).state(serverID, r.opts.BreakerCooldown)
	}
	return BreakerState{ServerID: serverID, State: CircuitClosed, Since: r.started}
}

// Breakers returns the call circuit of every server a call has reached, by server name.
func (r *Router) Breakers() []BreakerState {
	var out []BreakerState
	r.breakers.Range(func(k, v any) bool {
		out = append(out, v.(*callBreaker).state(k.(string), r.opts.BreakerCooldown))
		return true
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Server < out[j].Server })
	return out
}

// serverRefused reports whether the server answered the call with a refusal of it: its own
// JSON-RPC error, or a 4xx to the request (mcp.ErrRequestRefused, a proxy's 413 for a
// large body). An internal error, or one of JSON-RPC's server errors (-32099 to -32000: a
// proxy's "connection closed" while the server behind it restarts), is the server failing
// and counts, as do the errors the client's own connection makes (closing, or rejected by
// the transport as a 5xx or 429 is), which come first in the chain when present; MCP's
// "URL elicitation required" in that range is a refusal.
func serverRefused(err error) bool {
	if errors.Is(err, mcp.ErrRequestRefused) {
		return true
	}
	we, ok := mcpclient.ServerError(err)
	switch {
	case !ok, we.Code == jsonrpc.CodeInternalError:
		return false
	case we.Code >= -32099 && we.Code <= -32000:
		return we.Code == mcp.CodeURLElicitationRequired
	}
	return true
}
