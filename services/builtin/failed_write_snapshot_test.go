package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/callmeta"
)

// fileServer is a server with file_operations and conversation c1's workspace.
func fileServer(t *testing.T) (*Server, string) {
	t.Helper()
	s, err := New(&Options{Root: filepath.Join(t.TempDir(), "root")})
	if err != nil {
		t.Fatal(err)
	}
	s.Add(s.FileOperations())
	ws, err := s.Workspace("c1")
	if err != nil {
		t.Fatal(err)
	}
	return s, ws
}

// fileOpResult runs one file operation as call callID of c1, error results too.
func fileOpResult(t *testing.T, s *Server, ws, callID, args string) (*mcp.CallToolResult, string, map[string]any) {
	t.Helper()
	op, err := s.tools["file_operations"].operation(json.RawMessage(args))
	if err != nil {
		t.Fatal(err)
	}
	meta := callmeta.Meta{ConversationID: "c1", CallID: callID}
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
	sc, _ := res.StructuredContent.(map[string]any)
	return res, text, sc
}

func writeTestFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func fileHolds(t *testing.T, p, want string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Errorf("%s: %v, want it to hold %q", p, err, want)
	} else if string(b) != want {
		t.Errorf("%s holds %q, want %q", p, b, want)
	}
}

// A write that fails part way keeps in its snapshot only what it changed: restoring
// it (a failed execution's rollback) removes the directory the write made, but never
// puts back a path the write recorded and did not change over what was written there
// since. The failure is real: rename_file to a name too long for the file system,
// after it made the name's directory.
func TestFailedWriteSnapshotKeepsOnlyChanged(t *testing.T) {
	t.Parallel()
	s, ws := fileServer(t)
	long := strings.Repeat("x", 300)

	// Nothing written since: the restore removes out/, which the write made.
	writeTestFile(t, filepath.Join(ws, "b.txt"), "b")
	res, text, sc := fileOpResult(t, s, ws, "call-b", `{"operation":"rename_file","filePath":"b.txt","newPath":"out2/`+long+`"}`)
	id, _ := sc["snapshotId"].(string)
	if !res.IsError || id == "" {
		t.Fatalf("rename_file to a too long name: isError %v, %s, structured %v; want an error naming a snapshot", res.IsError, text, sc)
	}
	if sc["changed"] != true {
		t.Errorf("the failed rename_file that made out2/: structured %v, want changed true", sc)
	}
	if res, text, _ := fileOpResult(t, s, ws, "call-b-undo", `{"operation":"restore_snapshot","snapshotId":"`+id+`"}`); res.IsError {
		t.Fatalf("restore_snapshot %s: %s", id, text)
	}
	if _, err := os.Lstat(filepath.Join(ws, "out2")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("out2/, made by the failed write, after its restore: %v, want it gone", err)
	}
	fileHolds(t, filepath.Join(ws, "b.txt"), "b")

	// Written since: a.txt (recorded, never changed) and out/r.txt in the directory the
	// write made are the user's, and stay as the user wrote them.
	writeTestFile(t, filepath.Join(ws, "a.txt"), "orig")
	res, text, sc = fileOpResult(t, s, ws, "call-a", `{"operation":"rename_file","filePath":"a.txt","newPath":"out/`+long+`"}`)
	id, _ = sc["snapshotId"].(string)
	if !res.IsError || id == "" {
		t.Fatalf("rename_file to a too long name: isError %v, %s, structured %v; want an error naming a snapshot", res.IsError, text, sc)
	}
	writeTestFile(t, filepath.Join(ws, "a.txt"), "mine")
	writeTestFile(t, filepath.Join(ws, "out", "r.txt"), "mine too")
	_, text, _ = fileOpResult(t, s, ws, "call-a-undo", `{"operation":"restore_snapshot","snapshotId":"`+id+`"}`)
	fileHolds(t, filepath.Join(ws, "a.txt"), "mine")
	fileHolds(t, filepath.Join(ws, "out", "r.txt"), "mine too")
	if !strings.Contains(text, "holds files made since") {
		t.Errorf("restore_snapshot %s: %q, want a note that out/ was left", id, text)
	}
}

