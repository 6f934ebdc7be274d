package builtin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/callmeta"
	"github.com/toolwarden/toolwarden/services/builtin"
	"github.com/toolwarden/toolwarden/services/verr"
)

// A write that fails part-way leaves the file as it was, whole: an edit, an overwrite,
// a new file and a restore each write a file beside the target and rename it over, so
// a full disk (here the file size limit, RLIMIT_FSIZE, which fails a write past it with
// EFBIG as a full disk does with ENOSPC) never leaves a file cut short, and leaves no
// file behind. A write that did change something before it failed (it made the new
// file's directories) keeps its snapshot and names it, and restoring that undoes it.
// Before, the file was truncated and half written, and the snapshot of its old bytes
// deleted.
func TestFailedWriteLeavesTheFileWhole(t *testing.T) {
	// Not parallel: the limit is the whole process's.
	f := newFilesFx(t)
	ws := f.ws("c1")
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	orig := "head\n" + strings.Repeat("an original line\n", 400) // about 7 KiB
	big := strings.Repeat("x", 64<<10)
	write("a.txt", orig)
	// The restore's snapshot is taken before the limit: it keeps 64 KiB.
	write("c.txt", big)
	res := f.call("c1", args{"operation": "create_file", "filePath": "c.txt", "content": "small\n", "overwrite": true})
	snap, _ := structured(t, res)["snapshotId"].(string)
	if snap == "" {
		t.Fatalf("the overwrite's snapshot: %s", text(res))
	}

	var was syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &was); err != nil {
		t.Fatal(err)
	}
	lim := was
	lim.Cur = 32 << 10
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Skipf("cannot limit the file size: %v", err)
	}
	lifted := false
	lift := func() {
		if !lifted {
			lifted = true
			if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &was); err != nil {
				t.Fatal(err)
			}
		}
	}
	defer lift()

	f.fails("c1", args{"operation": "replace_string", "filePath": "a.txt", "oldString": "head\n", "newString": big}, "a.txt")
	f.fails("c1", args{"operation": "create_file", "filePath": "a.txt", "content": big, "overwrite": true}, "a.txt")
	if got := string(readBytes(t, filepath.Join(ws, "a.txt"))); got != orig {
		t.Fatalf("a.txt after the failed writes: %d bytes, want %d", len(got), len(orig))
	}
	f.fails("c1", args{"operation": "create_file", "filePath": "new.txt", "content": big}, "new.txt")
	if _, err := os.Lstat(filepath.Join(ws, "new.txt")); !os.IsNotExist(err) {
		t.Fatalf("the failed new file: %v", err)
	}
	f.fails("c1", args{"operation": "restore_snapshot", "snapshotId": snap}, "c.txt")
	if got := string(readBytes(t, filepath.Join(ws, "c.txt"))); got != "small\n" {
		t.Fatalf("c.txt after the failed restore: %d bytes", len(got))
	}
	res = f.fails("c1", args{"operation": "create_file", "filePath": "made/dirs/new.txt", "content": big}, "restore_snapshot")
	made, _ := structured(t, res)["snapshotId"].(string)
	if made == "" {
		t.Fatalf("the failed write that made directories names no snapshot: %v", res.StructuredContent)
	}
	lift()

	ents, err := os.ReadDir(ws)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tw-") {
			t.Errorf("a temporary file was left: %s", e.Name())
		}
	}
	f.ok("c1", args{"operation": "restore_snapshot", "snapshotId": made})
	if _, err := os.Lstat(filepath.Join(ws, "made")); !os.IsNotExist(err) {
		t.Fatalf("the directories the failed write made, after its restore: %v", err)
	}
	// And with room, the writes happen, keeping the file's mode.
	if err := os.Chmod(filepath.Join(ws, "a.txt"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.ok("c1", args{"operation": "replace_string", "filePath": "a.txt", "oldString": "head\n", "newString": big})
	if fi, err := os.Stat(filepath.Join(ws, "a.txt")); err != nil || fi.Size() != int64(len(orig)-5+len(big)) || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the edit with room: %v %v", fi, err)
	}
}

