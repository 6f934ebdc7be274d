package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/tools"
)

// listChanging are the events after which a caller's tool list may differ: a tool
// enabled, disabled, updated or given a permission, a server changed or removed, a
// user's role changed.
var listChanging = map[string]bool{
	string(events.ToolsChanged): true, string(events.ToolChanged): true, string(events.ToolPermission): true,
	string(events.ToolStateChanged): true, string(events.ServerChanged): true, string(events.ServerDeleted): true,
	string(events.UserChanged): true,
}

// follow sends notifications/tools/list_changed to the connected clients after the
// events that can change what tools/list answers, at most one per ListChangedDelay.
// Every session is told (a client lists again, which is cheap); telling only those
// whose own list changed would cost a list per connected user on every change.
//
// The SDK sends list_changed only when its own tool table changes, to every session of
// every era (stateful sessions on their stream, 2026-07-28 clients on their
// subscriptions/listen request), so the gateway keeps its own tools in that table
// and adds one again to make it send.
func (g *Gateway) follow() {
	for _, t := range ownTools {
		g.server.AddTool(t, g.ownHandler(t.Name))
	}
	g.server.AddTool(&mcp.Tool{Name: relayTool, InputSchema: json.RawMessage(`{"type":"object"}`)}, g.relayed)
	if g.bus == nil {
		g.unfollow = func() {}
		return
	}
	kick := make(chan struct{}, 1)
	sub := g.bus.Watch(func(ev events.Event) {
		g.credentialEvent(ev)
		if listChanging[ev.Kind] {
			select {
			case kick <- struct{}{}:
			default:
			}
		}
	}, tools.Topic, registry.ToolsTopic, registry.ServersTopic, auth.SessionsTopic)
	done := make(chan struct{})
	g.unfollow = func() { sub.Close(); <-done }
	go func() {
		defer close(done)
		for {
			select {
			case <-g.stop.Done():
				return
			case <-kick:
			}
			// The changes of the next moment go out in the same notification.
			select {
			case <-g.stop.Done():
				return
			case <-time.After(g.opts.ListChangedDelay):
			}
			select {
			case <-kick:
			default:
			}
			g.server.AddTool(ownTools[0], g.ownHandler(ownTools[0].Name))
		}
	}()
}

// ownHandler serves one of the gateway's own tools for the request's caller.
func (g *Gateway) ownHandler(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		c := callerOf(req)
		if c == nil {
			return nil, errNoCaller
		}
		if g.exec == nil {
			return errorResult("Approvals are not available on this server."), nil
		}
		if name == AwaitTool {
			return g.await(ctx, c, req)
		}
		return g.listPending(ctx, c)
	}
}

// openedStream calls opened when its GET stream is answered 200: the SDK writes the
// header while it holds the stream's lock, and registers the stream before it lets go,
// so a notification written from then on waits for the stream and is delivered on it.
type openedStream struct {
	http.ResponseWriter
	opened func()
	once   sync.Once
}

func (o *openedStream) WriteHeader(code int) {
	if code == http.StatusOK {
		o.once.Do(func() { go o.opened() })
	}
	o.ResponseWriter.WriteHeader(code)
}

func (o *openedStream) Unwrap() http.ResponseWriter { return o.ResponseWriter }

// owedOnGet sends the stateful session sid, whose GET stream of user uid's just
// opened, the list_changed the user is owed (owed), if any.
func (g *Gateway) owedOnGet(uid, sid string) {
	if sid == "" {
		return
	}
	var ss *mcp.ServerSession
	for s := range g.server.Sessions() {
		if s.ID() == sid {
			ss = s
			break
		}
	}
	if ss == nil || !g.owed.take(uid) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g.sendListChanged(ctx, ss, nil)
}

// listenKey marks the context of a subscriptions/listen with its user's id
// (limitSessions), for owedOnListen.
type listenKey struct{}

// owedOnListen is a sending middleware: once a subscriptions/listen's acknowledgement
// that it carries tools/list_changed has gone out, the listen is sent the list_changed
// its user is owed (owed), on its own stream. It also keeps the handler below it, to
// send with (sendListChanged).
func (g *Gateway) owedOnListen(next mcp.MethodHandler) mcp.MethodHandler {
	g.send = next
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if method != "notifications/subscriptions/acknowledged" || err != nil {
			return res, err
		}
		uid, _ := ctx.Value(listenKey{}).(string)
		ack, ok := req.GetParams().(*mcp.SubscriptionsAcknowledgedParams)
		ss, _ := req.GetSession().(*mcp.ServerSession)
		if uid == "" || !ok || !ack.Notifications.ToolsListChanged || ss == nil || !g.owed.take(uid) {
			return res, err
		}
		g.sendListChanged(ctx, ss, ack.Meta[mcp.MetaKeySubscriptionID])
		return res, err
	}
}

// sendListChanged sends notifications/tools/list_changed to session ss alone (the
// SDK's own sends every session); subscription is the listen's id a 2026-07-28 client
// matches it to, nil on a stateful session.
func (g *Gateway) sendListChanged(ctx context.Context, ss *mcp.ServerSession, subscription any) {
	params := &mcp.ToolListChangedParams{}
	if subscription != nil {
		params.Meta = mcp.Meta{mcp.MetaKeySubscriptionID: subscription}
	}
	if _, err := g.send(ctx, "notifications/tools/list_changed", &mcp.ServerRequest[*mcp.ToolListChangedParams]{Session: ss, Params: params}); err != nil {
		g.log.Debug("gateway: send an owed tools/list_changed", "session", ss.ID(), "err", err)
	}
}
