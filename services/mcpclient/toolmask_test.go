package mcpclient_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/secrets"
)

// A server's configured secret in what it says of a tool (its title, description,
// schemas, annotations) is masked before the tool is stored and served, and the masked
// definition is the same at the next discovery: nothing changes.
func TestToolTextsMasked(t *testing.T) {
	t.Parallel()
	const secret = "sk-live-tool-secret-0123456789"
	ctx := context.Background()
	e := start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "leaky"})
	hs.Server().SetTool(mcptest.ToolSpec{Name: "leaky", Title: "Leaky " + secret, Description: "Calls the API with key " + secret,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"key":{"type":"string","description":"defaults to ` + secret + `"}}}`),
		Annotations: &mcp.ToolAnnotations{Title: "Leaky " + secret}})
	sv := e.create(t, registry.Spec{Name: "leaky", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true,
		Headers: map[string]string{"Authorization": "Bearer " + secret}})
	e.waitStatus(t, sv.ID, registry.StatusConnected)
	e.waitRuns(t, sv.ID, 1)

	list, err := e.reg.ServerTools(ctx, sv.ID)
	if err != nil {
		t.Fatal(err)
	}
	var tool *registry.Tool
	for i := range list {
		if list[i].Name == "leaky" {
			tool = &list[i]
		}
	}
	if tool == nil {
		t.Fatalf("the tool leaky was not stored: %d tools", len(list))
	}
	// The tool as the server sent it, kept as its version's definition.
	def, err := e.reg.ToolDefinition(ctx, tool.ID, tool.VersionMajor, tool.VersionMinor)
	if err != nil {
		t.Fatal(err)
	}
	for what, v := range map[string]any{"the tool": tool, "its definition": def} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), secret[3:]) {
			t.Errorf("%s as stored shows the server's secret: %s", what, b)
		}
	}
	if want := "Calls the API with key " + secrets.Masked; tool.Description != want {
		t.Errorf("description %q, want %q", tool.Description, want)
	}
	if !strings.Contains(string(tool.InputSchema), "defaults to "+secrets.Masked) {
		t.Errorf("input schema %s, want the secret masked in it", tool.InputSchema)
	}

	res, err := e.mgr.Discover(ctx, sv.ID, audit.System)
	if err != nil || res.Added != 0 || res.Updated != 0 {
		t.Fatalf("the next discovery: %+v, %v; want nothing changed", res, err)
	}
}
