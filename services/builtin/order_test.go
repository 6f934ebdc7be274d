package builtin_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/builtin"
	"github.com/toolwarden/toolwarden/services/registry"
)

// builtinOrder is the order the built-in tools are listed in: by name, as the go-sdk
// server lists its tools and the registry lists a server's tools.
const builtinOrder = "file_operations memory_operations terminal_operations think user_collaboration"

// The built-in server lists its tools in one order: however often they are listed,
// whatever order they were added in (a restart that builds them otherwise), through the
// server's MCP session and after discovery in the registry.
func TestBuiltinToolOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	listed := func(names []string) string { return strings.Join(names, " ") }

	// Two servers, the tools added in opposite orders, each listed three times.
	for _, reversed := range []bool{false, true} {
		b, err := builtin.New(&builtin.Options{Root: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		ts, err := builtin.NewTerminals(builtin.TerminalOptions{Root: b.Root(), Env: []string{"HOME=" + t.TempDir()}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(ts.Close)
		tools := []builtin.Tool{builtin.Memory(nil), builtin.Think(), builtin.TerminalTool(ts), b.FileOperations(), builtin.UserCollaboration(nil)}
		for i := range tools {
			if reversed {
				i = len(tools) - 1 - i
			}
			b.Add(tools[i])
		}
		cs := connect(t, b)
		for range 3 {
			if got := listed(listNames(t, cs)); got != builtinOrder {
				t.Fatalf("added reversed=%v: tools/list %q, want %q", reversed, got, builtinOrder)
			}
		}
	}

	// The running server: its session and the registry after each discovery.
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	sv, err := srv.Registry.GetServerByName(ctx, registry.BuiltinName)
	if err != nil {
		t.Fatal(err)
	}
	var cs *mcp.ClientSession
	webtest.WaitFor(t, 10*time.Second, func() bool { cs, err = srv.MCP.Session(sv.ID); return err == nil }, "the built-in server's session")
	for i := range 3 {
		if got := listed(listNames(t, cs)); got != builtinOrder {
			t.Fatalf("the running server's tools/list %q, want %q", got, builtinOrder)
		}
		if _, err := srv.MCP.Discover(ctx, sv.ID, audit.System); err != nil {
			t.Fatal(err)
		}
		stored, err := srv.Registry.ServerTools(ctx, sv.ID)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tool := range stored {
			names = append(names, strings.TrimPrefix(tool.Name, registry.BuiltinName+"__"))
		}
		if got := listed(names); got != builtinOrder {
			t.Fatalf("the registry's tools of builtin after discovery %d: %q, want %q", i+1, got, builtinOrder)
		}
	}
}

// listNames is the names a tools/list of cs answers, in its order.
func listNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	return names
}
