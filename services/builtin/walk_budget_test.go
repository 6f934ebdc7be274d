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

// runFileOp runs file_operations with args in conversation c1 of s, returning the
// result's text and structured content.
func runFileOp(t *testing.T, s *Server, ws, args string) (string, map[string]any) {
	t.Helper()
	op, err := s.tools["file_operations"].operation(json.RawMessage(args))
	if err != nil {
		t.Fatal(err)
	}
	meta := callmeta.Meta{ConversationID: "c1", CallID: "call-1"}
	res, err := op.Run(callmeta.With(context.Background(), meta), Call{Meta: meta, Workspace: ws}, json.RawMessage(args))
	if err != nil {
		t.Fatal(err)
	}
	text := ""
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text += tc.Text
		}
	}
	if res.IsError {
		t.Fatalf("%s: %s", args, text)
	}
	sc, _ := res.StructuredContent.(map[string]any)
	return text, sc
}

// A search reads at most maxWalkEntries directory entries in all, however they are
// spread over levels (each level's are held while the walk is below it), and says
// where it stopped. Not parallel: it lowers the package's bound.
func TestWalkEntriesBoundedInAll(t *testing.T) {
	old := maxWalkEntries
	maxWalkEntries = 10
	t.Cleanup(func() { maxWalkEntries = old })
	s, ws := fileServer(t)
	// Three directories of five files: 3 + 5 entries leave 2 for b, and none for c.
	for _, d := range []string{"a", "b", "c"} {
		if err := os.Mkdir(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			if err := os.WriteFile(filepath.Join(ws, d, string(rune('0'+i))+".txt"), []byte("needle\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	text, sc := runFileOp(t, s, ws, `{"operation":"file_search","pattern":"*.txt"}`)
	files, _ := sc["files"].([]string)
	if len(files) != 7 || strings.Contains(text, "c/") {
		t.Errorf("file_search read %d files past a bound of 10 entries (3 dirs, 5 then 2): %s", len(files), text)
	}
	want := "[… the search reads at most 10 directory entries in all: b and 1 other directory after it were not fully searched]"
	if !strings.Contains(text, want) {
		t.Errorf("file_search's note: %q; want %q", text, want)
	}
	text, sc = runFileOp(t, s, ws, `{"operation":"grep_search","pattern":"needle"}`)
	if m, _ := sc["matches"].([]grepMatch); len(m) != 7 || !strings.Contains(text, want) {
		t.Errorf("grep_search past a bound of 10 entries: %d matches, %s", len(m), text)
	}
}
