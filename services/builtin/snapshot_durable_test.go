package builtin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwarden/toolwarden/internal/callmeta"
)

// durableFixture is a server with file operations and conversation c1's workspace.
type durableFixture struct {
	t     *testing.T
	s     *Server
	root  string
	ws    string
	store string // the snapshot store's directory
}

func newDurableFixture(t *testing.T) *durableFixture {
	t.Helper()
	s, ws := fileServer(t)
	return &durableFixture{t: t, s: s, root: s.opts.Root, ws: ws, store: filepath.Join(s.opts.Root, snapshotDir)}
}

// run runs file_operations with args in c1, returning the result's text and whether
// it is an error.
func (f *durableFixture) run(args string) (string, bool) {
	f.t.Helper()
	op, err := f.s.tools["file_operations"].operation(json.RawMessage(args))
	if err != nil {
		f.t.Fatal(err)
	}
	meta := callmeta.Meta{ConversationID: "c1", CallID: "call-1"}
	res, err := op.Run(callmeta.With(context.Background(), meta), Call{Meta: meta, Workspace: f.ws}, json.RawMessage(args))
	if err != nil {
		return err.Error(), true
	}
	text := ""
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text += tc.Text
		}
	}
	return text, res.IsError
}

// snap runs a write and returns its snapshot's id.
func (f *durableFixture) snap(args string) string {
	f.t.Helper()
	_, sc := runFileOp(f.t, f.s, f.ws, args)
	id, _ := sc["snapshotId"].(string)
	if id == "" {
		f.t.Fatalf("%s: no snapshotId in %v", args, sc)
	}
	return id
}

func (f *durableFixture) manifest(id string) snapManifest {
	f.t.Helper()
	b, err := os.ReadFile(filepath.Join(f.store, id, "manifest.json"))
	if err != nil {
		f.t.Fatal(err)
	}
	var m snapManifest
	if err := json.Unmarshal(b, &m); err != nil {
		f.t.Fatal(err)
	}
	return m
}

// blobOf is the path of the blob snapshot id kept of rel.
func (f *durableFixture) blobOf(id, rel string) string {
	f.t.Helper()
	for _, e := range f.manifest(id).Entries {
		if e.Path == rel && e.Blob != "" {
			return filepath.Join(f.store, id, e.Blob)
		}
	}
	f.t.Fatalf("snapshot %s kept no blob of %s", id, rel)
	return ""
}

func (f *durableFixture) read(rel string) string {
	f.t.Helper()
	b, err := os.ReadFile(filepath.Join(f.ws, rel))
	if err != nil {
		f.t.Fatal(err)
	}
	return string(b)
}

func (f *durableFixture) snapshots() []string {
	f.t.Helper()
	es, err := os.ReadDir(f.store)
	if err != nil {
		f.t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		if e.Name() != lockDir {
			names = append(names, e.Name())
		}
	}
	return names
}

