package gateway_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/tools"
)

// A real MCP client calls a built-in operation by its dotted name through /mcp,
// builtin__file_operations.read_file, and gets the file of its conversation's
// workspace (the conversation from _meta); the dotted name of an operation the tool
// does not have is refused the MCP way. In both protocol eras.
func TestDottedBuiltinThroughGateway(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	tg := srv.App.Enable(t, "builtin__file_operations")
	low := "low" // a read needs no approval, so the call returns at once
	if _, err := srv.App.Tools.Update(ctx, audit.System, tg.ID, tools.Patch{Risk: &low, MayLowerRisk: true, Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	token := srv.Token(t, "admin")
	for _, era := range eras {
		conv := "conv-mcp-" + era
		ws, err := srv.App.Builtin.Workspace(conv)
		if err != nil {
			t.Fatal(err)
		}
		content := "hello from " + era + "\nsecond line\n"
		if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		cs := mustConnect(t, srv, token, era)
		call := func(name string, args map[string]any) (*mcp.CallToolResult, error) {
			return cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args, Meta: mcp.Meta{"conversation_id": conv}})
		}
		var res *mcp.CallToolResult
		// The risk setting reaches the router's snapshot through the bus.
		webtest.WaitFor(t, 10*time.Second, func() bool {
			res, err = call("builtin__file_operations.read_file", map[string]any{"filePath": "notes.txt"})
			return err == nil && !res.IsError
		}, "read_file through /mcp")
		if got := text(res); got != content {
			t.Fatalf("%s: read_file by its dotted name: %q, want %q", era, got, content)
		}
		res, err = call("builtin__file_operations.read_file", map[string]any{"filePath": "notes.txt", "offset": 1})
		if err != nil || res.IsError || text(res) != "second line\n" {
			t.Fatalf("%s: read_file from line 1: %v %+v", era, err, res)
		}
		res, err = call("builtin__file_operations.shred_file", map[string]any{"filePath": "notes.txt"})
		if err == nil && !res.IsError {
			t.Fatalf("%s: an unknown operation by its dotted name ran: %q", era, text(res))
		}
		if got := errText(err, res); !strings.Contains(got, "operation: value must be one of 'read_file'") {
			t.Fatalf("%s: an unknown operation: %q does not list the operations", era, got)
		}
	}
}

// errText is a refused call's message: the protocol error, or the error result's text.
func errText(err error, res *mcp.CallToolResult) string {
	if err != nil {
		return err.Error()
	}
	return text(res)
}
