package gateway_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/registry"
)

// A prompt's tool_use and tool_result messages (sampling types, which the SDK decodes
// in a prompt too) pass through masked like its text: the tool use's input, the tool
// result's nested content, structured content and _meta never show the secret the
// server is registered with, and a nested resource's URI is namespaced.
func TestPromptToolContentMasked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, nil)
	const secret = "sk-live-fedcba9876543210"
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "mt"})
	hs.Server().MCP().AddPrompt(&mcp.Prompt{Name: "tools"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{
			{Role: "user", Content: &mcp.TextContent{Text: "look it up"}},
			{Role: "assistant", Content: &mcp.ToolUseContent{ID: "use-" + secret, Name: "lookup",
				Input: map[string]any{"key": secret, secret: []any{"x " + secret}}, Meta: mcp.Meta{"k": secret}}},
			{Role: "user", Content: &mcp.ToolResultContent{ToolUseID: "use-" + secret, Content: []mcp.Content{
				&mcp.TextContent{Text: "the key is " + secret, Meta: mcp.Meta{"k": secret}},
				&mcp.ResourceLink{URI: "test://keys/" + secret, Name: "key"},
				&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "test://keys/1", Text: "key=" + secret}},
			}, StructuredContent: map[string]any{"key": secret}, Meta: mcp.Meta{"k": secret}}},
		}}, nil
	})
	srv.RegisterServer(t, registry.Spec{Name: "mt", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true, Trusted: true,
		Headers: map[string]string{"X-Api-Key": secret}}, "echo")
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			cs := mustConnect(t, srv, srv.Token(t, "admin"), era)
			res, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "mt__tools"})
			if err != nil || len(res.Messages) != 3 {
				t.Fatalf("get: %+v, %v", res, err)
			}
			b, _ := json.Marshal(res)
			if strings.Contains(string(b), secret) {
				t.Fatalf("the prompt shows the secret: %s", b)
			}
			use, _ := res.Messages[1].Content.(*mcp.ToolUseContent)
			if use == nil || use.Name != "lookup" || use.Input["key"] != "***" || use.ID != "use-***" || use.Meta != nil {
				t.Fatalf("the tool use: %#v, want its input masked", res.Messages[1].Content)
			}
			out, _ := res.Messages[2].Content.(*mcp.ToolResultContent)
			if out == nil || len(out.Content) != 3 || out.Meta != nil {
				t.Fatalf("the tool result: %#v", res.Messages[2].Content)
			}
			if tc, _ := out.Content[0].(*mcp.TextContent); tc == nil || tc.Text != "the key is ***" || tc.Meta != nil {
				t.Fatalf("the tool result's text: %#v, want it masked", out.Content[0])
			}
			if rl, _ := out.Content[1].(*mcp.ResourceLink); rl == nil || rl.URI != "toolwarden://mt/test://keys/***" {
				t.Fatalf("the tool result's resource link: %#v, want it namespaced and masked", out.Content[1])
			}
			if er, _ := out.Content[2].(*mcp.EmbeddedResource); er == nil || er.Resource == nil ||
				er.Resource.URI != "toolwarden://mt/test://keys/1" || er.Resource.Text != "key=***" {
				t.Fatalf("the tool result's embedded resource: %#v, want it namespaced and masked", out.Content[2])
			}
			if sc, _ := json.Marshal(out.StructuredContent); string(sc) != `{"key":"***"}` {
				t.Fatalf("the tool result's structured content: %s, want it masked", sc)
			}
		})
	}
}
