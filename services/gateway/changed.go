package gateway

import (
	"context"
	"encoding/json"
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