// A blob truncated (as a power loss can leave one that was not synced) or altered
// after its snapshot was taken is refused by restore_snapshot, naming the path, and
// nothing in the workspace changes: not the damaged file, not the others the
// snapshot holds. Unchecked, the restore put an empty file in place of the real one.
func TestRestoreRefusesDamagedBlob(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, blob string)
	}{
		{"truncated", func(t *testing.T, blob string) {
			if err := os.Truncate(blob, 0); err != nil {
				t.Fatal(err)
			}
		}},
		{"altered", func(t *testing.T, blob string) { // the same size, other bytes
			b, err := os.ReadFile(blob)
			if err != nil {
				t.Fatal(err)
			}
			b[0] ^= 0xff
			if err := os.WriteFile(blob, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newDurableFixture(t)
			if err := os.WriteFile(filepath.Join(f.ws, "a.txt"), []byte("alpha original\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(f.ws, "b.txt"), []byte("beta original\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			// One snapshot of both files: a rename keeps its source and its destination.
			id := f.snap(`{"operation":"rename_file","filePath":"a.txt","newPath":"b.txt","overwrite":true}`)
			before := f.snapshots()
			tc.damage(t, f.blobOf(id, "a.txt"))

			text, isErr := f.run(`{"operation":"restore_snapshot","snapshotId":"` + id + `"}`)
			if !isErr {
				t.Fatalf("restore of a snapshot with a %s blob succeeded: %s", tc.name, text)
			}
			if !strings.Contains(text, "a.txt") || !strings.Contains(text, "damaged") {
				t.Errorf("the refusal does not name a.txt as damaged: %s", text)
			}
			if _, err := os.Lstat(filepath.Join(f.ws, "a.txt")); !os.IsNotExist(err) {
				t.Errorf("a.txt after the refused restore: %v, want it absent as the rename left it", err)
			}
			if got := f.read("b.txt"); got != "alpha original\n" {
				t.Errorf("b.txt after the refused restore: %q, want what the rename left", got)
			}
			if after := f.snapshots(); len(after) != len(before) {
				t.Errorf("the refused restore left a snapshot: %v, before %v", after, before)
			}
		})
	}
}

// A manifest written before blobs' sizes and hashes were recorded still restores,
// unchecked; a new one records both.
func TestRestoreOldManifestWithoutHashes(t *testing.T) {
	t.Parallel()
	f := newDurableFixture(t)
	if err := os.WriteFile(filepath.Join(f.ws, "notes.txt"), []byte("one\ntwo\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	id := f.snap(`{"operation":"replace_string","filePath":"notes.txt","oldString":"two","newString":"three"}`)

	mpath := filepath.Join(f.store, id, "manifest.json")
	b, err := os.ReadFile(mpath)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	blobs := 0
	for _, e := range m["entries"].([]any) {
		e := e.(map[string]any)
		if e["blob"] == nil {
			continue
		}
		blobs++
		sum := sha256.Sum256([]byte("one\ntwo\n"))
		if e["sha256"] != hex.EncodeToString(sum[:]) || e["size"] != float64(8) {
			t.Errorf("entry %v: want size 8 and the SHA-256 of what it kept", e)
		}
		delete(e, "sha256")
		delete(e, "size")
	}
	if blobs != 1 {
		t.Fatalf("manifest %s: %d blobs, want 1", b, blobs)
	}
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mpath, b, 0o600); err != nil {
		t.Fatal(err)
	}

	text, isErr := f.run(`{"operation":"restore_snapshot","snapshotId":"` + id + `"}`)
	if isErr {
		t.Fatalf("restore of an old-format manifest: %s", text)
	}
	if got := f.read("notes.txt"); got != "one\ntwo\n" {
		t.Errorf("notes.txt restored from an old-format manifest: %q", got)
	}
	if fi, err := os.Stat(filepath.Join(f.ws, "notes.txt")); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("notes.txt's mode after the restore: %v, %v; want 0640", fi.Mode(), err)
	}
}

// The manifest appears under its name only whole, written and synced as a temporary
// file first, and only once every blob it names is complete: what a crash leaves is
// no snapshot, or one that restores. Blobs go the same way. Not parallel: it sets the
// package's hook.
func TestSnapshotWrittenWholeBlobsFirst(t *testing.T) {
	f := newDurableFixture(t)
	for _, n := range []string{"a.txt", "b.txt"} {
		if err := os.WriteFile(filepath.Join(f.ws, n), []byte("content of "+n+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var renamed []string
	beforeSnapshotRename = func(store *os.Root, tmp, name string) {
		renamed = append(renamed, filepath.Base(name))
		if _, err := store.Lstat(name); err == nil {
			t.Errorf("%s exists before its temporary file is renamed to it", name)
		}
		if filepath.Base(name) != "manifest.json" {
			return
		}
		b, err := store.ReadFile(tmp)
		if err != nil {
			t.Fatal(err)
		}
		var m snapManifest
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("the manifest's temporary file, about to be renamed, does not parse: %v", err)
		}
		for _, e := range m.Entries {
			if e.Blob == "" {
				continue
			}
			blob, err := store.ReadFile(filepath.Join(m.ID, e.Blob))
			if err != nil {
				t.Errorf("blob %s of %s is not in place before the manifest: %v", e.Blob, e.Path, err)
				continue
			}
			sum := sha256.Sum256(blob)
			if e.SHA256 == "" || int64(len(blob)) != e.Size || hex.EncodeToString(sum[:]) != e.SHA256 {
				t.Errorf("blob %s of %s before the manifest: %d bytes, want %d with the SHA-256 recorded (%q)", e.Blob, e.Path, len(blob), e.Size, e.SHA256)
			}
		}
		// No temporary file but this one is left in the snapshot's directory.
		es, err := fs.ReadDir(store.FS(), m.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, de := range es {
			if strings.HasSuffix(de.Name(), ".tmp") && de.Name() != filepath.Base(tmp) {
				t.Errorf("a temporary file left in the snapshot: %s", de.Name())
			}
		}
	}
	t.Cleanup(func() { beforeSnapshotRename = nil })

	id := f.snap(`{"operation":"rename_file","filePath":"a.txt","newPath":"b.txt","overwrite":true}`)
	if len(renamed) != 3 || renamed[len(renamed)-1] != "manifest.json" {
		t.Fatalf("renamed into place: %v, want the two blobs and then manifest.json", renamed)
	}
	es, err := os.ReadDir(filepath.Join(f.store, id))
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range es {
		if strings.HasSuffix(de.Name(), ".tmp") {
			t.Errorf("a temporary file left in snapshot %s: %s", id, de.Name())
		}
	}
	if text, isErr := f.run(`{"operation":"restore_snapshot","snapshotId":"` + id + `"}`); isErr {
		t.Fatalf("restore: %s", text)
	}
	if f.read("a.txt") != "content of a.txt\n" || f.read("b.txt") != "content of b.txt\n" {
		t.Errorf("after the restore: a.txt %q, b.txt %q", f.read("a.txt"), f.read("b.txt"))
	}
}
