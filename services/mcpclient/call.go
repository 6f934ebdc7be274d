package mcpclient

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"

	"github.com/toolwarden/toolwarden/internal/callmeta"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/secrets"
)

// ProgressFunc receives the progress notifications of one call.
type ProgressFunc func(p *mcp.ProgressNotificationParams)

// progressRoutes hands each notifications/progress to the call that asked for it. The
// SDK has one progress handler per client, so calls register a unique token here.
type progressRoutes struct {
	routes sync.Map // token string → *mailbox
}

// add registers fn under a random token: a server cannot guess the token of a call
// it was not sent, so it cannot feed progress into another server's calls. The
// returned func ends the route; progress still waiting for fn is dropped.
func (r *progressRoutes) add(fn ProgressFunc) (string, func()) {
	tok := "tw-" + rand.Text()
	b := &mailbox{fn: fn, wake: make(chan struct{}, 1), stop: make(chan struct{})}
	r.routes.Store(tok, b)
	go b.run()
	return tok, func() { r.routes.Delete(tok); b.close() }
}

// deliver never waits for the call's callback: the SDK handles a session's
// notifications one at a time, so a caller that stopped reading would hold up every
// later notification of the session, queued in memory without limit.
func (r *progressRoutes) deliver(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	if req == nil || req.Params == nil {
		return
	}
	tok, ok := req.Params.ProgressToken.(string)
	if !ok {
		return
	}
	if b, ok := r.routes.Load(tok); ok {
		b.(*mailbox).put(req.Params)
	}
}

// mailbox holds a call's latest progress not yet given to its callback, which runs on
// the mailbox's own goroutine: while the callback is busy, newer progress replaces
// older (a progress notification says where the work stands, so the latest is enough).
type mailbox struct {
	fn     ProgressFunc
	mu     sync.Mutex
	latest *mcp.ProgressNotificationParams
	closed bool
	wake   chan struct{} // one slot: there is something in latest
	stop   chan struct{}
}

func (b *mailbox) put(p *mcp.ProgressNotificationParams) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.latest = p
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

func (b *mailbox) run() {
	for {
		select {
		case <-b.stop:
			return
		case <-b.wake:
		}
		b.mu.Lock()
		p, closed := b.latest, b.closed
		b.latest = nil
		b.mu.Unlock()
		if closed {
			return
		}
		if p != nil {
			b.fn(p)
		}
	}
}

// close ends the goroutine (once a callback running now returns); nothing is
// delivered after it, as no progress is after the call returned.
func (b *mailbox) close() {
	b.mu.Lock()
	b.closed, b.latest = true, nil
	b.mu.Unlock()
	close(b.stop)
}

// CallTool calls a tool on server id's live session. When onProgress is set the call
// carries a progress token and the server's progress notifications reach onProgress
// until CallTool returns. Cancelling ctx abandons the call, and the SDK tells the
// server with notifications/cancelled.
func (m *Manager) CallTool(ctx context.Context, id, name string, args any, onProgress ProgressFunc) (*mcp.CallToolResult, error) {
	return m.CallToolBound(ctx, id, "", name, args, onProgress)
}

// ErrIdentityChanged is a call bound to connection settings the server's session no
// longer has (its command, environment, URL or credentials changed since approval).
var ErrIdentityChanged = errors.New("mcpclient: the server's connection settings changed")

// CallToolBound is CallTool on a session started with the connection identity given
// (registry.Connection.Identity), refused with ErrIdentityChanged on any other: an
// approved plan step runs only where it was approved to. An empty identity binds
// nothing.
func (m *Manager) CallToolBound(ctx context.Context, id, identity, name string, args any, onProgress ProgressFunc) (*mcp.CallToolResult, error) {
	return m.CallToolServed(ctx, id, identity, name, "", args, onProgress, nil)
}

