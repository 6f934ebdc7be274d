package main

import (
	"context"
	"strconv"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/mcptest"
)

// addHoldTool adds the tool hold to the upstream up (before it is registered, so the
// registration discovers it): a call of it answers only when the test ends, or ends
// when its caller goes away. A step of it is surely still under way whenever the test
// acts, where a sleep of a guessed length could end first under load. Each call
// that reaches the upstream is sent on the channel returned.
func addHoldTool(t *testing.T, up *mcptest.HTTPServer) <-chan struct{} {
	t.Helper()
	entered := make(chan struct{}, 16)
	release := make(chan struct{})
	// Cleanups run last-registered first: the holds end before the upstream stops.
	t.Cleanup(func() { close(release) })
	mcp.AddTool(up.Server().MCP(), &mcp.Tool{
		Name:        "hold",
		Description: "Holds the call until the test ends or the caller goes away.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		select {
		case entered <- struct{}{}:
		default:
		}
		select {
		case <-release:
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "released"}}}, nil, nil
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	})
	return entered
}

// name is the replica name of p ("r0", "r1", ...), as an execution's runner says it.
func (rs *replicaSet) name(t *testing.T, p *serveProc) string {
	t.Helper()
	for i, q := range rs.procs {
		if q == p {
			return "r" + strconv.Itoa(i)
		}
	}
	t.Fatal("not a replica of this set")
	return ""
}
