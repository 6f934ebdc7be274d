package builtin_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/callmeta"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/builtin"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/grants"
)

// A pattern may end in \Q with no \E (the rest is literal): wrapped in a group, that
// literal would take the group's closing parenthesis. Such a pattern is searched, not
// a panic (which the router counted against the whole built-in server).
func TestGrepQuoteWithoutEnd(t *testing.T) {
	t.Parallel()
	f := newFilesFx(t)
	if err := os.WriteFile(filepath.Join(f.ws("c1"), "a.txt"), []byte("x\na)b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{`\Qx`: "a.txt:1: x", `a\Q)`: "a.txt:2: a)b", `^a\Q)b`: "a.txt:2: a)b"} {
		res, err := f.callErr("c1", args{"operation": "grep_search", "pattern": p})
		if err != nil {
			t.Fatalf("grep_search %q: %v", p, err)
		}
		if got := text(res); res.IsError || got != want {
			t.Errorf("grep_search %q: %q, want %q", p, got, want)
		}
	}
}

// hooked is the grants service that calls after once, right after the first grant it
// lets be used: what a call in parallel does to another grant then lands between a
// write's look at its second path and that path's check.
type hooked struct {
	*grants.Service
	mu    sync.Mutex
	after func(target string)
}

func (h *hooked) Use(ctx context.Context, conv, op, target string) (bool, bool, error) {
	ok, anyTarget, err := h.Service.Use(ctx, conv, op, target)
	h.mu.Lock()
	after := h.after
	if ok {
		h.after = nil
	}
	h.mu.Unlock()
	if ok && after != nil {
		after(target)
	}
	return ok, anyTarget, err
}

// A two-path write (rename, copy, restore) goes on one grant only when that grant has
// no target. With a grant for each path, the second path needs its own grant when it
// is written, not only when it was looked at: a grant used up or revoked in between
// (by a create_file in parallel) no longer allows it. Before, a grant for the second
// path gone by then was taken for the first path's grant having no target, and the
// write went through: one one-time grant let the second path be written twice.
func TestTwoPathWriteNeedsEachPathsGrant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	gs := grants.New(pool, nil)
	h := &hooked{Service: gs}
	b, err := builtin.New(&builtin.Options{Root: filepath.Join(t.TempDir(), "root"), Grants: h, Conversations: gs})
	if err != nil {
		t.Fatal(err)
	}
	b.Add(b.FileOperations())
	var alice string
	if err := pool.QueryRow(ctx, `INSERT INTO users (username, role, password_hash) VALUES ('alice', 'tool_user', 'x') RETURNING id`).Scan(&alice); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, b)
	n := 0
	call := func(a args) *mcp.CallToolResult {
		t.Helper()
		n++
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "file_operations", Arguments: a,
			Meta: mcp.Meta{callmeta.Key: callmeta.Meta{ConversationID: "c1", UserID: alice, CallID: fmt.Sprintf("call-%d", n)}}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	fails := func(a args) {
		t.Helper()
		if res := call(a); !res.IsError || !strings.Contains(text(res), "authorize_operation") {
			t.Fatalf("%v: got %v %q, want a refusal saying what to ask for", a, res.IsError, text(res))
		}
	}
	other, err := b.Workspace("c2") // no conversation claimed it: reading or writing there needs a grant
	if err != nil {
		t.Fatal(err)
	}
	a, bp := filepath.Join(other, "a.txt"), filepath.Join(other, "b.txt")
	grant := func(op, target string) grants.Grant {
		t.Helper()
		g, err := gs.Create(ctx, grants.Spec{ConversationID: "c1", Operation: op, Target: target, OneTime: true, By: audit.System})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	exists := func(p string) bool {
		_, err := os.Stat(p)
		return err == nil
	}
	reset := func() {
		t.Helper()
		_ = os.Remove(bp)
		if err := os.WriteFile(a, []byte("a\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// takesB: a create_file of b.txt in parallel uses B (a grant for every operation
	// of file_operations on b.txt); revokes: the person revokes it.
	takesB := func(string) {
		if ok, err := gs.Allow(ctx, "c1", "file_operations.create_file", bp); err != nil || !ok {
			t.Errorf("the create_file in parallel: %v %v", ok, err)
		}
	}
	revokes := func(id string) func(string) {
		return func(string) {
			if _, err := gs.Revoke(ctx, audit.System, id, false); err != nil {
				t.Errorf("revoking: %v", err)
			}
		}
	}

	for _, op := range []string{"rename_file", "copy_file"} {
		for _, revoke := range []bool{false, true} {
			reset()
			grant("file_operations."+op, a)
			gb := grant("file_operations", bp)
			h.after = takesB
			if revoke {
				h.after = revokes(gb.ID)
			}
			fails(args{"operation": op, "filePath": a, "newPath": bp})
			if exists(bp) {
				t.Fatalf("%s (B revoked: %v) wrote %s with its grant gone", op, revoke, bp)
			}
		}
	}

	// With both grants there when it runs, the rename uses both.
	reset()
	grant("file_operations.rename_file", a)
	grant("file_operations", bp)
	if res := call(args{"operation": "rename_file", "filePath": a, "newPath": bp}); res.IsError {
		t.Fatalf("a rename with a grant for each path: %s", text(res))
	}
	if has, err := gs.Has(ctx, "c1", "file_operations.create_file", bp); err != nil || has {
		t.Fatalf("the rename left the grant for b.txt: %v %v", has, err)
	}
	// One grant with no target covers both paths of one rename, once.
	reset()
	grant("file_operations.rename_file", "")
	res := call(args{"operation": "rename_file", "filePath": a, "newPath": bp})
	snap, _ := structured(t, res)["snapshotId"].(string)
	if res.IsError || snap == "" || exists(a) || !exists(bp) {
		t.Fatalf("a rename on a grant with no target: %s", text(res))
	}
	if has, err := gs.Has(ctx, "c1", "file_operations.rename_file", a); err != nil || has {
		t.Fatalf("the one-time grant with no target is left: %v %v", has, err)
	}

	// Restoring that rename writes both paths: a grant for one and a grant for the
	// other, the second revoked after the first is used, do not restore it.
	ga := grant("file_operations.restore_snapshot", a)
	gb := grant("file_operations.restore_snapshot", bp)
	h.after = func(used string) {
		id := gb.ID
		if used == bp {
			id = ga.ID
		}
		revokes(id)(used)
	}
	fails(args{"operation": "restore_snapshot", "snapshotId": snap})
	if exists(a) || !exists(bp) {
		t.Fatalf("the restore wrote with its second grant revoked: a.txt %v, b.txt %v", exists(a), exists(bp))
	}
}