// CallToolServed is CallToolBound that tells onSession, when set, the masker of the
// session it picked for the call (Masker's, for that session), before the call is sent
// and so before any progress. Mask what the call returns with it, not with Masker(id)
// asked before or after: a Refresh (a rotated key) may replace the session in between,
// leaving Masker(id) without the secrets this session runs with, or nil for a moment.
//
// definition, when not empty, is the definition hash (registry.DefinitionHash) the call
// was vetted against: the call is sent only when the session it goes to lists the tool
// with that definition, else refused with a *DefinitionError (ErrDefinitionDiffers)
// and the server discovered again on this replica. Another replica's discovery may have
// stored what its own session lists, not this one's.
func (m *Manager) CallToolServed(ctx context.Context, id, identity, name, definition string, args any, onProgress ProgressFunc, onSession func(*secrets.Masker)) (*mcp.CallToolResult, error) {
	m.mu.Lock()
	c := m.conns[id]
	m.mu.Unlock()
	if c == nil {
		return nil, ErrNotConnected
	}
	if onSession != nil {
		onSession(c.masker)
	}
	if identity != "" && !m.reg.IdentityMatches(c.cfg, identity) {
		return nil, ErrIdentityChanged
	}
	sess, err := c.live()
	if err != nil {
		return nil, err
	}
	// The built-in server is checked too: replicas of two releases (a rolling upgrade)
	// serve two versions of its tools.
	if definition != "" {
		if err := c.checkDefinition(ctx, sess, name, definition); err != nil {
			return nil, err
		}
	}
	cs := sess.cs
	p := &mcp.CallToolParams{Name: name, Arguments: args}
	if meta, ok := callmeta.From(ctx); ok && c.cfg.Type == registry.TypeBuiltin {
		p.Meta = mcp.Meta{callmeta.Key: meta}
	}
	if onProgress != nil {
		tok, done := m.progress.add(onProgress)
		defer done()
		p.SetProgressToken(tok)
	}
	res, err := cs.CallTool(ctx, p)
	c.noteRefusal(err)
	if err != nil {
		return nil, fmt.Errorf("mcpclient: call %s: %w", name, tooLarge(err))
	}
	return res, nil
}

// tooLarge turns the stand-in for an answer over the cap (msgLimit.errorResponse) into
// ErrResultTooLarge; a server sending that code itself is just as much at fault.
func tooLarge(err error) error {
	var we *jsonrpc.Error
	if errors.As(err, &we) && we.Code == CodeResultTooLarge {
		return &tooLargeError{msg: we.Message}
	}
	return err
}

// ServerError is the JSON-RPC error the server itself answered a request with, if err
// holds one; the errors the client's own connection makes (a transport's rejection of a
// 5xx, closing) come first in the chain when present and are not the server's answer.
func ServerError(err error) (*jsonrpc.Error, bool) {
	var we *jsonrpc.Error
	if !errors.As(err, &we) {
		return nil, false
	}
	switch we.Code {
	case -32001, -32003, -32004, -32005: // the SDK's jsonrpc2: unknown, client and server closing, rejected
		return nil, false
	}
	return we, true
}

// Masker masks the secret values server id's session runs with (its environment and
// headers) in what the server says; nil (which masks nothing) when it has no session.
// What a call returns is masked with CallToolServed's instead: the session may change.
func (m *Manager) Masker(id string) *secrets.Masker {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c := m.conns[id]; c != nil {
		return c.masker
	}
	return nil
}

// Identity is the connection identity (registry.Connection.Identity) server id's
// session runs with. While it has none for a moment (reconnecting, or not started yet
// after Toolwarden started), it is the identity of the settings it will run with, so
// an approval is not refused for a reconnect; "" when the server cannot be read.
func (m *Manager) Identity(ctx context.Context, id string) string {
	m.mu.Lock()
	if c := m.conns[id]; c != nil {
		m.mu.Unlock()
		return m.reg.IdentityNow(c.cfg)
	}
	m.mu.Unlock()
	cfg, err := m.reg.Connection(ctx, id)
	if err != nil {
		return ""
	}
	return cfg.Identity
}

// IdentityMatches reports whether identity (Identity's, maybe on another replica, or
// under an older key) is the connection identity server id's session runs with, or
// the one it will run with while it has none (Identity).
func (m *Manager) IdentityMatches(ctx context.Context, id, identity string) bool {
	m.mu.Lock()
	if c := m.conns[id]; c != nil {
		m.mu.Unlock()
		return m.reg.IdentityMatches(c.cfg, identity)
	}
	m.mu.Unlock()
	cfg, err := m.reg.Connection(ctx, id)
	return err == nil && m.reg.IdentityMatches(cfg, identity)
}
