package router_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/router"
)

// A server's JSON-RPC error message is the server's to choose: a 1 MiB one is cut to
// registry.MaxErrorText in the caller's error and in the tool.failed event.
func TestUpstreamErrorMessageClipped(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	hs := e.server("loud", true)
	huge := strings.Repeat("e", 1<<20)
	// A raw handler's error is sent as a JSON-RPC error, not an isError result.
	hs.Server().MCP().AddTool(&mcp.Tool{Name: "shout", InputSchema: map[string]any{"type": "object"},
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return nil, errors.New(huge) })
	e.enable("loud__shout")

	_, err := e.call("loud__shout", `{}`)
	var re *router.Error
	if !errors.As(err, &re) || re.Code != router.CodeUpstream {
		t.Fatalf("got %v, want upstream_error", err)
	}
	limit := registry.MaxErrorText + len(registry.CutMark)
	if len(re.Message) > limit || !strings.HasSuffix(re.Message, registry.CutMark) {
		t.Errorf("error message is %d bytes (ends %q), want at most %d ending with the cut mark",
			len(re.Message), re.Message[max(0, len(re.Message)-20):], limit)
	}
	e.flush()
	var n, longest int
	if err := e.pool.QueryRow(e.ctx, `SELECT count(*), coalesce(max(length(payload->>'message')), 0) FROM events
		WHERE kind = 'tool.failed' AND payload->>'call_id' = $1`, re.CallID).Scan(&n, &longest); err != nil {
		t.Fatal(err)
	}
	if n == 0 || longest > registry.MaxErrorText+len([]rune(registry.CutMark)) {
		t.Errorf("tool.failed events: %d, longest message %d characters, want some, at most %d", n, longest, limit)
	}
}
