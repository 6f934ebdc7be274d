package mcpclient_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/everything"
	"github.com/toolwarden/toolwarden/services/registry"
)

// TestEverything connects to @modelcontextprotocol/server-everything over each
// transport: connected, all 14 tools discovered with their annotations, and the two
// list_changed notifications it sends right after connecting handled by one discovery.
func TestEverything(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, typ, mode string }{
		{"stdio", registry.TypeStdio, ""},
		{"sse", registry.TypeSSE, "sse"},
		{"streamable_http", registry.TypeStreamableHTTP, "streamableHttp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := start(t, nil)
			spec := registry.Spec{Name: "everything", Type: tc.typ, Enabled: true}
			if tc.typ == registry.TypeStdio {
				spec.Command, spec.Args = everything.StdioCommand(t)
			} else {
				spec.URL = everything.StartHTTP(t, tc.mode).URL
			}
			sv := env.create(t, spec)
			env.waitStatus(t, sv.ID, registry.StatusConnected)
			runs := env.waitRuns(t, sv.ID, 1)
			if runs[0].Added != everything.ToolCount || runs[0].Trigger != "connect" {
				t.Fatalf("first discovery: got trigger %s, %d added, want connect, %d", runs[0].Trigger, runs[0].Added, everything.ToolCount)
			}
			tools, err := env.reg.ServerTools(context.Background(), sv.ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(tools) != everything.ToolCount {
				t.Fatalf("got %d tools, want %d", len(tools), everything.ToolCount)
			}
			byName := map[string]registry.Tool{}
			for _, tl := range tools {
				byName[tl.Name] = tl
			}
			var ann mcp.ToolAnnotations
			if err := json.Unmarshal(byName["echo"].Annotations, &ann); err != nil || !ann.ReadOnlyHint {
				t.Fatalf("echo annotations: got %s (%v), want readOnlyHint true", byName["echo"].Annotations, err)
			}
			if _, ok := byName["get-roots-list"]; !ok {
				t.Fatalf("get-roots-list missing: the roots capability was not declared")
			}
			got, _ := env.reg.GetServer(context.Background(), sv.ID)
			if got.Info.Name == "" || got.Info.ProtocolVersion == "" || got.LastConnected == nil {
				t.Fatalf("server info not recorded: %+v", got.Info)
			}
			if len(got.Resources) == 0 || len(got.Prompts) == 0 {
				t.Fatalf("resources/prompts not recorded: %d resources, %d prompts", len(got.Resources), len(got.Prompts))
			}
			// Long after the debounce window, still exactly one run.
			never(t, 5*env.opts.Debounce, func() bool { return len(env.runs(t, sv.ID)) != 1 },
				"a second discovery ran after connect: list_changed was not debounced")
			cs, err := env.mgr.Session(sv.ID)
			if err != nil {
				t.Fatal(err)
			}
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hi"}})
			if err != nil || res.IsError || len(res.Content) == 0 {
				t.Fatalf("echo: got %+v, %v", res, err)
			}
		})
	}
}
