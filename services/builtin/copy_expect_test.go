package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/callmeta"
)

// A plan's copy_file copies the very bytes it checked against the step's preview. The
// edit lock does not stop a terminal command (or any writer outside Toolwarden), so the
// test rewrites the source once the copy has checked it, as such a writer could. Before,
// the copy fingerprinted one read of the source and copied a second one, so newPath
// got content nobody approved and the step was not refused as stale.
func TestCopyWritesTheBytesItChecked(t *testing.T) {
	t.Parallel()
	s, ws := fileServer(t)
	src, dst := filepath.Join(ws, "a.txt"), filepath.Join(ws, "b.txt")
	if err := os.WriteFile(src, []byte("approved\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args, _ := json.Marshal(map[string]any{"operation": "copy_file", "filePath": "a.txt", "newPath": "b.txt"})
	ctx := context.Background()
	ps, err := s.PreviewPlan(ctx, "c1", "", []PreviewCall{{Tool: "file_operations", Arguments: args}})
	if err != nil || ps[0] == nil || !strings.Contains(ps[0].Diff, "+approved\n") {
		t.Fatalf("the copy's preview: %+v %v", ps, err)
	}
	rewritten := false
	s.afterEditRead = func() {
		rewritten = true
		if err := os.WriteFile(src, []byte("unapproved\n"), 0o644); err != nil {
			t.Error(err)
		}
	}
	op, err := s.tools["file_operations"].operation(args)
	if err != nil {
		t.Fatal(err)
	}
	meta := callmeta.Meta{ConversationID: "c1", CallID: "copy", Expect: ps[0].Fingerprint}
	res, err := op.Run(callmeta.With(ctx, meta), Call{Meta: meta, Workspace: ws}, args)
	if err != nil {
		t.Fatal(err)
	}
	if !rewritten {
		t.Fatal("the copy never reached the point where its source is rewritten")
	}
	msg := res.Content[0].(*mcp.TextContent).Text
	b, err := os.ReadFile(dst)
	switch {
	case res.IsError && strings.Contains(msg, "stale"):
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the copy was refused as stale (%s) but wrote b.txt: %q %v", msg, b, err)
		}
	case res.IsError:
		t.Errorf("the copy failed, not as stale: %s", msg)
	case err != nil:
		t.Errorf("the copy succeeded (%s) but b.txt: %v", msg, err)
	case string(b) != "approved\n":
		t.Errorf("the copy wrote %q to b.txt; the approved preview showed %q", b, "approved\n")
	}
}
