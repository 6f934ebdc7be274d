package builtin_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/callmeta"
	"github.com/toolwarden/toolwarden/services/builtin"
)

// fakeGrants allows what allow lists ("conversation operation path"; with no path, a
// grant with no target, for any path), once for what once lists too.
type fakeGrants struct {
	mu    sync.Mutex
	allow map[string]bool
	once  map[string]bool
	asked []string
}

// grant is the key of allow that lets conv do op on target ("" for none).
func (g *fakeGrants) grant(conv, op, target string) string {
	for _, k := range []string{conv + " " + op + " " + target, conv + " " + op + " "} {
		if g.allow[k] {
			return k
		}
	}
	return ""
}

// Use tells fakeGrants' grants with no target from the others, as grants.Service does.
func (g *fakeGrants) Use(_ context.Context, conv, op, target string) (bool, bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asked = append(g.asked, conv+" "+op+" "+target)
	k := g.grant(conv, op, target)
	if g.once[k] {
		delete(g.allow, k)
	}
	return k != "", k != "" && k == conv+" "+op+" ", nil
}

func (g *fakeGrants) Has(_ context.Context, conv, op, target string) (bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.grant(conv, op, target) != "", nil
}

type filesFx struct {
	t      testing.TB
	b      *builtin.Server
	cs     *mcp.ClientSession
	root   string
	grants *fakeGrants
	n      atomic.Int64
}

func newFilesFx(t testing.TB) *filesFx {
	t.Helper()
	g := &fakeGrants{allow: map[string]bool{}}
	root := filepath.Join(t.TempDir(), "root")
	b, err := builtin.New(&builtin.Options{Root: root, Grants: g})
	if err != nil {
		t.Fatal(err)
	}
	b.Add(b.FileOperations())
	return &filesFx{t: t, b: b, cs: connect(t, b), root: b.Root(), grants: g}
}

// call runs file_operations in conversation conv.
func (f *filesFx) call(conv string, args map[string]any) *mcp.CallToolResult {
	f.t.Helper()
	res, err := f.callErr(conv, args)
	if err != nil {
		f.t.Fatal(err)
	}
	return res
}

func (f *filesFx) callErr(conv string, args map[string]any) (*mcp.CallToolResult, error) {
	id := fmt.Sprintf("call-%d", f.n.Add(1))
	return f.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "file_operations", Arguments: args,
		Meta: mcp.Meta{callmeta.Key: callmeta.Meta{ConversationID: conv, CallID: id}}})
}

// ok runs a call that must succeed and returns its text.
func (f *filesFx) ok(conv string, args map[string]any) string {
	f.t.Helper()
	res := f.call(conv, args)
	if res.IsError {
		f.t.Fatalf("%v: %s", args, text(res))
	}
	return text(res)
}

