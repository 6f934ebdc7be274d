package builtin_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/callmeta"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/builtin"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/grants"
)

// A copy whose second path is in a workspace that does not exist is refused before its
// first path uses its one-time grant: the copy could not happen, and the grant stays
// for the write it was given for. (Calls reach the server here without the router's
// pre-approval check, as one whose workspace went away in between does.)
func TestTwoPathWriteToAMissingWorkspaceKeepsTheGrant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	gs := grants.New(pool, nil)
	b, err := builtin.New(&builtin.Options{Root: filepath.Join(t.TempDir(), "root"), Grants: gs, Conversations: gs})
	if err != nil {
		t.Fatal(err)
	}
	b.Add(b.FileOperations())
	var alice string
	if err := pool.QueryRow(ctx, `INSERT INTO users (username, role, password_hash) VALUES ('alice', 'tool_user', 'x') RETURNING id`).Scan(&alice); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, b)
	other, err := b.Workspace("c2") // no conversation claimed it: reading it needs a grant
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(other, "a.txt")
	if err := os.WriteFile(src, []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := gs.Create(ctx, grants.Spec{ConversationID: "c1", Operation: "file_operations.copy_file", Target: src, OneTime: true, By: audit.System}); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(filepath.Dir(other), "nowhere", "b.txt")
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "file_operations",
		Arguments: args{"operation": "copy_file", "filePath": src, "newPath": dst},
		Meta:      mcp.Meta{callmeta.Key: callmeta.Meta{ConversationID: "c1", UserID: alice, CallID: "call-1"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(text(res), "not a workspace this conversation can reach") {
		t.Fatalf("copy into a missing workspace: %v %q, want it refused as unreachable", res.IsError, text(res))
	}
	if ok, err := gs.Has(ctx, "c1", "file_operations.copy_file", src); err != nil || !ok {
		t.Fatalf("the one-time grant for the first path after the refused copy: %v %v, want it still there", ok, err)
	}
}