// A restore_snapshot that fails part way keeps only what it put back: a path it could
// not put back is not in its snapshot, so undoing the restore does not replace what
// was written there since.
func TestPartialRestoreSnapshotKeepsOnlyRestored(t *testing.T) {
	t.Parallel()
	s, ws := fileServer(t)
	writeTestFile(t, filepath.Join(ws, "x.txt"), "orig")
	_, _, sc := fileOpResult(t, s, ws, "call-mv", `{"operation":"rename_file","filePath":"x.txt","newPath":"y.txt"}`)
	moved, _ := sc["snapshotId"].(string)
	if moved == "" {
		t.Fatalf("rename_file: structured %v, want a snapshotId", sc)
	}
	// x.txt is now a directory with a file in it: the restore cannot put the file back.
	if err := os.Mkdir(filepath.Join(ws, "x.txt"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(ws, "x.txt", "in"), "in")
	res, text, sc := fileOpResult(t, s, ws, "call-undo", `{"operation":"restore_snapshot","snapshotId":"`+moved+`"}`)
	undo, _ := sc["snapshotId"].(string)
	if !res.IsError || undo == "" {
		t.Fatalf("restore_snapshot with x.txt a directory: isError %v, %s, structured %v; want a partial restore naming its snapshot", res.IsError, text, sc)
	}
	if _, err := os.Lstat(filepath.Join(ws, "y.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("y.txt after the restore: %v, want it removed", err)
	}
	// The user replaces the directory with a file; undoing the restore puts y.txt back
	// and leaves x.txt as the user wrote it.
	if err := os.RemoveAll(filepath.Join(ws, "x.txt")); err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(ws, "x.txt"), "mine")
	fileOpResult(t, s, ws, "call-redo", `{"operation":"restore_snapshot","snapshotId":"`+undo+`"}`)
	fileHolds(t, filepath.Join(ws, "x.txt"), "mine")
	fileHolds(t, filepath.Join(ws, "y.txt"), "orig")
}

// A restore_snapshot that succeeds keeps in its own snapshot only what it put back: a
// path that already held what the snapshot kept (here: absent, as before the write) is
// not in it, so undoing the restore does not remove a file made there since.
func TestRestoreSnapshotKeepsOnlyRestored(t *testing.T) {
	t.Parallel()
	s, ws := fileServer(t)
	_, _, sc := fileOpResult(t, s, ws, "call-create", `{"operation":"create_file","filePath":"p","content":"new"}`)
	created, _ := sc["snapshotId"].(string)
	if created == "" {
		t.Fatalf("create_file: structured %v, want a snapshotId", sc)
	}
	if err := os.Remove(filepath.Join(ws, "p")); err != nil {
		t.Fatal(err)
	}
	res, text, sc := fileOpResult(t, s, ws, "call-undo", `{"operation":"restore_snapshot","snapshotId":"`+created+`"}`)
	undo, _ := sc["snapshotId"].(string)
	if res.IsError || undo == "" {
		t.Fatalf("restore_snapshot with p already gone: isError %v, %s, structured %v; want it to succeed naming its snapshot", res.IsError, text, sc)
	}
	writeTestFile(t, filepath.Join(ws, "p"), "mine")
	if res, text, _ := fileOpResult(t, s, ws, "call-redo", `{"operation":"restore_snapshot","snapshotId":"`+undo+`"}`); res.IsError {
		t.Fatalf("restore_snapshot %s: %s", undo, text)
	}
	fileHolds(t, filepath.Join(ws, "p"), "mine")
}

// A restore_snapshot that changed nothing before it failed keeps no snapshot and names
// none, as any write that changed nothing.
func TestFailedRestoreThatChangedNothingKeepsNoSnapshot(t *testing.T) {
	t.Parallel()
	s, ws := fileServer(t)
	writeTestFile(t, filepath.Join(ws, "p"), "orig")
	_, _, sc := fileOpResult(t, s, ws, "call-over", `{"operation":"create_file","filePath":"p","content":"new","overwrite":true}`)
	over, _ := sc["snapshotId"].(string)
	if over == "" {
		t.Fatalf("create_file: structured %v, want a snapshotId", sc)
	}
	if err := os.Remove(filepath.Join(ws, "p")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(ws, "p"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(ws, "p", "in"), "in")
	res, text, sc := fileOpResult(t, s, ws, "call-undo", `{"operation":"restore_snapshot","snapshotId":"`+over+`"}`)
	if !res.IsError {
		t.Fatalf("restore_snapshot over a directory that holds a file: %s, want an error", text)
	}
	if id, ok := sc["snapshotId"]; ok {
		t.Errorf("the failed restore changed nothing, yet names snapshot %v (%s)", id, text)
	}
	if _, ok := sc["changed"]; ok {
		t.Errorf("the failed restore changed nothing, yet says changed: %v", sc)
	}
	fileHolds(t, filepath.Join(ws, "p", "in"), "in")
}

// A write that changed something and whose snapshot could not be saved says so in its
// error result (changed), failed or not: a rollback names it as a step that may have
// taken effect. The save fails for real: the snapshot's store is closed under it.
func TestUnsavedSnapshotSaysChanged(t *testing.T) {
	t.Parallel()
	s, ws := fileServer(t)
	meta := callmeta.Meta{ConversationID: "c1", CallID: "call-unsaved"}
	ctx := callmeta.With(context.Background(), meta)
	c := Call{Meta: meta, Workspace: ws}
	for _, failed := range []bool{true, false} {
		w := s.newWrite(c, "create_file")
		tg, ar, err := w.target(ctx, "filePath", "out/r.txt")
		if err != nil {
			t.Fatal(err)
		}
		if err := w.keepParents(tg, ar); err != nil {
			t.Fatal(err)
		}
		if err := w.keep(tg, ar); err != nil {
			t.Fatal(err)
		}
		if err := w.mkParents(tg, ar); err != nil {
			t.Fatal(err)
		}
		var werr error
		if failed {
			werr = errors.New("the write failed")
		} else if err := writeFile(ar, tg.rel, []byte("r"), 0o644); err != nil {
			t.Fatal(err)
		}
		w.sn.store.Close()
		res, err := w.done("written", nil, werr)
		if err == nil {
			t.Fatalf("failed %v: done with the snapshot store closed: %v, want an error", failed, res)
		}
		sc, _ := fileError(err).StructuredContent.(map[string]any)
		if sc["changed"] != true || sc["errorType"] != ErrorExecutionFailed {
			t.Errorf("failed %v: %v: structured %v, want changed true and errorType %s", failed, err, sc, ErrorExecutionFailed)
		}
		if _, ok := sc["snapshotId"]; ok {
			t.Errorf("failed %v: structured %v names a snapshot that was not saved", failed, sc)
		}
		if err := os.RemoveAll(filepath.Join(ws, "out")); err != nil {
			t.Fatal(err)
		}
	}
}