// fails runs a call that must fail with an error containing want.
func (f *filesFx) fails(conv string, args map[string]any, want string) *mcp.CallToolResult {
	f.t.Helper()
	res := f.call(conv, args)
	if !res.IsError || !strings.Contains(text(res), want) {
		f.t.Fatalf("%v: got %v %q, want an error containing %q", args, res.IsError, text(res), want)
	}
	return res
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

func structured(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	b, _ := json.Marshal(res.StructuredContent)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

func (f *filesFx) ws(conv string) string {
	f.t.Helper()
	d, err := f.b.Workspace(conv)
	if err != nil {
		f.t.Fatal(err)
	}
	return d
}

func readBytes(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type args = map[string]any

// Every operation of file_operations in the conversation's workspace, and each
// operation's display line.
func TestFileOperations(t *testing.T) {
	t.Parallel()
	f := newFilesFx(t)
	ws := f.ws("c1")
	f.ok("c1", args{"operation": "create_file", "filePath": "notes.txt", "content": "one\ntwo\nthree\n"})
	f.fails("c1", args{"operation": "create_file", "filePath": "notes.txt", "content": "x"}, "already exists; to replace it set overwrite")
	f.ok("c1", args{"operation": "create_file", "filePath": "sub/dir/a.go", "content": "package a\n\nfunc A() {}\n"})
	if got := f.ok("c1", args{"operation": "read_file", "filePath": "notes.txt"}); got != "one\ntwo\nthree\n" {
		t.Fatalf("read_file: %q", got)
	}
	if got := f.ok("c1", args{"operation": "read_file", "filePath": "notes.txt", "offset": 1, "limit": 1}); !strings.HasPrefix(got, "two\n") || !strings.Contains(got, "offset 2") {
		t.Fatalf("read_file offset 1 limit 1: %q", got)
	}
	if err := os.WriteFile(filepath.Join(ws, "blob.bin"), []byte{0x7f, 'E', 'L', 'F', 0, 1, 2}, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := f.ok("c1", args{"operation": "read_file", "filePath": "blob.bin"}); !strings.Contains(got, "binary file (7 bytes)") {
		t.Fatalf("read_file of a binary file: %q", got)
	}
	f.fails("c1", args{"operation": "read_file", "filePath": "missing.txt"}, "file not found: missing.txt")
	if got := f.ok("c1", args{"operation": "list_dir"}); got != "blob.bin\nnotes.txt\nsub/" {
		t.Fatalf("list_dir: %q", got)
	}
	if got := f.ok("c1", args{"operation": "file_search", "pattern": "**/*.go"}); got != "sub/dir/a.go" {
		t.Fatalf("file_search: %q", got)
	}
	if got := f.ok("c1", args{"operation": "file_search", "pattern": "*.txt"}); got != "notes.txt" {
		t.Fatalf("file_search *.txt: %q", got)
	}
	if got := f.ok("c1", args{"operation": "grep_search", "pattern": "^t"}); got != "notes.txt:2: two\nnotes.txt:3: three" {
		t.Fatalf("grep_search: %q", got)
	}
	if got := f.ok("c1", args{"operation": "grep_search", "pattern": "E", "maxResults": 1}); strings.Contains(got, "blob.bin") {
		t.Fatalf("grep_search searched a binary file: %q", got)
	}
	if got := f.ok("c1", args{"operation": "grep_search", "pattern": "func", "path": "sub"}); got != "sub/dir/a.go:3: func A() {}" {
		t.Fatalf("grep_search in sub: %q", got)
	}
	if got := f.ok("c1", args{"operation": "get_file_info", "filePath": "notes.txt"}); !strings.Contains(got, "file, 14 bytes") {
		t.Fatalf("get_file_info: %q", got)
	}

	f.fails("c1", args{"operation": "replace_string", "filePath": "notes.txt", "oldString": "four", "newString": "4"}, "oldString was not found")
	f.fails("c1", args{"operation": "replace_string", "filePath": "notes.txt", "oldString": "t", "newString": "T"}, "oldString occurs 2 times")
	f.ok("c1", args{"operation": "replace_string", "filePath": "notes.txt", "oldString": "two", "newString": "TWO"})
	f.fails("c1", args{"operation": "multi_replace", "filePath": "notes.txt", "replacements": []args{{"oldString": "one", "newString": "1"}, {"oldString": "nope", "newString": "x"}}}, "replacement 2 (nothing was changed)")
	f.ok("c1", args{"operation": "multi_replace", "filePath": "notes.txt", "replacements": []args{{"oldString": "one", "newString": "1"}, {"oldString": "three", "newString": "3"}}})
	f.ok("c1", args{"operation": "insert_edit", "filePath": "notes.txt", "line": 1, "content": "one and a half"})
	f.ok("c1", args{"operation": "insert_edit", "filePath": "notes.txt", "line": 0, "content": "zero\n"})
	f.ok("c1", args{"operation": "insert_edit", "filePath": "notes.txt", "line": 5, "content": "end"})
	f.fails("c1", args{"operation": "insert_edit", "filePath": "notes.txt", "line": 9, "content": "x"}, "line must be from 0 to 6")
	if got := string(readBytes(t, filepath.Join(ws, "notes.txt"))); got != "zero\n1\none and a half\nTWO\n3\nend\n" {
		t.Fatalf("after the edits: %q", got)
	}
	f.fails("c1", args{"operation": "replace_string", "filePath": "blob.bin", "oldString": "E", "newString": "e"}, "binary file")
	f.ok("c1", args{"operation": "copy_file", "filePath": "notes.txt", "newPath": "copy/notes.txt"})
	f.fails("c1", args{"operation": "copy_file", "filePath": "notes.txt", "newPath": "copy/notes.txt"}, "already exists")
	f.ok("c1", args{"operation": "rename_file", "filePath": "copy/notes.txt", "newPath": "moved.txt"})
	if !bytes.Equal(readBytes(t, filepath.Join(ws, "moved.txt")), readBytes(t, filepath.Join(ws, "notes.txt"))) {
		t.Fatal("copy then rename changed the bytes")
	}
	f.ok("c1", args{"operation": "create_directory", "filePath": "x/y/z"})
	f.fails("c1", args{"operation": "delete_file", "filePath": "x/y"}, "not empty")
	f.ok("c1", args{"operation": "delete_file", "filePath": "x/y/z"})
	f.ok("c1", args{"operation": "delete_file", "filePath": "moved.txt"})
	if _, err := os.Stat(filepath.Join(ws, "moved.txt")); !os.IsNotExist(err) {
		t.Fatalf("delete_file: %v", err)
	}
	// One byte over the 10 MiB limit: refused with the sizes, and nothing is written.
	f.fails("c1", args{"operation": "create_file", "filePath": "big.txt", "content": strings.Repeat("x", 10<<20+1)},
		"content: 10485761 bytes, more than the limit of 10485760")
	if _, err := os.Stat(filepath.Join(ws, "big.txt")); !os.IsNotExist(err) {
		t.Fatalf("an oversize create_file left a file: %v", err)
	}

	for _, c := range []struct {
		args args
		want string
	}{
		{args{"operation": "read_file", "filePath": "src/notes.txt"}, "Reading notes.txt"},
		{args{"operation": "create_file", "filePath": "a/notes.txt", "content": ""}, "Creating file notes.txt"},
		{args{"operation": "replace_string", "filePath": "notes.txt"}, "Editing notes.txt"},
		{args{"operation": "grep_search", "pattern": "TODO"}, "Searching code: TODO"},
		{args{"operation": "list_dir"}, "Listing the workspace"},
		{args{"operation": "rename_file", "filePath": "a.txt", "newPath": "b.txt"}, "Renaming a.txt to b.txt"},
		{args{"operation": "restore_snapshot", "snapshotId": "s1"}, "Restoring snapshot s1"},
	} {
		raw, _ := json.Marshal(c.args)
		if got := f.b.Display("file_operations", raw); got != c.want {
			t.Errorf("Display(%v) = %q, want %q", c.args, got, c.want)
		}
	}
}

// The path guard: relative paths resolve in the workspace, nothing outside the root is
// reachable, writes to another workspace need a grant, symlinks lead nowhere outside
// their workspace, the snapshot store cannot be reached, and look-alike or very long
// names are just names.
func TestPathGuard(t *testing.T) {
	t.Parallel()
	f := newFilesFx(t)
	ws := f.ws("c1")
	other := f.ws("c2")
	outside := filepath.Join(filepath.Dir(f.root), "secret.txt")
	if err := os.WriteFile(outside, []byte("SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "theirs.txt"), []byte("theirs"), 0o600); err != nil {
		t.Fatal(err)
	}

	// .. and absolute paths outside the root.
	for _, p := range []string{"../../secret.txt", "../..", "a/../../../secret.txt", outside, "/etc/passwd", f.root + "/../secret.txt"} {
		f.fails("c1", args{"operation": "read_file", "filePath": p}, "outside the built-in root")
		f.fails("c1", args{"operation": "create_file", "filePath": p, "content": "x"}, "outside the built-in root")
	}
	// Inside the workspace, by a relative or an absolute path, with .. that stays inside.
	f.ok("c1", args{"operation": "create_file", "filePath": filepath.Join(ws, "abs.txt"), "content": "abs"})
	if got := f.ok("c1", args{"operation": "read_file", "filePath": "sub/../abs.txt"}); got != "abs" {
		t.Fatalf("read through sub/..: %q", got)
	}
	// Another workspace: reading is allowed, writing needs a grant.
	if got := f.ok("c1", args{"operation": "read_file", "filePath": "../c2/theirs.txt"}); got != "theirs" {
		t.Fatalf("reading another workspace: %q", got)
	}
	res := f.fails("c1", args{"operation": "replace_string", "filePath": "../c2/theirs.txt", "oldString": "theirs", "newString": "mine"},
		`user_collaboration with {"prompt": "May I replace_string `+filepath.Join(other, "theirs.txt"))
	if sc := structured(t, res); sc["requiresAuthorization"] != true || sc["authorizationKey"] != "file_operations.replace_string" {
		t.Fatalf("the refusal's structured content: %v", sc)
	}
	f.fails("c1", args{"operation": "create_file", "filePath": filepath.Join(other, "new.txt"), "content": "x"}, "authorize_operation")
	f.grants.allow["c1 file_operations.replace_string "+filepath.Join(other, "theirs.txt")] = true
	f.ok("c1", args{"operation": "replace_string", "filePath": "../c2/theirs.txt", "oldString": "theirs", "newString": "mine"})
	if got := string(readBytes(t, filepath.Join(other, "theirs.txt"))); got != "mine" {
		t.Fatalf("the granted write: %q", got)
	}
	// A rename in another workspace asks for one grant, not one per path: one with no
	// target, for one use, allows both.
	f.grants.allow["c1 file_operations.rename_file "] = true
	f.grants.once = map[string]bool{"c1 file_operations.rename_file ": true}
	asked := len(f.grants.asked)
	f.ok("c1", args{"operation": "rename_file", "filePath": "../c2/theirs.txt", "newPath": "../c2/moved.txt"})
	if n := len(f.grants.asked) - asked; n != 1 {
		t.Fatalf("a rename asked for %d grants", n)
	}
	// The root itself and files directly in it.
	if got := f.ok("c1", args{"operation": "list_dir", "path": f.root}); got != "c1/\nc2/" {
		t.Fatalf("listing the root: %q", got)
	}
	f.fails("c1", args{"operation": "read_file", "filePath": "../stray.txt"}, "not a workspace")
	f.fails("c1", args{"operation": "create_file", "filePath": "..", "content": "x"}, "not files")

	// Symlinks out of the workspace: to a file outside the root, to another workspace,
	// to the root; a symlinked directory.
	for name, dest := range map[string]string{"out.txt": outside, "cross.txt": filepath.Join(other, "theirs.txt"), "up": "../..", "updir": f.root} {
		if err := os.Symlink(dest, filepath.Join(ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"out.txt", "cross.txt", "up/secret.txt", "updir/c2/theirs.txt"} {
		f.fails("c1", args{"operation": "read_file", "filePath": p}, "leads outside its workspace")
		f.fails("c1", args{"operation": "create_file", "filePath": p, "content": "x", "overwrite": true}, "")
		f.fails("c1", args{"operation": "copy_file", "filePath": p, "newPath": "stolen.txt"}, "")
	}
	if got := string(readBytes(t, outside)); got != "SECRET" {
		t.Fatalf("the file outside was changed: %q", got)
	}
	if got := f.ok("c1", args{"operation": "grep_search", "pattern": "SECRET|mine"}); got != "no matches for SECRET|mine" {
		t.Fatalf("grep_search followed a symlink: %q", got)
	}

	// The snapshot store.
	f.ok("c1", args{"operation": "create_file", "filePath": "snap.txt", "content": "x"}) // makes the store exist
	for _, p := range []string{"../.snapshots", "../.snapshots/x/manifest.json", filepath.Join(f.root, ".snapshots")} {
		f.fails("c1", args{"operation": "read_file", "filePath": p}, "snapshot store")
		f.fails("c1", args{"operation": "list_dir", "path": p}, "snapshot store")
	}
	if strings.Contains(f.ok("c1", args{"operation": "list_dir", "path": ".."}), ".snapshots") {
		t.Fatal("list_dir of the root shows the snapshot store")
	}

	// Unicode look-alikes of dots and slashes are names in the workspace.
	for _, p := range []string{"\u2025/x.txt", "\uff0e\uff0e/x.txt", "..\u2215x.txt", "\u2024\u2024/x.txt", "c\u200b1.txt"} {
		f.ok("c1", args{"operation": "create_file", "filePath": p, "content": "u"})
		if _, err := os.Stat(filepath.Join(ws, p)); err != nil {
			t.Fatalf("%q is not a name in the workspace: %v", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(f.root, "x.txt")); !os.IsNotExist(err) {
		t.Fatal("a look-alike path escaped the workspace")
	}
	// Very long paths: over the limit, a name too long for the file system, many levels.
	f.fails("c1", args{"operation": "read_file", "filePath": strings.Repeat("a/", 2100) + "x"}, "more than 4096")
	f.fails("c1", args{"operation": "create_file", "filePath": strings.Repeat("n", 300), "content": "x"}, "")
	f.fails("c1", args{"operation": "read_file", "filePath": strings.Repeat("../", 1000) + "etc/passwd"}, "outside the built-in root")
	deep := strings.Repeat("d/", 100) + "deep.txt"
	f.ok("c1", args{"operation": "create_file", "filePath": deep, "content": "deep"})
	if got := f.ok("c1", args{"operation": "read_file", "filePath": deep}); got != "deep" {
		t.Fatalf("a deep path: %q", got)
	}
}

// A file swapped for a symlink to a file outside the workspace between the guard's
// check and the use never lets a read see, or a write change, the file outside.
func TestPathGuardSwapRace(t *testing.T) {
	t.Parallel()
	f := newFilesFx(t)
	ws := f.ws("c1")
	outside := filepath.Join(filepath.Dir(f.root), "secret.txt")
	if err := os.WriteFile(outside, []byte("SECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(ws, "f.txt")
	if err := os.WriteFile(p, []byte("plain\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tmpLink, tmpFile := filepath.Join(ws, ".l"), filepath.Join(ws, ".f")
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if i%2 == 0 {
				_ = os.Symlink(outside, tmpLink)
				_ = os.Rename(tmpLink, p)
			} else {
				_ = os.WriteFile(tmpFile, []byte("plain\n"), 0o644)
				_ = os.Rename(tmpFile, p)
			}
		}
	})
	plain := 0
	// 300 rounds, and more while no read has met a plain file (the swapper may be
	// starved of CPU under load, leaving the link in place).
	for i := 0; i < 300 || plain == 0 && i < 5000; i++ {
		res := f.call("c1", args{"operation": "read_file", "filePath": "f.txt"})
		if strings.Contains(text(res), "SECRET") {
			close(stop)
			t.Fatalf("read %d saw the file outside the workspace", i)
		}
		if !res.IsError {
			plain++
		}
		f.call("c1", args{"operation": "create_file", "filePath": "f.txt", "content": "overwritten\n", "overwrite": true})
		f.call("c1", args{"operation": "replace_string", "filePath": "f.txt", "oldString": "SECRET", "newString": "PWNED"})
	}
	close(stop)
	wg.Wait()
	if got := string(readBytes(t, outside)); got != "SECRET\n" {
		t.Fatalf("the file outside the workspace was changed: %q", got)
	}
	if plain == 0 {
		t.Fatal("no read succeeded: the race was not exercised")
	}
}

// Every write keeps a snapshot, named in its result, and restore_snapshot puts back
// exactly the bytes and modes that were there, or removes what did not exist.
func TestSnapshotRestore(t *testing.T) {
	t.Parallel()
	f := newFilesFx(t)
	ws := f.ws("c1")
	orig := []byte("line 1\r\nline 2\nünïcode\n")
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), orig, 0o640); err != nil {
		t.Fatal(err)
	}
	snap := func(a args) string {
		t.Helper()
		res := f.call("c1", a)
		if res.IsError {
			t.Fatalf("%v: %s", a, text(res))
		}
		id, _ := structured(t, res)["snapshotId"].(string)
		if id == "" || !strings.Contains(text(res), "snapshot "+id) {
			t.Fatalf("%v: no snapshot id in %s / %v", a, text(res), res.StructuredContent)
		}
		return id
	}
	restore := func(id string) {
		t.Helper()
		f.ok("c1", args{"operation": "restore_snapshot", "snapshotId": id})
	}
	same := func(what string) {
		t.Helper()
		b := readBytes(t, filepath.Join(ws, "a.txt"))
		fi, _ := os.Stat(filepath.Join(ws, "a.txt"))
		if !bytes.Equal(b, orig) || fi.Mode().Perm() != 0o640 {
			t.Fatalf("after restoring %s: %q %v", what, b, fi.Mode())
		}
	}
	restore(snap(args{"operation": "replace_string", "filePath": "a.txt", "oldString": "line 2", "newString": "LINE TWO"}))
	same("replace_string")
	restore(snap(args{"operation": "create_file", "filePath": "a.txt", "content": "new", "overwrite": true}))
	same("create_file over it")
	restore(snap(args{"operation": "delete_file", "filePath": "a.txt"}))
	same("delete_file")
	restore(snap(args{"operation": "rename_file", "filePath": "a.txt", "newPath": "b/c/moved.txt"}))
	same("rename_file")
	if _, err := os.Stat(filepath.Join(ws, "b")); !os.IsNotExist(err) {
		t.Fatalf("the directories rename_file made are still there: %v", err)
	}
	id := snap(args{"operation": "create_file", "filePath": "n/new.txt", "content": "x"})
	restore(id)
	if _, err := os.Stat(filepath.Join(ws, "n")); !os.IsNotExist(err) {
		t.Fatalf("restoring a created file: %v", err)
	}
	restore(snap(args{"operation": "multi_replace", "filePath": "a.txt", "replacements": []args{{"oldString": "line 1", "newString": "x"}}}))
	restore(snap(args{"operation": "insert_edit", "filePath": "a.txt", "line": 1, "content": "y"}))
	restore(snap(args{"operation": "copy_file", "filePath": "a.txt", "newPath": "a2.txt"}))
	same("multi_replace, insert_edit, copy_file")
	if _, err := os.Stat(filepath.Join(ws, "a2.txt")); !os.IsNotExist(err) {
		t.Fatalf("restoring a copy: %v", err)
	}
	// Another conversation cannot restore it; an unknown id is an error.
	id = snap(args{"operation": "create_file", "filePath": "z.txt", "content": "x"})
	f.fails("c2", args{"operation": "restore_snapshot", "snapshotId": id}, "no snapshot "+id) // as an id not there
	f.fails("c1", args{"operation": "restore_snapshot", "snapshotId": "nope"}, "no snapshot nope")
	f.fails("c1", args{"operation": "restore_snapshot", "snapshotId": "../c1"}, "not a snapshot id")
	// A refused write leaves no snapshot behind.
	ents, _ := os.ReadDir(filepath.Join(f.root, ".snapshots"))
	f.fails("c1", args{"operation": "replace_string", "filePath": "a.txt", "oldString": "nope", "newString": "x"}, "not found")
	if after, _ := os.ReadDir(filepath.Join(f.root, ".snapshots")); len(after) != len(ents) {
		t.Fatalf("a failed write left a snapshot: %d → %d", len(ents), len(after))
	}
}

// A plan's preview: each step's diff against the file as it is or as the earlier steps
// leave it, the fingerprint of what it expects, nothing for reads or steps that will
// fail, and a long diff cut.
func TestPreviewPlan(t *testing.T) {
	t.Parallel()
	f := newFilesFx(t)
	ws := f.ws("c1")
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one\ntwo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	call := func(a args) builtin.PreviewCall {
		b, _ := json.Marshal(a)
		return builtin.PreviewCall{Tool: "file_operations", Arguments: b}
	}
	ps, err := f.b.PreviewPlan(context.Background(), "c1", "", []builtin.PreviewCall{
		call(args{"operation": "replace_string", "filePath": "a.txt", "oldString": "two", "newString": "2"}),
		call(args{"operation": "read_file", "filePath": "a.txt"}),
		call(args{"operation": "insert_edit", "filePath": "a.txt", "line": 0, "content": "zero"}),
		call(args{"operation": "replace_string", "filePath": "a.txt", "oldString": "nope", "newString": "x"}),
		call(args{"operation": "create_file", "filePath": "a.txt", "content": "x"}),
		call(args{"operation": "delete_file", "filePath": "a.txt"}),
		call(args{"operation": "create_file", "filePath": "big.txt", "content": strings.Repeat("line\n", 100000)}),
		{Tool: "think", Arguments: json.RawMessage(`{"thought":"x"}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if ps[0] == nil || !strings.Contains(ps[0].Diff, "-two\n+2\n") || ps[0].Fingerprint != "sha256:"+sha("one\ntwo\n") {
		t.Fatalf("step 0: %+v", ps[0])
	}
	if ps[2] == nil || !strings.Contains(ps[2].Diff, "+zero\n one\n") || ps[2].Fingerprint != "sha256:"+sha("one\n2\n") {
		t.Fatalf("step 2 (after step 0): %+v", ps[2])
	}
	if ps[1] != nil || ps[3] != nil || ps[4] != nil || ps[7] != nil {
		t.Fatalf("previews for a read, a failing replace, a refused create, think: %v %v %v %v", ps[1], ps[3], ps[4], ps[7])
	}
	if ps[5] == nil || !strings.Contains(ps[5].Diff, "-zero\n-one\n-2\n") {
		t.Fatalf("delete_file: %+v", ps[5])
	}
	if ps[6] == nil || ps[6].Fingerprint != "absent" || len(ps[6].Diff) > 130<<10 || !strings.Contains(ps[6].Diff, "[… the diff goes on") {
		t.Fatalf("a long diff: %d bytes, fingerprint %q", len(ps[6].Diff), ps[6].Fingerprint)
	}
	fp, err := f.b.Fingerprint(context.Background(), "c1", call(args{"operation": "replace_string", "filePath": "a.txt", "oldString": "a", "newString": "b"}))
	if err != nil || fp != ps[0].Fingerprint {
		t.Fatalf("Fingerprint now: %q %v", fp, err)
	}
}

// Moves in a plan's preview: a rename says from and to, a copy shows the new file's
// content (and what an overwrite replaces), a new directory says so; later steps see
// what the moves left, and a move that will fail shows nothing. A copy expects its
// source as previewed.
func TestPreviewMoves(t *testing.T) {
	t.Parallel()
	f := newFilesFx(t)
	ws := f.ws("c1")
	for name, content := range map[string]string{"a.txt": "alpha\n", "b.txt": "beta\n"} {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	call := func(a args) builtin.PreviewCall {
		b, _ := json.Marshal(a)
		return builtin.PreviewCall{Tool: "file_operations", Arguments: b}
	}
	ps, err := f.b.PreviewPlan(context.Background(), "c1", "", []builtin.PreviewCall{
		call(args{"operation": "create_directory", "filePath": "out"}),
		call(args{"operation": "rename_file", "filePath": "a.txt", "newPath": "out/a.txt"}),
		call(args{"operation": "copy_file", "filePath": "out/a.txt", "newPath": "b.txt", "overwrite": true}),
		call(args{"operation": "rename_file", "filePath": "a.txt", "newPath": "c.txt"}),
		call(args{"operation": "copy_file", "filePath": "b.txt", "newPath": "out/a.txt"}),
		call(args{"operation": "create_directory", "filePath": "b.txt"}),
		call(args{"operation": "replace_string", "filePath": "out/a.txt", "oldString": "alpha", "newString": "ALPHA"}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if ps[0] == nil || ps[0].Diff != "new directory out/\n" || ps[0].Fingerprint != "" {
		t.Fatalf("create_directory: %+v", ps[0])
	}
	if ps[1] == nil || !strings.HasPrefix(ps[1].Diff, "rename from a.txt\nrename to out/a.txt\n") || !strings.Contains(ps[1].Diff, "+alpha\n") ||
		ps[1].Fingerprint != "sha256:"+sha("alpha\n")+" newPath=absent" {
		t.Fatalf("rename_file: %+v", ps[1])
	}
	if ps[2] == nil || !strings.HasPrefix(ps[2].Diff, "copy from out/a.txt\ncopy to b.txt\n") || !strings.Contains(ps[2].Diff, "-beta\n+alpha\n") {
		t.Fatalf("copy_file over b.txt: %+v", ps[2])
	}
	if ps[3] != nil || ps[4] != nil || ps[5] != nil {
		t.Fatalf("a rename of a moved file, a copy onto a file without overwrite, a directory over a file: %+v %+v %+v", ps[3], ps[4], ps[5])
	}
	if ps[6] == nil || !strings.Contains(ps[6].Diff, "-alpha\n+ALPHA\n") {
		t.Fatalf("an edit of the moved file: %+v", ps[6])
	}
	// A copy whose source changed since the preview is refused as stale.
	res, err := f.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "file_operations",
		Arguments: args{"operation": "copy_file", "filePath": "b.txt", "newPath": "d.txt"},
		Meta:      mcp.Meta{callmeta.Key: callmeta.Meta{ConversationID: "c1", Expect: "sha256:" + sha("other\n")}}})
	if err != nil || !res.IsError || !strings.Contains(text(res), "stale") {
		t.Fatalf("a stale copy: %v %s", err, text(res))
	}
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// A write that expects its file's content (a previewed plan step) is refused when the
// file changed since, and writes when it did not.
func TestExpectedContent(t *testing.T) {
	t.Parallel()
	f := newFilesFx(t)
	ws := f.ws("c1")
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	call := func(expect string, a args) *mcp.CallToolResult {
		res, err := f.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "file_operations", Arguments: a,
			Meta: mcp.Meta{callmeta.Key: callmeta.Meta{ConversationID: "c1", Expect: expect}}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	edit := args{"operation": "replace_string", "filePath": "a.txt", "oldString": "one", "newString": "1"}
	if res := call("sha256:"+sha("other\n"), edit); !res.IsError || !strings.Contains(text(res), "stale: a.txt changed since the plan's preview") {
		t.Fatalf("a stale edit: %s", text(res))
	}
	if res := call("absent", args{"operation": "create_file", "filePath": "a.txt", "content": "x", "overwrite": true}); !res.IsError || !strings.Contains(text(res), "stale") {
		t.Fatalf("a stale create: %s", text(res))
	}
	if res := call("sha256:"+sha("one\n"), args{"operation": "delete_file", "filePath": "b.txt"}); !res.IsError {
		t.Fatalf("a delete of a file that is not there: %s", text(res))
	}
	if res := call("sha256:"+sha("one\n"), edit); res.IsError {
		t.Fatalf("an edit as previewed: %s", text(res))
	}
	if got := string(readBytes(t, filepath.Join(ws, "a.txt"))); got != "1\n" {
		t.Fatalf("a.txt: %q", got)
	}
}

// Snapshots older than the retention are pruned; newer ones stay, and a rollback of a
// pruned one says it is gone.
func TestPruneSnapshots(t *testing.T) {
	t.Parallel()
	f := newFilesFx(t)
	old := structured(t, f.call("c1", args{"operation": "create_file", "filePath": "old.txt", "content": "x"}))["snapshotId"].(string)
	fresh := structured(t, f.call("c1", args{"operation": "create_file", "filePath": "new.txt", "content": "y"}))["snapshotId"].(string)
	past := time.Now().Add(-builtin.SnapshotRetention - time.Hour)
	if err := os.Chtimes(filepath.Join(f.root, ".snapshots", old), past, past); err != nil {
		t.Fatal(err)
	}
	n, err := f.b.PruneSnapshots(time.Now().Add(-builtin.SnapshotRetention))
	if err != nil || n != 1 {
		t.Fatalf("pruned %d: %v", n, err)
	}
	f.fails("c1", args{"operation": "restore_snapshot", "snapshotId": old}, "no snapshot "+old)
	f.ok("c1", args{"operation": "restore_snapshot", "snapshotId": fresh})
}

// A failed operation says what kind of failure it was in its structured content, and
// the path it concerns (seed 001's error result: errorType, attemptedPath).
func TestErrorTypes(t *testing.T) {
	t.Parallel()
	f := newFilesFx(t)
	f.ws("c1")
	other := f.ws("c2")
	f.ok("c1", args{"operation": "create_file", "filePath": "here.txt", "content": "x"})
	for _, c := range []struct {
		args args
		want map[string]any
	}{
		{args{"operation": "read_file", "filePath": "missing.txt"}, map[string]any{"errorType": "FileNotFound", "attemptedPath": "missing.txt"}},
		{args{"operation": "create_file", "filePath": "here.txt", "content": "y"}, map[string]any{"errorType": "AlreadyExists", "attemptedPath": "here.txt"}},
		{args{"operation": "copy_file", "filePath": "here.txt", "newPath": "here.txt"}, map[string]any{"errorType": "AlreadyExists", "attemptedPath": "here.txt"}},
		{args{"operation": "read_file", "filePath": "/etc/passwd"}, map[string]any{"errorType": "PathNotAllowed"}},
		{args{"operation": "create_file", "filePath": filepath.Join(other, "x.txt"), "content": "x"}, map[string]any{"errorType": "AuthorizationRequired",
			"requiresAuthorization": true, "authorizationKey": "file_operations.create_file", "attemptedPath": filepath.Join(other, "x.txt"),
			"reason": "Operation affects files outside the conversation's working directory"}},
	} {
		res := f.call("c1", c.args)
		if got := structured(t, res); !res.IsError || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%v: %v %v, want an error with %v", c.args, res.IsError, got, c.want)
		}
	}
}
