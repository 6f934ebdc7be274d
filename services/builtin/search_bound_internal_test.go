package builtin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/callmeta"
)

// Searches walk maxSearches at a time: one more waits for a place, and gives up when
// its call ends; once a place is free it runs.
func TestSearchesBounded(t *testing.T) {
	t.Parallel()
	s, ws := fileServer(t)
	s.searches = make(chan struct{}, 1)
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("needle\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	search := func(ctx context.Context, args string) (string, bool) {
		op, err := s.tools["file_operations"].operation(json.RawMessage(args))
		if err != nil {
			t.Error(err)
			return "", true
		}
		meta := callmeta.Meta{ConversationID: "c1", CallID: "call-1"}
		res, err := op.Run(callmeta.With(ctx, meta), Call{Meta: meta, Workspace: ws}, json.RawMessage(args))
		if err != nil {
			return err.Error(), true
		}
		got := ""
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				got += tc.Text
			}
		}
		return got, res.IsError
	}
	inFile, release := make(chan struct{}), make(chan struct{})
	s.beforeGrepFile = func() { close(inFile); <-release }
	first := make(chan string, 1)
	go func() {
		got, _ := search(context.Background(), `{"operation":"grep_search","pattern":"needle"}`)
		first <- got
	}()
	<-inFile // the first search holds the only place

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if got, isErr := search(ctx, `{"operation":"file_search","pattern":"*.txt"}`); !isErr || !strings.Contains(got, context.DeadlineExceeded.Error()) {
		t.Errorf("a second search while the first walks: error %v, %s; want it to wait and time out", isErr, got)
	}
	close(release)
	if got := <-first; !strings.Contains(got, "needle") {
		t.Errorf("the first search: %s", got)
	}
	if got, isErr := search(context.Background(), `{"operation":"file_search","pattern":"*.txt"}`); isErr || !strings.Contains(got, "a.txt") {
		t.Errorf("a search once the place is free: error %v, %s", isErr, got)
	}
}
