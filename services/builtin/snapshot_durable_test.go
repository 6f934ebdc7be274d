package builtin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwarden/toolwarden/internal/callmeta"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"golang.org/x/sys/unix"
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

// run runs file_operations with args in c1 as call call-1, returning the result's text
// and whether it is an error.
func (f *durableFixture) run(args string) (string, bool) {
	f.t.Helper()
	return f.runAs("call-1", args)
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

// The manifest on disk lists every path a write changes, each blob whole (its size
// and SHA-256 recorded), by the time the change is made, and the write's marker is
// there until it finishes: a crash right after the change leaves a snapshot that undoes
// it. No temporary file is left.
func TestSnapshotOnDiskAtTheChange(t *testing.T) {
	t.Parallel()
	f := newDurableFixture(t)
	for _, n := range []string{"a.txt", "b.txt"} {
		if err := os.WriteFile(filepath.Join(f.ws, n), []byte("content of "+n+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	changes := 0
	f.s.afterChange = func() {
		changes++
		if f.read("b.txt") != "content of a.txt\n" {
			t.Errorf("the change is not made: b.txt holds %q", f.read("b.txt"))
		}
		m := f.manifest("call-1")
		var paths []string
		for _, e := range m.Entries {
			paths = append(paths, e.Path)
			if e.Blob == "" {
				continue
			}
			blob, err := os.ReadFile(filepath.Join(f.store, m.ID, e.Blob))
			sum := sha256.Sum256(blob)
			if err != nil || e.SHA256 == "" || int64(len(blob)) != e.Size || hex.EncodeToString(sum[:]) != e.SHA256 {
				t.Errorf("blob %s of %s at the change: %d bytes (%v), want %d with the SHA-256 recorded (%q)", e.Blob, e.Path, len(blob), err, e.Size, e.SHA256)
			}
		}
		if strings.Join(paths, " ") != "a.txt b.txt" {
			t.Errorf("the manifest on disk at the change lists %v, want a.txt and b.txt", paths)
		}
		if _, err := os.Stat(filepath.Join(f.store, m.ID, writingMarker)); err != nil {
			t.Errorf("no marker while the write runs: %v", err)
		}
	}
	id := f.snap(`{"operation":"rename_file","filePath":"a.txt","newPath":"b.txt","overwrite":true}`)
	if changes != 1 {
		t.Fatalf("%d changes seen, want 1", changes)
	}
	es, err := os.ReadDir(filepath.Join(f.store, id))
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range es {
		if strings.HasSuffix(de.Name(), ".tmp") || de.Name() == writingMarker {
			t.Errorf("left in snapshot %s after the write: %s", id, de.Name())
		}
	}
	f.s.afterChange = nil
	if text, isErr := f.run(`{"operation":"restore_snapshot","snapshotId":"` + id + `"}`); isErr {
		t.Fatalf("restore: %s", text)
	}
	if f.read("a.txt") != "content of a.txt\n" || f.read("b.txt") != "content of b.txt\n" {
		t.Errorf("after the restore: a.txt %q, b.txt %q", f.read("a.txt"), f.read("b.txt"))
	}
}

// crashRootEnv names the root TestCrashMidWriteHelper writes in, in the process that
// TestCrashMidWriteRestores starts and kills.
const crashRootEnv = "TOOLWARDEN_TEST_CRASH_ROOT"

// In the child process only: a rename that kills its process right after the change.
func TestCrashMidWriteHelper(t *testing.T) {
	root := os.Getenv(crashRootEnv)
	if root == "" {
		t.Skip("run by TestCrashMidWriteRestores")
	}
	s, err := New(&Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	s.Add(s.FileOperations())
	ws, err := s.Workspace("c1")
	if err != nil {
		t.Fatal(err)
	}
	s.afterChange = func() { _ = syscall.Kill(os.Getpid(), syscall.SIGKILL) }
	runFileOp(t, s, ws, `{"operation":"rename_file","filePath":"a.txt","newPath":"sub/b.txt","overwrite":true}`)
	t.Fatal("the write went on after its change")
}

// A process killed right after a write's change (a rename into a directory it made)
// leaves a snapshot that restores it: the next server on the root finishes it and
// puts both paths back, the directory the write made removed.
func TestCrashMidWriteRestores(t *testing.T) {
	t.Parallel()
	f := newDurableFixture(t)
	if err := os.WriteFile(filepath.Join(f.ws, "a.txt"), []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashMidWriteHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashRootEnv+"="+f.root)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the helper was not killed mid-write: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(f.ws, "sub", "b.txt")); err != nil {
		t.Fatalf("the helper's rename did not happen: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(f.store, "call-1", writingMarker)); err != nil {
		t.Fatalf("the killed write left no marker: %v", err)
	}
	if text, isErr := f.run(`{"operation":"restore_snapshot","snapshotId":"call-1"}`); isErr {
		t.Fatalf("restore after the crash: %s", text)
	}
	if f.read("a.txt") != "precious\n" {
		t.Errorf("a.txt after the restore: %q", f.read("a.txt"))
	}
	if _, err := os.Lstat(filepath.Join(f.ws, "sub")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the directory the write made is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(f.store, "call-1", writingMarker)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the finished snapshot's marker is still there: %v", err)
	}
}

// take starts, in f's server, the snapshot of a write of call callID that keeps paths
// rels, and puts it on disk, as a write does before its change.
func (f *durableFixture) take(callID string, rels ...string) *snapshot {
	f.t.Helper()
	sn, err := f.s.newSnapshot(Call{Meta: callmeta.Meta{ConversationID: "c1", CallID: callID}, Workspace: f.ws}, "edit_file")
	if err != nil {
		f.t.Fatal(err)
	}
	area := filepath.Base(f.ws)
	ar, err := f.s.openArea(area)
	if err != nil {
		f.t.Fatal(err)
	}
	defer ar.Close()
	for _, rel := range rels {
		if err := sn.keep(ar, area, rel); err != nil {
			f.t.Fatal(err)
		}
	}
	if len(rels) > 0 {
		if err := sn.flush(); err != nil {
			f.t.Fatal(err)
		}
	}
	return sn
}

// crash ends sn's write as a crash would: the marker stays, its flock released.
func crash(t *testing.T, sn *snapshot) {
	t.Helper()
	if sn.marker == nil {
		_ = sn.store.Close()
		return
	}
	// A process another test forks holds a copy of the marker's descriptor, and so its
	// lock, until it execs: the crash is over once the lock is free, which a second
	// open of the same file (its own lock) waits for.
	probe, err := os.Open("/proc/self/fd/" + strconv.Itoa(int(sn.marker.Fd())))
	sn.marker.Close()
	_ = sn.store.Close()
	if err != nil {
		return
	}
	defer probe.Close()
	testkit.WaitFor(t, 10*time.Second, func() bool {
		return syscall.Flock(int(probe.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil
	}, "the crashed write's marker stayed locked")
	_ = syscall.Flock(int(probe.Fd()), syscall.LOCK_UN)
}

// abandon takes the snapshot of a write of call callID that keeps paths rels, lets
// change run (the write's change) and then ends as a crash would.
func (f *durableFixture) abandon(callID string, change func(), rels ...string) {
	f.t.Helper()
	sn := f.take(callID, rels...)
	change()
	crash(f.t, sn)
}

// The snapshot of a write a crash ended is finished by the next prune pass as the write
// would have finished it: a path it kept but had not changed yet is dropped, so a
// restore does not put it back over what was written there since; one taken before
// any change is removed. A write still running (its marker held) is left alone, and
// its restore refused.
func TestAbandonedSnapshotFinished(t *testing.T) {
	t.Parallel()
	f := newDurableFixture(t)
	write := func(rel, content string) {
		if err := os.WriteFile(filepath.Join(f.ws, rel), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.txt", "a before\n")
	write("b.txt", "b before\n")
	f.abandon("crashed", func() { write("a.txt", "a changed\n") }, "a.txt", "b.txt")
	f.abandon("early", func() {}) // killed before it kept anything

	live := f.take("live", "c.txt") // a write still running, here

	if n, err := f.s.PruneSnapshots(time.Time{}); err != nil || n != 0 {
		t.Fatalf("prune: %d %v", n, err)
	}
	var paths []string
	for _, e := range f.manifest("crashed").Entries {
		paths = append(paths, e.Path)
	}
	if strings.Join(paths, " ") != "a.txt" {
		t.Errorf("the crashed write's snapshot lists %v, want a.txt alone", paths)
	}
	if _, err := os.Stat(filepath.Join(f.store, "crashed", writingMarker)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the finished snapshot's marker: %v", err)
	}
	if got := strings.Join(f.snapshots(), " "); got != "crashed live" {
		t.Errorf("snapshots after the pass: %s, want crashed and live (early removed)", got)
	}
	if _, err := os.Stat(filepath.Join(f.store, "live", writingMarker)); err != nil {
		t.Errorf("the running write's marker: %v", err)
	}
	if text, isErr := f.run(`{"operation":"restore_snapshot","snapshotId":"live"}`); !isErr || !strings.Contains(text, errStillWriting.Error()) {
		t.Errorf("restoring a snapshot still being written: %v %s", isErr, text)
	}
	live.discard()

	write("b.txt", "b written since\n")
	if text, isErr := f.run(`{"operation":"restore_snapshot","snapshotId":"crashed"}`); isErr {
		t.Fatalf("restore: %s", text)
	}
	if f.read("a.txt") != "a before\n" || f.read("b.txt") != "b written since\n" {
		t.Errorf("after the restore: a.txt %q, b.txt %q", f.read("a.txt"), f.read("b.txt"))
	}
}

// A write that failed part way, and crashed as it dropped what it had not changed from
// its snapshot, leaves a snapshot that still restores what it changed: the blobs of the
// paths dropped go only once a manifest without them is on disk.
func TestCrashWhileDroppingUnchangedPaths(t *testing.T) {
	t.Parallel()
	f := newDurableFixture(t)
	for _, n := range []string{"p.txt", "q.txt"} {
		if err := os.WriteFile(filepath.Join(f.ws, n), []byte(n+" before\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sn := f.take("dropping", "p.txt", "q.txt")
	if err := os.WriteFile(filepath.Join(f.ws, "p.txt"), []byte("p changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.s.dropUnchanged(sn) // the write's failure path; then the process dies
	crash(t, sn)

	if text, isErr := f.run(`{"operation":"restore_snapshot","snapshotId":"dropping"}`); isErr {
		t.Fatalf("restore: %s", text)
	}
	if f.read("p.txt") != "p.txt before\n" || f.read("q.txt") != "q.txt before\n" {
		t.Errorf("after the restore: p.txt %q, q.txt %q", f.read("p.txt"), f.read("q.txt"))
	}
}

// A restore that meets its snapshot's write just ending waits for it rather than saying
// to try again (a write's end, or a process forked during it that has not exec'd yet,
// holds the marker's lock for a moment).
func TestRestoreWaitsForAWriteEnding(t *testing.T) {
	t.Parallel()
	f := newDurableFixture(t)
	c := filepath.Join(f.ws, "c.txt")
	if err := os.WriteFile(c, []byte("c before\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var (
		sn    *snapshot
		once  sync.Once
		ended = make(chan error, 1)
	)
	// The write ends once the restore has found its marker locked.
	f.s.flock = func(fd, how int) error {
		err := unix.Flock(fd, how)
		if errors.Is(err, unix.EWOULDBLOCK) {
			once.Do(func() { go func() { ended <- sn.save() }() })
		}
		return err
	}
	sn = f.take("ending", "c.txt")
	if err := os.WriteFile(c, []byte("c changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if text, isErr := f.run(`{"operation":"restore_snapshot","snapshotId":"ending"}`); isErr {
		t.Fatalf("restore: %s", text)
	}
	select {
	case err := <-ended:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the write never ended: the restore did not find its marker locked")
	}
	if got := f.read("c.txt"); got != "c before\n" {
		t.Errorf("after the restore: c.txt %q, want c before", got)
	}
}

// runAs runs file_operations with args in c1 as call callID (its snapshot is named
// after it).
func (f *durableFixture) runAs(callID, args string) (string, bool) {
	f.t.Helper()
	op, err := f.s.tools["file_operations"].operation(json.RawMessage(args))
	if err != nil {
		f.t.Fatal(err)
	}
	meta := callmeta.Meta{ConversationID: "c1", CallID: callID}
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

// A restore says which paths changed after the write it undoes (a terminal command
// edited the file since): it puts them back as asked, and names the snapshot that
// keeps what they held, which brings that back. Undoing two writes of one file, the
// later first, says nothing: each finds what its write left.
func TestRestoreSaysWhatChangedSince(t *testing.T) {
	t.Parallel()
	f := newDurableFixture(t)
	notes := filepath.Join(f.ws, "notes.txt")
	if err := os.WriteFile(notes, []byte("one two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	edit := func(call, from, to string) {
		t.Helper()
		if text, isErr := f.runAs(call, `{"operation":"replace_string","filePath":"notes.txt","oldString":"`+from+`","newString":"`+to+`"}`); isErr {
			t.Fatalf("edit %s: %s", call, text)
		}
	}
	restore := func(call, id string) string {
		t.Helper()
		text, isErr := f.runAs(call, `{"operation":"restore_snapshot","snapshotId":"`+id+`"}`)
		if isErr {
			t.Fatalf("restore %s: %s", id, text)
		}
		return text
	}

	edit("w1", "two", "three")
	edit("w2", "one", "uno")
	if text := restore("r2", "w2"); strings.Contains(text, "changed after") {
		t.Errorf("undoing the last write of an unchanged file: %s", text)
	}
	if text := restore("r1", "w1"); strings.Contains(text, "changed after") {
		t.Errorf("undoing the first write after the second was undone: %s", text)
	}
	if got := f.read("notes.txt"); got != "one two\n" {
		t.Fatalf("after both restores: %q", got)
	}

	edit("w3", "two", "four")
	if err := os.WriteFile(notes, []byte("one four, and a line a terminal added\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	text := restore("r3", "w3")
	if !strings.Contains(text, "notes.txt changed after the write this snapshot undoes") || !strings.Contains(text, "kept in snapshot r3") {
		t.Fatalf("undoing a write of a file changed since: %s", text)
	}
	if got := f.read("notes.txt"); got != "one two\n" {
		t.Errorf("after the restore: %q, want what the write replaced", got)
	}
	restore("r4", "r3")
	if got := f.read("notes.txt"); got != "one four, and a line a terminal added\n" {
		t.Errorf("restoring the restore's snapshot: %q, want the later change back", got)
	}
	// Restored twice: the second finds what the snapshot keeps, and loses nothing.
	edit("w5", "four", "five")
	restore("r5", "w5")
	if text := restore("r6", "w5"); strings.Contains(text, "changed after") {
		t.Errorf("restoring a snapshot a second time: %s", text)
	}
	// The record is kept beside the manifest, unsynced: a lost or torn one costs the
	// check, never the undo.
	edit("w7", "four", "seven")
	if err := os.WriteFile(notes, []byte("changed by hand\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.store, "w7", afterName), []byte(`{"torn`), 0o600); err != nil {
		t.Fatal(err)
	}
	if text := restore("r7", "w7"); strings.Contains(text, "changed after") {
		t.Errorf("a torn record of what the write left: %s", text)
	}
	if got := f.read("notes.txt"); got != "one four, and a line a terminal added\n" {
		t.Errorf("restored with a torn record: %q", got)
	}
}
