package builtin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/callmeta"
)

// A search cancelled (or timed out) while it matches a large file stops within the
// file: a match cannot be stopped, so the file is matched in pieces between which the
// call's context is checked.
func TestGrepStopsWithinFileWhenCancelled(t *testing.T) {
	t.Parallel()
	s, ws := fileServer(t)
	// 8 MiB of lines, the only match on the last.
	body := strings.Repeat("some ordinary line of text\n", 8<<20/27) + "needle\n"
	if err := os.WriteFile(filepath.Join(ws, "big.txt"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.beforeGrepFile = cancel // the search has read the file and is about to match it
	args := json.RawMessage(`{"operation":"grep_search","pattern":"needle"}`)
	op, err := s.tools["file_operations"].operation(args)
	if err != nil {
		t.Fatal(err)
	}
	meta := callmeta.Meta{ConversationID: "c1", CallID: "call-1"}
	res, err := op.Run(callmeta.With(ctx, meta), Call{Meta: meta, Workspace: ws}, args)
	if err != nil {
		t.Fatal(err)
	}
	got := ""
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			got += tc.Text
		}
	}
	if !res.IsError || !strings.Contains(got, context.Canceled.Error()) {
		t.Errorf("a search cancelled within a file: error %v, %s; want %q", res.IsError, got, context.Canceled)
	}
}