// fakeConvs owns workspaces as services/grants does: the first person to call in a
// conversation owns its workspace.
type fakeConvs struct {
	mu     sync.Mutex
	owners map[string]string // workspace directory → owner
}

func (c *fakeConvs) Claim(_ context.Context, _, dir, user, _ string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if o, ok := c.owners[dir]; ok {
		return o, nil
	}
	c.owners[dir] = user
	return user, nil
}

func (c *fakeConvs) OwnerOfDir(_ context.Context, dir string) (string, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o, ok := c.owners[dir]
	return o, ok, nil
}

func (c *fakeConvs) DirsOf(_ context.Context, user string) (map[string]bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]bool{}
	for d, o := range c.owners {
		if o == user {
			out[d] = true
		}
	}
	return out, nil
}

func (c *fakeConvs) OwnerOf(ctx context.Context, conv string) (string, bool, error) {
	return c.OwnerOfDir(ctx, conv)
}

// restore_snapshot is held to the path guard as the write it undoes was: outside the
// conversation's workspace it needs a grant of its own (for restore_snapshot), and a
// workspace another person has claimed since is refused, whatever the grants. Before,
// only the snapshot's conversation was checked, so a one-time grant's write could be
// repeated for as long as the snapshots lasted, restoring one after the other, and
// into a workspace that was another person's by then. The check before approval
// agrees.
func TestRestoreIsGuarded(t *testing.T) {
	t.Parallel()
	g := &fakeGrants{allow: map[string]bool{}, once: map[string]bool{}}
	convs := &fakeConvs{owners: map[string]string{}}
	b, err := builtin.New(&builtin.Options{Root: filepath.Join(t.TempDir(), "root"), Grants: g, Conversations: convs})
	if err != nil {
		t.Fatal(err)
	}
	b.Add(b.FileOperations())
	cs := connect(t, b)
	n := 0
	call := func(user, conv string, a args) *mcp.CallToolResult {
		t.Helper()
		n++
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "file_operations", Arguments: a,
			Meta: mcp.Meta{callmeta.Key: callmeta.Meta{ConversationID: conv, UserID: user, CallID: fmt.Sprintf("call-%d", n)}}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	spare, err := b.Workspace("spare") // no conversation claimed it
	if err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(spare, "shared.txt")
	if err := os.WriteFile(shared, []byte("theirs\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	content := func() string { return string(readBytes(t, shared)) }
	edit := func(from, to string) string {
		t.Helper()
		k := "a1 file_operations.replace_string " + shared
		g.mu.Lock()
		g.allow[k], g.once[k] = true, true
		g.mu.Unlock()
		res := call("alice", "a1", args{"operation": "replace_string", "filePath": shared, "oldString": from, "newString": to})
		snap, _ := structured(t, res)["snapshotId"].(string)
		if res.IsError || snap == "" {
			t.Fatalf("the write on a one-time grant: %s", text(res))
		}
		return snap
	}
	restore := func(snap string) builtin.PreviewCall {
		a, _ := json.Marshal(args{"operation": "restore_snapshot", "snapshotId": snap})
		return builtin.PreviewCall{Tool: "file_operations", Arguments: a}
	}
	preflight := func(snap string) error {
		return b.Preflight(context.Background(), "file_operations", callmeta.Meta{ConversationID: "a1", UserID: "alice"}, restore(snap).Arguments)
	}

	snap := edit("theirs", "mine")
	// The grant is used: undoing the write, or doing it again by undoing the undo, needs
	// another.
	var ve *verr.Error
	if err := preflight(snap); !errors.As(err, &ve) || !strings.Contains(ve.For("/snapshotId"), "authorization required") {
		t.Fatalf("the check before approval of a restore outside the workspace: %v", err)
	}
	res := call("alice", "a1", args{"operation": "restore_snapshot", "snapshotId": snap})
	if sc := structured(t, res); !res.IsError || sc["authorizationKey"] != "file_operations.restore_snapshot" || sc["attemptedPath"] != shared {
		t.Fatalf("a restore outside the workspace with no grant: %s %v", text(res), sc)
	}
	if got := content(); got != "mine\n" {
		t.Fatalf("the refused restore wrote: %q", got)
	}
	g.mu.Lock()
	g.allow["a1 file_operations.restore_snapshot "+shared] = true
	g.mu.Unlock()
	if err := preflight(snap); err != nil {
		t.Fatalf("the check before approval, with a grant: %v", err)
	}
	if res := call("alice", "a1", args{"operation": "restore_snapshot", "snapshotId": snap}); res.IsError || content() != "theirs\n" {
		t.Fatalf("the restore on a grant: %s, the file %q", text(res), content())
	}

	// Another person claims the workspace: no grant lets alice restore there now.
	snap = edit("theirs", "alice's")
	if res := call("bob", "spare", args{"operation": "list_dir"}); res.IsError {
		t.Fatalf("bob in his conversation: %s", text(res))
	}
	g.mu.Lock()
	g.allow["a1 file_operations.restore_snapshot "] = true
	g.mu.Unlock()
	if err := preflight(snap); !errors.As(err, &ve) || !strings.Contains(ve.For("/snapshotId"), "another person's workspace") {
		t.Fatalf("the check before approval of a restore into another person's workspace: %v", err)
	}
	if res := call("alice", "a1", args{"operation": "restore_snapshot", "snapshotId": snap}); !res.IsError || !strings.Contains(text(res), "another person's workspace") {
		t.Fatalf("a restore into another person's workspace: %s", text(res))
	}
	if got := content(); got != "alice's\n" {
		t.Fatalf("the refused restore wrote: %q", got)
	}
}

// A restore writes every path its snapshot kept, and a grant for one of them is no
// grant for the others: undoing a rename of a.txt to b.txt in another workspace
// removes b.txt and writes a.txt back, so a grant for b.txt alone is refused, naming
// a.txt, before anything is written; with a grant with no target (one-time, too) it
// runs. Before, one path of each workspace was checked, and a.txt, rewritten since,
// was overwritten on the grant for b.txt.
func TestRestoreNeedsEveryPath(t *testing.T) {
	t.Parallel()
	f := newFilesFx(t)
	f.ws("c1")
	proj := f.ws("proj")
	a, b := filepath.Join(proj, "a.txt"), filepath.Join(proj, "b.txt")
	if err := os.WriteFile(a, []byte("first\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.grants.allow["c1 file_operations.rename_file "] = true
	res := f.call("c1", args{"operation": "rename_file", "filePath": a, "newPath": b})
	snap, _ := structured(t, res)["snapshotId"].(string)
	if res.IsError || snap == "" {
		t.Fatalf("the rename: %s", text(res))
	}
	f.grants.allow["c1 file_operations.create_file "+a] = true
	f.ok("c1", args{"operation": "create_file", "filePath": a, "content": "rewritten\n"})

	f.grants.allow["c1 file_operations.restore_snapshot "+b] = true
	res = f.fails("c1", args{"operation": "restore_snapshot", "snapshotId": snap}, "authorize_operation")
	if sc := structured(t, res); sc["attemptedPath"] != a || sc["authorizationKey"] != "file_operations.restore_snapshot" {
		t.Fatalf("the restore on a grant for b.txt alone: %s %v", text(res), sc)
	}
	if got := string(readBytes(t, a)); got != "rewritten\n" {
		t.Fatalf("the refused restore overwrote a.txt: %q", got)
	}
	if got := string(readBytes(t, b)); got != "first\n" {
		t.Fatalf("the refused restore changed b.txt: %q", got)
	}
	err := f.b.Preflight(context.Background(), "file_operations", callmeta.Meta{ConversationID: "c1"}, json.RawMessage(`{"operation":"restore_snapshot","snapshotId":"`+snap+`"}`))
	var ve *verr.Error
	if !errors.As(err, &ve) || !strings.Contains(ve.For("/snapshotId"), a) {
		t.Fatalf("the check before approval: %v", err)
	}

	delete(f.grants.allow, "c1 file_operations.restore_snapshot "+b)
	k := "c1 file_operations.restore_snapshot "
	f.grants.allow[k] = true
	f.grants.once = map[string]bool{k: true}
	f.ok("c1", args{"operation": "restore_snapshot", "snapshotId": snap})
	if got := string(readBytes(t, a)); got != "first\n" {
		t.Fatalf("the restore on a one-time grant with no target: a.txt %q", got)
	}
	if _, err := os.Stat(b); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the restore left b.txt: %v", err)
	}
}

// A grant for one path of a rename or a copy is no grant for the other: a grant to
// rename README.md does not let the rename overwrite main.go. The rename is refused,
// naming newPath, before the grant is used; with a grant for each path (or one with no
// target: TestPathGuard) it runs. Before, the first path's grant let the second path
// skip the guard.
func TestGrantForOnePathIsNotForTheOther(t *testing.T) {
	t.Parallel()
	f := newFilesFx(t)
	f.ws("c1")
	proj := f.ws("proj")
	readme, main := filepath.Join(proj, "README.md"), filepath.Join(proj, "main.go")
	for p, content := range map[string]string{readme: "# readme\n", main: "package main\n"} {
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f.grants.allow["c1 file_operations.rename_file "+readme] = true
	f.grants.once = map[string]bool{"c1 file_operations.rename_file " + readme: true}
	f.grants.allow["c1 file_operations.copy_file "+readme] = true
	for _, op := range []string{"rename_file", "copy_file"} {
		res := f.fails("c1", args{"operation": op, "filePath": readme, "newPath": main, "overwrite": true}, "authorize_operation")
		if sc := structured(t, res); sc["attemptedPath"] != main || sc["authorizationKey"] != "file_operations."+op {
			t.Fatalf("%s onto main.go on a grant for README.md: %v", op, sc)
		}
		if got := string(readBytes(t, main)); got != "package main\n" {
			t.Fatalf("%s on a grant for README.md overwrote main.go: %q", op, got)
		}
	}
	if len(f.grants.asked) != 0 {
		t.Fatalf("the refused calls used grants: %v", f.grants.asked)
	}
	f.grants.allow["c1 file_operations.rename_file "+main] = true
	f.ok("c1", args{"operation": "rename_file", "filePath": readme, "newPath": main, "overwrite": true})
	if got := string(readBytes(t, main)); got != "# readme\n" {
		t.Fatalf("the rename on a grant for each path: %q", got)
	}
}

// A plan's copy or rename that overwrites newPath expects newPath as the preview showed
// it, as it expects its source: a destination edited since is stale (before the step
// runs, and in the call itself), and is not overwritten unseen. Before, only the
// source's fingerprint was kept and checked.
func TestMoveExpectsItsDestination(t *testing.T) {
	t.Parallel()
	f := newFilesFx(t)
	ws := f.ws("c1")
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.txt", "alpha\n")
	write("b.txt", "beta\n")
	ctx := context.Background()
	for _, op := range []string{"copy_file", "rename_file"} {
		a := args{"operation": op, "filePath": "a.txt", "newPath": "b.txt", "overwrite": true}
		raw, _ := json.Marshal(a)
		step := builtin.PreviewCall{Tool: "file_operations", Arguments: raw}
		ps, err := f.b.PreviewPlan(ctx, "c1", "", []builtin.PreviewCall{step})
		if err != nil || ps[0] == nil || !strings.Contains(ps[0].Diff, "-beta\n+alpha\n") {
			t.Fatalf("%s: the preview: %+v %v", op, ps, err)
		}
		want := ps[0].Fingerprint
		write("b.txt", "beta, edited since\n")
		if got, err := f.b.Fingerprint(ctx, "c1", step); err != nil || got == want {
			t.Fatalf("%s: the fingerprint after newPath changed: %q %v, the preview's %q", op, got, err, want)
		}
		run := func() *mcp.CallToolResult {
			res, err := f.cs.CallTool(ctx, &mcp.CallToolParams{Name: "file_operations", Arguments: a,
				Meta: mcp.Meta{callmeta.Key: callmeta.Meta{ConversationID: "c1", Expect: want}}})
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		if res := run(); !res.IsError || !strings.Contains(text(res), "stale: b.txt changed") {
			t.Fatalf("%s over a newPath changed since the preview: %s", op, text(res))
		}
		if got := string(readBytes(t, filepath.Join(ws, "b.txt"))); got != "beta, edited since\n" {
			t.Fatalf("%s: the stale step overwrote newPath: %q", op, got)
		}
		write("b.txt", "beta\n")
		if got, _ := f.b.Fingerprint(ctx, "c1", step); got != want {
			t.Fatalf("%s: the fingerprint as previewed: %q, want %q", op, got, want)
		}
		if res := run(); res.IsError {
			t.Fatalf("%s as previewed: %s", op, text(res))
		}
		write("a.txt", "alpha\n")
		write("b.txt", "beta\n")
	}
}

// Every write holds its paths' edit lock from its check of what a plan's step expects
// to its write, as text edits do: a write that comes while another edit of the file is
// under way waits for it, and then finds the file changed (stale) rather than
// overwriting, deleting or moving what the edit wrote. The test holds a.txt's lock as an
// edit in progress, lets the write reach the lock, changes a.txt, and lets go. Before,
// create_file, delete_file, rename_file and copy_file did not wait, and their check
// could pass on what the edit was about to replace.
func TestWritesWaitForEdits(t *testing.T) {
	t.Parallel()
	f := newFilesFx(t)
	ws := f.ws("c1")
	a, b := filepath.Join(ws, "a.txt"), filepath.Join(ws, "b.txt")
	ctx := context.Background()
	for _, c := range []args{
		{"operation": "create_file", "filePath": "a.txt", "content": "created\n", "overwrite": true},
		{"operation": "delete_file", "filePath": "a.txt"},
		{"operation": "rename_file", "filePath": "a.txt", "newPath": "b.txt"},
		{"operation": "copy_file", "filePath": "a.txt", "newPath": "b.txt"},
	} {
		op := c["operation"].(string)
		if err := os.WriteFile(a, []byte("before\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		_ = os.Remove(b)
		raw, _ := json.Marshal(c)
		ps, err := f.b.PreviewPlan(ctx, "c1", "", []builtin.PreviewCall{{Tool: "file_operations", Arguments: raw}})
		if err != nil || ps[0] == nil {
			t.Fatalf("%s: the preview: %+v %v", op, ps, err)
		}
		waiting := make(chan struct{}, 1)
		unlock := builtin.LockEditForTest(f.b, "c1", "a.txt", func() {
			select {
			case waiting <- struct{}{}:
			default:
			}
		})
		done := make(chan *mcp.CallToolResult, 1)
		go func() {
			res, err := f.cs.CallTool(ctx, &mcp.CallToolParams{Name: "file_operations", Arguments: c,
				Meta: mcp.Meta{callmeta.Key: callmeta.Meta{ConversationID: "c1", CallID: "wait-" + op, Expect: ps[0].Fingerprint}}})
			if err != nil {
				t.Error(err)
			}
			done <- res
		}()
		select {
		case <-waiting:
		case res := <-done:
			unlock()
			t.Fatalf("%s ran while an edit of a.txt held its lock: %s", op, text(res))
		}
		if err := os.WriteFile(a, []byte("edited\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		unlock()
		res := <-done
		if res == nil || !res.IsError || !strings.Contains(text(res), "stale") {
			t.Fatalf("%s after the edit it waited for: %v", op, res)
		}
		if got := string(readBytes(t, a)); got != "edited\n" {
			t.Fatalf("%s changed the edited a.txt: %q", op, got)
		}
		if _, err := os.Stat(b); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s wrote b.txt: %v", op, err)
		}
	}
}
