package mcpclient_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/registry"
)

// Resources, templates and prompts over the live session: lists follow the server's
// pages to the end, a read and a get reach the server as asked, a read larger than the
// message cap fails with ErrResultTooLarge and the session goes on, the server's own
// errors stay reachable, and a server that offers no resources or prompts lists none.
func TestResourcesAndPrompts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opts := fast()
	opts.MaxMessageBytes = 64 << 10
	e := start(t, opts)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "mt", PageSize: 7})
	up := hs.Server().MCP()
	for i := range 20 {
		uri := fmt.Sprintf("test://gen/%02d", i)
		up.AddResource(&mcp.Resource{URI: uri, Name: fmt.Sprintf("gen-%02d", i)}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, Text: "generated"}}}, nil
		})
	}
	up.AddResource(&mcp.Resource{URI: "test://big", Name: "big"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://big", Text: strings.Repeat("x", 100<<10)}}}, nil
	})
	sv := e.create(t, registry.Spec{Name: "mt", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true})
	e.waitStatus(t, sv.ID, registry.StatusConnected)

	resources, _, err := e.mgr.ListResources(ctx, sv.ID)
	if err != nil || len(resources) != 22 { // readme, 20 generated, big: four pages of 7
		t.Fatalf("resources: got %d, %v; want 22 across pages", len(resources), err)
	}
	templates, _, err := e.mgr.ListResourceTemplates(ctx, sv.ID)
	if err != nil || len(templates) != 1 || templates[0].URITemplate != "test://notes/{name}" {
		t.Fatalf("templates: got %v, %v", templates, err)
	}
	prompts, _, err := e.mgr.ListPrompts(ctx, sv.ID)
	if err != nil || len(prompts) != 1 || prompts[0].Name != "greet" || len(prompts[0].Arguments) != 1 {
		t.Fatalf("prompts: got %v, %v", prompts, err)
	}
	res, _, err := e.mgr.ReadResource(ctx, sv.ID, "test://notes/a%20b")
	if err != nil || len(res.Contents) != 1 || res.Contents[0].Text != "Note at test://notes/a%20b" {
		t.Fatalf("read a note: got %+v, %v", res, err)
	}
	pr, _, err := e.mgr.GetPrompt(ctx, sv.ID, "greet", map[string]string{"name": "Ada"})
	if err != nil || len(pr.Messages) != 1 {
		t.Fatalf("get greet: got %+v, %v", pr, err)
	}
	if tc, ok := pr.Messages[0].Content.(*mcp.TextContent); !ok || tc.Text != "Hello, Ada!" {
		t.Fatalf("greet says %#v", pr.Messages[0].Content)
	}

	if _, _, err := e.mgr.ReadResource(ctx, sv.ID, "test://big"); !errors.Is(err, mcpclient.ErrResultTooLarge) {
		t.Fatalf("a read over the cap: got %v, want ErrResultTooLarge", err)
	}
	if res, _, err := e.mgr.ReadResource(ctx, sv.ID, "test://readme"); err != nil || len(res.Contents) != 1 {
		t.Fatalf("the session after a read over the cap: %+v, %v", res, err)
	}
	var we *jsonrpc.Error
	if _, _, err := e.mgr.ReadResource(ctx, sv.ID, "test://nope"); !errors.As(err, &we) {
		t.Fatalf("an unknown resource: got %v, want the server's JSON-RPC error", err)
	}
	if _, _, err := e.mgr.GetPrompt(ctx, sv.ID, "nope", nil); !errors.As(err, &we) {
		t.Fatalf("an unknown prompt: got %v, want the server's JSON-RPC error", err)
	}

	// A server with tools only.
	bare := mcp.NewServer(&mcp.Implementation{Name: "bare", Version: "1"}, nil)
	mcp.AddTool(bare, &mcp.Tool{Name: "noop"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	})
	bs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return bare }, nil))
	t.Cleanup(bs.Close)
	bsv := e.create(t, registry.Spec{Name: "bare", Type: registry.TypeStreamableHTTP, URL: bs.URL, Enabled: true})
	e.waitStatus(t, bsv.ID, registry.StatusConnected)
	if got, _, err := e.mgr.ListResources(ctx, bsv.ID); err != nil || got != nil {
		t.Fatalf("resources of a server without them: %v, %v", got, err)
	}
	if got, _, err := e.mgr.ListPrompts(ctx, bsv.ID); err != nil || got != nil {
		t.Fatalf("prompts of a server without them: %v, %v", got, err)
	}
	if _, _, err := e.mgr.ReadResource(ctx, bsv.ID, "test://readme"); !errors.Is(err, mcpclient.ErrNotOffered) {
		t.Fatalf("a read on a server without resources: got %v, want ErrNotOffered", err)
	}
	if _, _, err := e.mgr.GetPrompt(ctx, bsv.ID, "greet", nil); !errors.Is(err, mcpclient.ErrNotOffered) {
		t.Fatalf("a get on a server without prompts: got %v, want ErrNotOffered", err)
	}
	if _, _, err := e.mgr.ListResources(ctx, "00000000-0000-0000-0000-000000000000"); !errors.Is(err, mcpclient.ErrNotConnected) {
		t.Fatalf("a server without a session: got %v, want ErrNotConnected", err)
	}
}

// A resource list is bounded however the server pages it: a cursor longer than
// maxCursor ends it with an error naming the length, before it is followed or kept.
func TestResourceListCursorBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := start(t, fast())
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "mt"})
	hs.Server().MCP().AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if method == "resources/list" && err == nil {
				res.(*mcp.ListResourcesResult).NextCursor = strings.Repeat("c", 4097) // past maxCursor
			}
			return res, err
		}
	})
	sv := e.create(t, registry.Spec{Name: "mt", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true})
	e.waitStatus(t, sv.ID, registry.StatusConnected)
	if _, _, err := e.mgr.ListResources(ctx, sv.ID); err == nil || !strings.Contains(err.Error(), "gave a cursor of 4097 bytes") {
		t.Fatalf("a list with a huge cursor: %v, want refused", err)
	}
}
