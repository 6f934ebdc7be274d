package builtin

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Snapshots: before a write changes anything, what it changes is kept under
// <root>/.snapshots/<id> (the previous bytes and mode of each file, or that the path
// did not exist), and restore_snapshot puts exactly that back. The store is outside
// every workspace, so no file operation reaches it.
//
// The manifest lists a path before the write changes it: each blob is written and
// synced, then the manifest (naming it) is written to a temporary file, synced, renamed
// into place and its directory synced (writeDurable), before the change. A crash or
// power loss cannot leave a manifest that does not parse, or one naming a blob that did
// not reach the disk; the manifest records each blob's size and SHA-256, and a restore
// refuses a blob that no longer matches. While its write runs, a snapshot holds a
// flocked marker (writingMarker); one a crash left is finished by the next pass of
// PruneSnapshots, or the restore that asks for it, as the write would have finished it:
// the paths it had not changed yet are dropped.

// snapEntry is one path a write changes, as it was before.
type snapEntry struct {
	Area    string      `json:"area"`
	Path    string      `json:"path"`
	Existed bool        `json:"existed"`
	Dir     bool        `json:"dir,omitempty"`
	Link    string      `json:"link,omitempty"`
	Mode    fs.FileMode `json:"mode,omitempty"` // keptMode's bits
	Blob    string      `json:"blob,omitempty"`
	// Size and SHA256 are the blob's; a manifest written before they were recorded
	// has neither, and its blobs are put back unchecked.
	Size   int64  `json:"size,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	// After is what the write left at the path, as a preview's fingerprint reads it
	// ("absent" or "sha256:…"; "" for what that does not describe, or when it was not
	// recorded): a restore that finds something else there says the path changed after
	// the write, and where what it replaced is kept. Kept in afterName, not the manifest.
	After string `json:"-"`
}

// fingerprint is what e kept as a preview's fingerprint reads it: "absent", the
// SHA-256 of a file, or "" for what a fingerprint does not describe (a directory, a
// symlink, an old manifest's file without its SHA-256).
func (e snapEntry) fingerprint() string {
	switch {
	case !e.Existed:
		return "absent"
	case e.Blob != "" && e.Link == "" && !e.Dir && e.SHA256 != "":
		return "sha256:" + e.SHA256
	}
	return ""
}

// keptMode are the mode bits a snapshot keeps and a restore sets again.
const keptMode = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

type snapManifest struct {
	ID           string      `json:"id"`
	Conversation string      `json:"conversation"`
	Operation    string      `json:"operation"`
	Created      time.Time   `json:"created"`
	Entries      []snapEntry `json:"entries"`
}

// snapshot is a snapshot being taken.
type snapshot struct {
	store *os.Root
	// bytes counts what the store holds (Server.snapBytes); nil: not counted (a
	// snapshot a crash left, being finished).
	bytes *atomic.Int64
	m     snapManifest
	// marker is the flocked writingMarker while the write runs (nil on a file system
	// without flock, whose marker is left unlocked); marked: the marker exists.
	marker *os.File
	marked bool
	// written is how many entries the manifest on disk lists; stale: entries were
	// dropped since it was written; orphans are the blobs of those, removed once a
	// manifest without them is on disk (before, a crash would leave one naming a blob
	// that is gone, and its snapshot would restore nothing).
	written int
	stale   bool
	orphans []string
}

// manifestName is a snapshot's manifest in its directory.
const manifestName = "manifest.json"

// writingMarker is in a snapshot's directory while its write runs, flocked by the
// writer: one nobody holds is what a crash left (finishAbandoned).
const writingMarker = "writing"

func (s *Server) openStore() (*os.Root, error) {
	rr, err := os.OpenRoot(s.opts.Root)
	if err != nil {
		return nil, err
	}
	defer rr.Close()
	if err := rr.Mkdir(snapshotDir, 0o700); err == nil {
		// A store that vanished in a power loss would take the snapshots in it along.
		if err := syncDir(rr, "."); err != nil {
			return nil, err
		}
	} else if !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	return rr.OpenRoot(snapshotDir)
}

// lookStore opens the snapshot store to read it, making none (openStore makes it): nil,
// and no error, when there is none.
func (s *Server) lookStore() (*os.Root, error) {
	rr, err := os.OpenRoot(s.opts.Root)
	if err != nil {
		return nil, err
	}
	defer rr.Close()
	store, err := rr.OpenRoot(snapshotDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return store, err
}

// syncDir fsyncs directory dir of root, so that the names just made or renamed in it
// survive a power loss.
func syncDir(root *os.Root, dir string) error {
	f, err := root.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, syscall.EINVAL) {
		return nil // a file system that cannot sync a directory (as services/db's syncPath allows)
	}
	return err
}

// writeDurable puts b at name in store whole or not at all, and on disk before it
// returns: a synced temporary file renamed over it (replaceFile), and the directory
// synced (which makes the names of the blobs written before it durable too).
func writeDurable(store *os.Root, name string, b []byte) error {
	if err := replaceFile(store, name, b, 0o600, false); err != nil {
		return err
	}
	return syncDir(store, filepath.Dir(name))
}

// writeBlob writes b, synced, to the new file name in store. A crash can leave it
// partial, but no manifest names it before it is whole (flush comes after), and the
// manifest's directory sync makes its name durable.
func writeBlob(store *os.Root, name string, b []byte) error {
	f, err := store.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = store.Remove(name)
	}
	return err
}

// mark makes snapshot id's writingMarker, flocked: under a temporary name first, so
// that no pass of finishAbandoned finds it before it is locked.
func (s *Server) mark(store *os.Root, id string) (*os.File, error) {
	name := filepath.Join(id, writingMarker)
	tmp := name + "." + randomID()[:12] + ".tmp"
	f, err := store.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	if err := flockRetry(f, s.flock, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		f = nil
		if !noFlock(err) {
			_ = store.Remove(tmp)
			return nil, fmt.Errorf("flock: %w", err)
		}
	}
	if err := store.Rename(tmp, name); err != nil {
		if f != nil {
			f.Close()
		}
		_ = store.Remove(tmp)
		return nil, err
	}
	return f, nil
}

// newSnapshot starts the snapshot of a write by call c (named after its call id when
// it has a plain one).
func (s *Server) newSnapshot(c Call, op string) (*snapshot, error) {
	store, err := s.openStore()
	if err != nil {
		return nil, fmt.Errorf("the snapshot store: %w", err)
	}
	if s.trimDue() {
		s.trimSnapshots(store, false)
	}
	id := c.CallID
	if !safeName.MatchString(id) {
		id = randomID()
	}
	err = store.Mkdir(id, 0o700)
	if errors.Is(err, fs.ErrExist) {
		id += "-" + randomID()[:8]
		err = store.Mkdir(id, 0o700)
	}
	made := err == nil // only a directory this call made is removed on failure
	var marker *os.File
	if err == nil {
		marker, err = s.mark(store, id)
	}
	if err == nil {
		err = syncDir(store, ".") // the snapshot's directory, before its blobs
	}
	if err != nil {
		if marker != nil {
			marker.Close()
		}
		if made {
			_ = store.RemoveAll(id)
		}
		store.Close()
		return nil, fmt.Errorf("the snapshot store: %w", err)
	}
	return &snapshot{store: store, marker: marker, marked: true, bytes: &s.snapBytes,
		m: snapManifest{ID: id, Conversation: c.ConversationID, Operation: op, Created: time.Now().UTC()}}, nil
}

func randomID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// keep records path rel of area (opened as ar) as it is now; flush puts the record on
// disk.
func (sn *snapshot) keep(ar *os.Root, area, rel string) error {
	e := snapEntry{Area: area, Path: rel}
	fi, err := ar.Lstat(rel)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENAMETOOLONG):
		// A path whose name is too long cannot exist (a write that failed on it
		// snapshotted it as absent, and its restore must get past it).
	case err != nil:
		return err
	case fi.Mode()&fs.ModeSymlink != 0:
		e.Existed = true
		if e.Link, err = ar.Readlink(rel); err != nil {
			return err
		}
	case fi.IsDir():
		e.Existed, e.Dir, e.Mode = true, true, fi.Mode()&keptMode
	case fi.Mode().IsRegular():
		if fi.Size() > maxFileBytes {
			return fmt.Errorf("%w: %s is %d bytes, more than the %d a snapshot keeps; it cannot be changed here", errTooBigToKeep, rel, fi.Size(), maxFileBytes)
		}
		b, err := readRegular(ar, rel)
		if err != nil {
			return err
		}
		e.Existed, e.Mode = true, fi.Mode()&keptMode
		e.Blob = fmt.Sprintf("%d.blob", len(sn.m.Entries))
		sum := sha256.Sum256(b)
		e.Size, e.SHA256 = int64(len(b)), hex.EncodeToString(sum[:])
		if err := writeBlob(sn.store, filepath.Join(sn.m.ID, e.Blob), b); err != nil {
			return err
		}
		if sn.bytes != nil {
			sn.bytes.Add(int64(len(b)))
		}
	default:
		return fmt.Errorf("%s is not a regular file", rel)
	}
	sn.m.Entries = append(sn.m.Entries, e)
	return nil
}

// flush writes the manifest when it lacks a path kept since it was written (or lists
// one dropped): before the write changes a path, its record is on disk, so a crash
// after the change leaves a snapshot that undoes it.
func (sn *snapshot) flush() error {
	if len(sn.m.Entries) == sn.written && !sn.stale {
		return nil
	}
	b, err := json.MarshalIndent(sn.m, "", "  ")
	if err != nil {
		return err
	}
	if err := writeDurable(sn.store, filepath.Join(sn.m.ID, manifestName), b); err != nil {
		return err
	}
	sn.written, sn.stale = len(sn.m.Entries), false
	for _, blob := range sn.orphans {
		_ = sn.store.Remove(filepath.Join(sn.m.ID, blob))
	}
	sn.orphans = nil
	return nil
}

// save finishes the snapshot of a write that ended: the manifest on disk lists what it
// keeps, and the marker goes. A marker whose removal a crash undoes is finished again
// by finishAbandoned, to the same result.
func (sn *snapshot) save() error {
	if err := sn.flush(); err != nil {
		return err
	}
	if sn.marked {
		_ = sn.store.Remove(filepath.Join(sn.m.ID, writingMarker))
		sn.marked = false
	}
	sn.unlock()
	return nil
}

// unlock closes the marker, which releases its flock.
func (sn *snapshot) unlock() {
	if sn.marker != nil {
		sn.marker.Close()
		sn.marker = nil
	}
}

// errStillWriting: a snapshot's write has not finished.
var errStillWriting = errors.New("its write has not finished yet")

// stillWritingWait is how long a restore waits for a snapshot's marker to be free
// before it says the write has not finished. A process forked while a write held its
// marker (a terminal, run_command, a stdio server) holds a copy of the descriptor, and
// so the lock, until it execs: a write just ended can look as if it still ran for that
// moment, which is longer on a loaded machine.
const stillWritingWait = 500 * time.Millisecond

// finishAbandonedWait is finishAbandoned, tried again for up to stillWritingWait while it
// says the write still runs.
func (s *Server) finishAbandonedWait(ctx context.Context, store *os.Root, id string) error {
	deadline := time.Now().Add(stillWritingWait)
	for {
		_, err := s.finishAbandoned(store, id)
		if !errors.Is(err, errStillWriting) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// finishAbandoned finishes snapshot id of store if a crash ended its write: its marker
// is left and nobody holds its flock. As the write would have (done), it drops the
// paths the write had not changed and removes a snapshot left with none; a snapshot
// with no manifest yet was taken of nothing changed. It returns errStillWriting while a
// write (of any process sharing the root) holds the marker; on a file system without
// flock it cannot tell, and leaves the snapshot as it is.
func (s *Server) finishAbandoned(store *os.Root, id string) (finished bool, err error) {
	if !safeName.MatchString(id) {
		return false, nil
	}
	name := filepath.Join(id, writingMarker)
	f, err := store.OpenFile(name, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	defer f.Close()
	switch err := flockRetry(f, s.flock, unix.LOCK_EX|unix.LOCK_NB); {
	case errors.Is(err, unix.EWOULDBLOCK):
		return false, errStillWriting
	case noFlock(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("flock: %w", err)
	}
	if _, err := store.Lstat(name); errors.Is(err, fs.ErrNotExist) {
		return false, nil // another process finished it as this one waited for the lock
	}
	b, err := store.ReadFile(filepath.Join(id, manifestName))
	if errors.Is(err, fs.ErrNotExist) {
		return true, store.RemoveAll(id)
	} else if err != nil {
		return false, err
	}
	sn := &snapshot{store: store, marked: true}
	if err := json.Unmarshal(b, &sn.m); err != nil {
		return false, fmt.Errorf("snapshot %s: %w", id, err)
	}
	sn.written = len(sn.m.Entries)
	// Under the paths' edit locks, as a write's own end is: a write running now would
	// look like one of the crashed write's changes.
	locks := make([]target, len(sn.m.Entries))
	for i, e := range sn.m.Entries {
		locks[i] = target{area: e.Area, rel: e.Path}
	}
	unlock, err := s.lockEdits(locks...)
	if err != nil {
		return false, err
	}
	defer unlock()
	s.dropUnchanged(sn)
	if len(sn.m.Entries) == 0 {
		return true, store.RemoveAll(id)
	}
	return true, sn.save()
}

// errDamagedBlob: what a snapshot kept of a file is not what its manifest recorded.
var errDamagedBlob = errors.New("what the snapshot kept of it is damaged")

// checkBlobs refuses snapshot m (of id) when a blob of it is missing, or (a manifest
// that records them) has not the size and SHA-256 recorded: a restore must not put a
// damaged file in place of one, and it is checked before anything is changed.
func checkBlobs(store *os.Root, id string, m snapManifest) error {
	for _, e := range m.Entries {
		if e.Blob == "" || e.Link != "" {
			continue
		}
		if e.SHA256 == "" { // an old manifest's: nothing to check it against but that it is there
			if _, err := store.Lstat(filepath.Join(id, e.Blob)); err != nil {
				return blobError(id, e, err)
			}
			continue
		}
		f, err := store.Open(filepath.Join(id, e.Blob))
		if err != nil {
			return blobError(id, e, err)
		}
		h := sha256.New()
		n, err := io.Copy(h, io.LimitReader(f, max(e.Size, maxFileBytes)+1))
		f.Close()
		if err != nil {
			return blobError(id, e, err)
		}
		if err := matchBlob(e, n, h.Sum(nil)); err != nil {
			return blobError(id, e, err)
		}
	}
	return nil
}

// matchBlob checks a blob of n bytes and SHA-256 sum against what e recorded (when it
// recorded them).
func matchBlob(e snapEntry, n int64, sum []byte) error {
	switch {
	case e.SHA256 == "":
		return nil
	case n != e.Size:
		return fmt.Errorf("%w: %d bytes, not the %d it kept", errDamagedBlob, n, e.Size)
	case hex.EncodeToString(sum) != e.SHA256:
		return fmt.Errorf("%w: its SHA-256 is not the one it recorded", errDamagedBlob)
	}
	return nil
}

func blobError(id string, e snapEntry, err error) error {
	return fmt.Errorf("snapshot %s cannot be restored: %s (%s): %w; nothing was restored", id, filepath.Join(e.Area, e.Path), e.Blob, err)
}

// dropUnchanged leaves in sn only the paths that no longer hold what it kept of them:
// the snapshot of a write that failed part way must not put a path the write never
// changed back over what is written there later. A path kept more than once is judged
// by its first entry (what it held before the write); one that cannot be compared stays.
func (s *Server) dropUnchanged(sn *snapshot) {
	type key struct{ area, path string }
	changed := map[key]bool{}
	for _, e := range sn.m.Entries {
		k := key{e.Area, e.Path}
		if _, seen := changed[k]; !seen {
			changed[k] = !s.holds(sn, e)
		}
	}
	kept := sn.m.Entries[:0:0]
	for _, e := range sn.m.Entries {
		if changed[key{e.Area, e.Path}] {
			kept = append(kept, e)
		} else if e.Blob != "" {
			sn.orphans = append(sn.orphans, e.Blob)
		}
	}
	sn.stale = sn.stale || len(kept) < len(sn.m.Entries)
	sn.m.Entries = kept
}

// holds reports whether e's path holds exactly what e kept of it: nothing, the same
// symlink, a directory of the same mode, or a file of the same mode and bytes.
func (s *Server) holds(sn *snapshot, e snapEntry) bool {
	ar, err := s.openArea(e.Area)
	if err != nil {
		return false
	}
	defer ar.Close()
	fi, err := ar.Lstat(e.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENAMETOOLONG):
		return !e.Existed // as keep counts it
	case err != nil || !e.Existed:
		return false
	case e.Link != "":
		l, err := ar.Readlink(e.Path)
		return fi.Mode()&fs.ModeSymlink != 0 && err == nil && l == e.Link
	case e.Dir:
		return fi.IsDir() && fi.Mode()&keptMode == e.Mode
	case !fi.Mode().IsRegular() || fi.Mode()&keptMode != e.Mode:
		return false
	}
	was, err := sn.store.ReadFile(filepath.Join(sn.m.ID, e.Blob))
	if err != nil || int64(len(was)) != fi.Size() {
		return false
	}
	now, err := readRegular(ar, e.Path)
	return err == nil && bytes.Equal(now, was)
}

// discard removes a snapshot whose write did not happen.
func (sn *snapshot) discard() {
	_ = sn.store.RemoveAll(sn.m.ID)
	sn.unlock()
	sn.close()
}

func (sn *snapshot) close() {
	sn.unlock()
	_ = sn.store.Close()
}

// errNoSnapshot: a snapshot's manifest is not in the store (PruneSnapshots removed it).
var errNoSnapshot = errors.New("no snapshot")

// manifest reads snapshot id's manifest from store, refusing one that another
// conversation than c's took with the very error of an id that is not there: an id
// guessed or seen tells nothing of which ids other conversations use.
func manifest(store *os.Root, c Call, id string) (snapManifest, error) {
	m, err := readManifest(store, id)
	if err == nil && m.Conversation != c.ConversationID {
		return snapManifest{}, noSnapshot(id)
	}
	return m, err
}

func noSnapshot(id string) error { return fmt.Errorf("snapshotId: %w %s", errNoSnapshot, id) }

// readManifest reads snapshot id's manifest from store, whichever conversation took it.
func readManifest(store *os.Root, id string) (snapManifest, error) {
	var m snapManifest
	if !safeName.MatchString(id) {
		return m, fmt.Errorf("snapshotId: %q is not a snapshot id", id)
	}
	b, err := store.ReadFile(filepath.Join(id, manifestName))
	if errors.Is(err, fs.ErrNotExist) {
		return m, noSnapshot(id)
	} else if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("snapshot %s: %w", id, err)
	}
	return m, nil
}

// restoreTargets are the paths a restore of m must be allowed to write outside c's
// workspace: every path it restores (undoing a rename writes both of its paths), newest
// change first, but for a directory the write created above another of them, which
// goes with it as it came with it.
func (s *Server) restoreTargets(c Call, m snapManifest) []target {
	ws := filepath.Base(c.Workspace)
	seen := map[snapEntry]bool{}
	var ts []target
	for i := len(m.Entries) - 1; i >= 0; i-- {
		e := m.Entries[i]
		k := snapEntry{Area: e.Area, Path: e.Path}
		if e.Area == ws || seen[k] || !e.Existed && parentOfAnother(m, e) {
			continue
		}
		seen[k] = true
		abs := filepath.Join(s.opts.Root, e.Area, e.Path)
		ts = append(ts, target{area: e.Area, rel: e.Path, abs: abs, shown: abs})
	}
	return ts
}

// parentOfAnother reports whether e's path holds another entry's path of its area.
func parentOfAnother(m snapManifest, e snapEntry) bool {
	prefix := e.Path + string(filepath.Separator)
	for _, o := range m.Entries {
		if o.Area == e.Area && strings.HasPrefix(o.Path, prefix) {
			return true
		}
	}
	return false
}

// restoreTargetsOf is restoreTargets of snapshot id as c would restore it; nil when
// it cannot be read.
func (s *Server) restoreTargetsOf(c Call, id string) []target {
	m, ok := s.lookManifest(c, id)
	if !ok {
		return nil
	}
	return s.restoreTargets(c, m)
}

// lookManifest reads snapshot id's manifest as c may (manifest), looking without making
// the snapshot store; ok is false when it cannot be read. A snapshot a crash left
// unfinished is not finished here (a look changes nothing): its manifest may list more
// paths than the restore will put back.
func (s *Server) lookManifest(c Call, id string) (m snapManifest, ok bool) {
	store, err := s.lookStore()
	if err != nil || store == nil {
		return m, false
	}
	defer store.Close()
	m, err = manifest(store, c, id)
	return m, err == nil
}

// SnapshotGone says why snapshot id, taken in conversation, is no longer there for
// restore_snapshot to put back, or "" while it is (or when it cannot tell: the restore
// then says what is wrong). A rollback is planned with it: a restore of a pruned
// snapshot would fail when it runs, and end the rollback before the undo steps after it.
// It looks as restoreTargetsOf does (lookStore), finishing nothing and making no store.
func (s *Server) SnapshotGone(conversation, id string) (string, error) {
	if !safeName.MatchString(id) {
		return "", nil // not a snapshot id: the restore's to report
	}
	gone := fmt.Sprintf("its snapshot %s is no longer in the snapshot store (pruned: a snapshot is kept %s, and the oldest go first when the store passes its budget; or taken on a replica with another built-in root)", id, retentionText())
	store, err := s.lookStore()
	if err != nil {
		return "", fmt.Errorf("builtin: snapshot %s: %w", id, err)
	} else if store == nil {
		return gone, nil // no store: no snapshot was kept since it was made
	}
	defer store.Close()
	// Whose it is is the restore's to check (it answers another conversation's id as
	// one that is not there): here only whether it is there.
	if _, err := readManifest(store, id); errors.Is(err, errNoSnapshot) {
		return gone, nil
	}
	return "", nil
}

// retentionText is SnapshotRetention as a person reads it ("7 days").
func retentionText() string {
	const day = 24 * time.Hour
	if SnapshotRetention%day == 0 {
		return fmt.Sprintf("%d days", SnapshotRetention/day)
	}
	return SnapshotRetention.String()
}

// restore puts back what snapshot id kept, newest change first; only the conversation
// that took it may restore it, and outside its workspace only as the path guard lets it
// write now (a grant for restore_snapshot; never another person's workspace): what
// allowed the write once does not allow its undoing for as long as the snapshot lasts.
// w keeps, first, what each path holds now, so the restore is undone as any write is.
// A path that cannot be restored does not stop the others: a directory the write
// created that holds files made since, and a file grown too large to keep for undoing,
// are left (with a note), and the other failures are returned together after every
// path was tried.
func (s *Server) restore(ctx context.Context, w *write, id string) (restored, notes []string, err error) {
	c := w.c
	store, err := s.openStore()
	if err != nil {
		return nil, nil, err
	}
	defer store.Close()
	// Held while it is read and put back: the restore keeps what it replaces first (a
	// snapshot of its own), and that write may trim the store, whose oldest snapshot
	// may be this one.
	defer s.pinSnapshot(id)()
	// Whose it is comes first: finishing another conversation's snapshot, or saying its
	// write still runs, would tell this one that the id is in use. (A snapshot with no
	// manifest yet is not there to restore: it was taken of nothing changed so far.)
	if _, err := manifest(store, c, id); err != nil {
		return nil, nil, err
	}
	if err := s.finishAbandonedWait(ctx, store, id); err != nil {
		return nil, nil, fmt.Errorf("snapshot %s cannot be restored now: %w; try again when it has", id, err)
	}
	m, err := manifest(store, c, id) // again: finishing it may have dropped paths, or all of them
	if err != nil {
		return nil, nil, err
	}
	m = withAfter(store, id, m)
	if err := checkBlobs(store, id, m); err != nil {
		return nil, nil, err
	}
	// Every path is looked at before a grant is used: a one-time grant is not used up
	// for a restore that another path stops.
	ts := s.restoreTargets(c, m)
	peek := c
	peek.peek = true
	for _, t := range ts {
		if err := s.mayWrite(ctx, peek, w.op, t); err != nil {
			return nil, nil, err
		}
	}
	for _, t := range ts {
		if w.anyGrant[t.area] {
			continue // a grant with no target allowed a path here: it allows all (write.target)
		}
		anyGrant, err := s.mayWriteAny(ctx, c, w.op, t)
		if err != nil {
			return nil, nil, err
		}
		if anyGrant {
			w.allowAny(t.area)
		}
	}
	// Every path it puts back is locked as an edit locks its file (in the workspace too).
	locks := make([]target, len(m.Entries))
	for i, e := range m.Entries {
		locks[i] = target{area: e.Area, rel: e.Path}
	}
	unlock, err := s.lockEdits(locks...)
	if err != nil {
		return nil, nil, err
	}
	defer unlock()
	// A step previewed (preview_restore.go) puts back nothing when a path changed since:
	// the diff approved is no longer what it would do. Checked under the locks.
	if c.Expect != "" {
		if changed := s.restoreStale(s.restorePaths(c, m), c.Expect); changed != "" {
			return nil, nil, fmt.Errorf("stale: %s changed since the plan's preview; nothing was restored", changed)
		}
	}
	var failed []error
	var dirs []snapEntry
	var notKept *modeNotKept
	var since []string // paths changed after the write, put back all the same
	for i := len(m.Entries) - 1; i >= 0; i-- {
		e := m.Entries[i]
		shown := filepath.Join(e.Area, e.Path)
		changed := s.changedSince(e)
		err := s.restoreEntry(w, store, id, e)
		if changed && (err == nil || errors.As(err, &notKept)) {
			since = append(since, shown)
		}
		switch {
		case err == nil:
			restored = append(restored, filepath.Join(s.opts.Root, e.Area, e.Path))
			if e.Existed && e.Dir {
				dirs = append(dirs, e)
			}
		case errors.As(err, &notKept):
			restored = append(restored, filepath.Join(s.opts.Root, e.Area, e.Path))
			notes = append(notes, fmt.Sprintf("%s was restored, but %v", shown, err))
		case errors.Is(err, errMadeSince):
			notes = append(notes, fmt.Sprintf("%s was left: the write created this directory, and it holds files made since", shown))
		case errors.Is(err, errTooBigToKeep):
			notes = append(notes, fmt.Sprintf("%s was left: it is now larger than the %d MiB a snapshot keeps, so restoring it could not be undone (move or shrink it, then restore again)", shown, maxFileBytes>>20))
		default:
			failed = append(failed, fmt.Errorf("restoring %s: %w", shown, err))
		}
	}
	// Directories get their modes once every path is back: one without write for its
	// owner would refuse the paths inside it. In the same order, so the oldest wins.
	for _, e := range dirs {
		if err := s.dirMode(w, e); err != nil {
			notes = append(notes, fmt.Sprintf("%s was restored, but %v", filepath.Join(e.Area, e.Path), err))
		}
	}
	if len(since) > 0 && w.sn != nil {
		// Put back all the same (the restore was asked for), but said: what it replaced
		// is kept in the restore's own snapshot, which brings it back.
		slices.Reverse(since)
		held := "they"
		if len(since) == 1 {
			held = "it"
		}
		notes = append(notes, fmt.Sprintf("%s changed after the write this snapshot undoes; what %s held is kept in snapshot %s (restore it to bring that back)",
			strings.Join(since, ", "), held, w.sn.m.ID))
	}
	err = errors.Join(failed...)
	if w.sn != nil {
		// What it recorded but did not put back (it failed, or the path already held what
		// the snapshot kept) is not undone later. Under the locks: a write since would
		// look like one of the restore's changes.
		s.dropUnchanged(w.sn)
	}
	return restored, notes, err
}

// afterState is what is at rel now as snapEntry.After records it: "absent", the
// fingerprint of a regular file a snapshot can keep, or "" for anything else.
func afterState(ar *os.Root, rel string) string {
	fi, err := ar.Lstat(rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "absent"
	case err != nil || !fi.Mode().IsRegular() || fi.Size() > maxFileBytes:
		return ""
	}
	b, err := readRegular(ar, rel)
	if err != nil {
		return ""
	}
	return fingerprint(&b)
}

// afterName is a snapshot's record of what its write left at each path (snapEntry.After),
// written once the snapshot is saved and without a sync: a restore reads it when it is
// there and whole, and checks nothing without it. Apart from the manifest, recording it
// costs the write no durable write, and losing it (a crash, a full disk) costs no undo.
const afterName = "after.json"

// afterKey is a path's key in afterName.
func afterKey(area, path string) string { return area + "/" + path }

// afterStates is what the write left at each path its snapshot keeps (snapEntry.After),
// read under the write's edit locks before the snapshot is saved.
func (w *write) afterStates() map[string]string {
	if w.sn == nil {
		return nil
	}
	roots := map[string]*os.Root{}
	defer func() {
		for _, r := range roots {
			if r != nil {
				r.Close()
			}
		}
	}()
	out := map[string]string{}
	for _, e := range w.sn.m.Entries {
		ar, ok := roots[e.Area]
		if !ok {
			var err error
			if ar, err = w.s.openArea(e.Area); err != nil {
				ar = nil
			}
			roots[e.Area] = ar
		}
		if ar == nil {
			continue
		}
		if after := afterState(ar, e.Path); after != "" {
			out[afterKey(e.Area, e.Path)] = after
		}
	}
	return out
}

// saveAfter writes states (afterStates) into the saved snapshot, if it can.
func (sn *snapshot) saveAfter(states map[string]string) {
	if len(states) == 0 {
		return
	}
	b, err := json.Marshal(states)
	if err != nil {
		return
	}
	tmp := filepath.Join(sn.m.ID, afterName+"."+randomID()[:12]+".tmp")
	if err := sn.store.WriteFile(tmp, b, 0o600); err == nil {
		err = sn.store.Rename(tmp, filepath.Join(sn.m.ID, afterName))
		if err == nil {
			return
		}
	}
	_ = sn.store.Remove(tmp)
}

// withAfter fills m's entries' After from snapshot id's afterName, when it is there
// and whole.
func withAfter(store *os.Root, id string, m snapManifest) snapManifest {
	b, err := store.ReadFile(filepath.Join(id, afterName))
	if err != nil {
		return m
	}
	var states map[string]string
	if json.Unmarshal(b, &states) != nil {
		return m
	}
	m.Entries = slices.Clone(m.Entries)
	for i, e := range m.Entries {
		m.Entries[i].After = states[afterKey(e.Area, e.Path)]
	}
	return m
}

// changedSince reports whether what is at e's path now is neither what its write left
// there nor what the snapshot would put back (restored once already, or by hand):
// something a restore would lose (unknown: no).
func (s *Server) changedSince(e snapEntry) bool {
	if e.After == "" {
		return false
	}
	ar, err := s.openArea(e.Area)
	if err != nil {
		return false
	}
	defer ar.Close()
	now := afterState(ar, e.Path)
	return now != e.After && now != e.fingerprint()
}

// modeNotKept: a path was put back, but the file system did not take all of its mode
// (it clears a setgid bit for a group this process is not in, and may refuse setuid).
type modeNotKept struct{ want, got fs.FileMode }

func (e *modeNotKept) Error() string {
	return fmt.Sprintf("its mode is %v, not %v as it was (the file system did not take all of it)", e.got, e.want)
}

// checkMode is a *modeNotKept when what is at rel does not have mode (keptMode's bits).
func checkMode(ar *os.Root, rel string, mode fs.FileMode) error {
	fi, err := ar.Lstat(rel)
	if err != nil {
		return err
	}
	if got := fi.Mode() & keptMode; got != mode&keptMode {
		return &modeNotKept{want: fi.Mode().Type() | mode&keptMode, got: fi.Mode().Type() | got}
	}
	return nil
}

// dirMode sets restored directory e's mode, if it is still a directory.
func (s *Server) dirMode(w *write, e snapEntry) error {
	ar, err := s.openArea(e.Area)
	if err != nil {
		return err
	}
	defer ar.Close()
	fi, err := ar.Lstat(e.Path)
	if err != nil || !fi.IsDir() || fi.Mode()&keptMode == e.Mode&keptMode {
		return nil // changed since it was put back, or as it was
	}
	w.changed = true
	if err := ar.Chmod(e.Path, e.Mode&keptMode); err != nil {
		return fmt.Errorf("its mode could not be set: %w", err)
	}
	return checkMode(ar, e.Path, e.Mode)
}

// errMadeSince: a directory the write created is not removed while it holds files.
var errMadeSince = errors.New("the directory holds files made since")

// errTooBigToKeep: a file larger than a snapshot keeps.
var errTooBigToKeep = errors.New("too large to keep")

// restoreEntry restores one entry, keeping first what it replaces. A file too large to
// keep (errTooBigToKeep) is not replaced: it grew since the write, and replacing it
// would lose that work for good.
func (s *Server) restoreEntry(w *write, store *os.Root, id string, e snapEntry) error {
	ar, err := s.openArea(e.Area)
	if err != nil {
		return err
	}
	defer ar.Close()
	fi, lerr := ar.Lstat(e.Path)
	exists := lerr == nil
	t := target{area: e.Area, rel: e.Path}
	if err := w.keepParents(t, ar); err != nil {
		return fmt.Errorf("keep what it holds now: %w", err)
	}
	if err := w.keep(t, ar); err != nil {
		return fmt.Errorf("keep what it holds now: %w", err)
	}
	if err := w.sn.flush(); err != nil {
		return fmt.Errorf("keep what it holds now: %w", err)
	}
	return s.putBack(w, store, id, e, ar, fi, exists)
}

// putBack writes entry e of snapshot id back into ar (fi: what is at its path now). A
// file is put back whole or not at all (writeFile's rename), never opened in place; a
// step that changes something before a later one fails marks w changed, so that the
// snapshot of what was there is kept.
func (s *Server) putBack(w *write, store *os.Root, id string, e snapEntry, ar *os.Root, fi fs.FileInfo, exists bool) error {
	switch {
	case !e.Existed:
		if !exists {
			return nil
		}
		if fi.IsDir() {
			if f, err := openNoWait(ar, e.Path); err == nil {
				names, _ := f.Readdirnames(1)
				f.Close()
				if len(names) > 0 {
					return errMadeSince
				}
			}
		}
		return ar.Remove(e.Path)
	case e.Dir:
		// What is there instead goes first, a symlink too (MkdirAll would follow it);
		// the mode is set once every path is back (restore).
		if exists && fi.IsDir() {
			return nil
		}
		w.changed = true
		if exists {
			if err := ar.Remove(e.Path); err != nil {
				return err
			}
		}
		if dir := filepath.Dir(e.Path); dir != "." {
			if err := ar.MkdirAll(dir, 0o755); err != nil {
				return err
			}
		}
		return ar.Mkdir(e.Path, 0o700)
	}
	var b []byte
	if e.Link == "" {
		var err error
		if b, err = store.ReadFile(filepath.Join(id, e.Blob)); err != nil {
			return err
		}
		// Checked again as read: restore checked it before anything changed.
		sum := sha256.Sum256(b)
		if err := matchBlob(e, int64(len(b)), sum[:]); err != nil {
			return err
		}
	}
	// A file's rename replaces a file or a symlink there; a directory goes first, and
	// anything before a symlink is made.
	if exists && (fi.IsDir() || e.Link != "") {
		w.changed = true
		if err := ar.Remove(e.Path); err != nil {
			return err
		}
	}
	if dir := filepath.Dir(e.Path); dir != "." {
		if _, err := ar.Lstat(dir); err != nil {
			w.changed = true
		}
		if err := ar.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	if e.Link != "" {
		return ar.Symlink(e.Link, e.Path)
	}
	if err := replaceFile(ar, e.Path, b, e.Mode, true); err != nil {
		return err
	}
	return checkMode(ar, e.Path, e.Mode)
}

// SnapshotRetention is how long a write's snapshot is kept: a failed execution's
// rollback can restore it until then.
const SnapshotRetention = 7 * 24 * time.Hour

// PruneSnapshots removes the snapshots taken before cutoff and returns how many, and
// finishes those whose write a crash ended (finishAbandoned). A rollback planned after
// names a write whose snapshot was removed as not undone (SnapshotGone); one approved
// before, whose restore runs after, fails saying its snapshot is gone.
func (s *Server) PruneSnapshots(cutoff time.Time) (int, error) {
	store, err := s.openStore()
	if err != nil {
		return 0, fmt.Errorf("builtin: prune snapshots: %w", err)
	}
	defer store.Close()
	entries, err := fs.ReadDir(store.FS(), ".")
	if err != nil {
		return 0, fmt.Errorf("builtin: prune snapshots: %w", err)
	}
	n := 0
	for _, e := range entries {
		if e.Name() == lockDir {
			continue // the edit locks' files, in use
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		if !info.ModTime().Before(cutoff) {
			if finished, err := s.finishAbandoned(store, e.Name()); err != nil && !errors.Is(err, errStillWriting) {
				s.opts.Logger.Warn("builtin: could not finish the snapshot of a write a crash ended", "snapshot", e.Name(), "err", err)
			} else if finished {
				s.opts.Logger.Info("builtin: finished the snapshot of a write a crash ended", "snapshot", e.Name())
			}
			continue
		}
		s.trimming.Lock()
		pinned := s.pinned[e.Name()] > 0 // a restore reads it: pruned at the next pass
		s.trimming.Unlock()
		if pinned {
			continue
		}
		if err := store.RemoveAll(e.Name()); err != nil {
			return n, fmt.Errorf("builtin: prune snapshot %s: %w", e.Name(), err)
		}
		n++
	}
	return n + s.trimSnapshots(store, true), nil
}

// DefaultSnapshotBudget is the most the snapshot store holds by default: every write
// keeps what it changes (up to maxFileBytes a file), so an agent rewriting large files
// all day would otherwise fill the disk within the 7 days snapshots are kept.
const DefaultSnapshotBudget int64 = 2 << 30

func (s *Server) snapshotBudget() int64 {
	if s.opts.SnapshotBudget > 0 {
		return s.opts.SnapshotBudget
	}
	return DefaultSnapshotBudget
}

// pinSnapshot keeps snapshot id from trimSnapshots until the returned func is called
// (a restore reading it).
func (s *Server) pinSnapshot(id string) func() {
	s.trimming.Lock()
	defer s.trimming.Unlock()
	if s.pinned == nil {
		s.pinned = map[string]int{}
	}
	s.pinned[id]++
	return func() {
		s.trimming.Lock()
		defer s.trimming.Unlock()
		if s.pinned[id]--; s.pinned[id] <= 0 {
			delete(s.pinned, id)
		}
	}
}

// trimRetry is how long writes wait to count the store again after a count that could
// not bring it under its budget (what is left is being written or restored).
const trimRetry = time.Minute

// trimDue reports whether a write should count the store first: never counted since
// the start, or past its budget as counted (and not within trimRetry of a count that
// could not help it).
func (s *Server) trimDue() bool {
	if !s.snapCounted.Load() {
		return true
	}
	return s.snapBytes.Load() > s.snapshotBudget() && time.Now().UnixNano() >= s.trimAfter.Load()
}

// trimSnapshots counts what the snapshot store holds and, past the budget, removes the
// oldest snapshots until it holds at most nine tenths of it (so that the writes after
// do not count it again at once); a snapshot whose write still runs, or that a restore
// reads (pinSnapshot), stays. It returns how many it removed. A rollback that needed
// one names its write as not undone. A write's call (force false) counts only if it is
// still due once it holds the lock: writes waiting on one count do not each count again.
func (s *Server) trimSnapshots(store *os.Root, force bool) int {
	s.trimming.Lock()
	defer s.trimming.Unlock()
	if !force && !s.trimDue() {
		return 0
	}
	type kept struct {
		name    string
		mod     time.Time
		size    int64
		writing bool
	}
	entries, err := fs.ReadDir(store.FS(), ".")
	if err != nil {
		s.opts.Logger.Warn("builtin: could not count the snapshot store", "err", err)
		return 0
	}
	var all []kept
	var total int64
	for _, e := range entries {
		if e.Name() == lockDir || !e.IsDir() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		k := kept{name: e.Name(), mod: info.ModTime()}
		files, _ := fs.ReadDir(store.FS(), e.Name())
		for _, f := range files {
			if fi, err := f.Info(); err == nil {
				k.size += fi.Size()
			}
			k.writing = k.writing || f.Name() == writingMarker
		}
		total += k.size
		all = append(all, k)
	}
	budget := s.snapshotBudget()
	n := 0
	var freed int64
	if total > budget {
		slices.SortFunc(all, func(a, b kept) int { return a.mod.Compare(b.mod) })
		for _, k := range all {
			if total-freed <= budget/10*9 {
				break
			}
			if k.writing || s.pinned[k.name] > 0 {
				continue
			}
			if err := store.RemoveAll(k.name); err != nil {
				s.opts.Logger.Warn("builtin: could not remove a snapshot past the store's budget", "snapshot", k.name, "err", err)
				continue
			}
			freed += k.size
			n++
		}
		s.opts.Logger.Warn("builtin: the snapshot store passed its budget; the oldest snapshots were removed",
			"budget_bytes", budget, "held_bytes", total, "removed", n, "freed_bytes", freed)
	}
	s.snapBytes.Store(total - freed)
	s.snapCounted.Store(true)
	if total-freed > budget {
		s.trimAfter.Store(time.Now().Add(trimRetry).UnixNano())
	}
	return n
}

// KeepSnapshotsPruned prunes the snapshots past SnapshotRetention now and every hour
// until the server closes. Each process prunes its own: snapshots are on its disk. The
// same pass sweeps the temporary files crashed writes left in the workspaces
// (sweepTemps), a bounded part of the root each time, going on where the last stopped.
func (s *Server) KeepSnapshotsPruned() {
	stop := make(chan struct{})
	s.OnClose(func() { close(stop) })
	go func() {
		t := time.NewTicker(time.Hour)
		defer t.Stop()
		var sweepAt sweepPos
		for {
			if n, err := s.PruneSnapshots(time.Now().Add(-SnapshotRetention)); err != nil {
				s.opts.Logger.Warn("builtin: could not prune old snapshots", "err", err)
			} else if n > 0 {
				s.opts.Logger.Info("builtin: pruned old snapshots", "count", n)
			}
			sw := s.sweepTemps(sweepAt, maxSweepEntries, time.Now())
			if sw.err != nil {
				s.opts.Logger.Warn("builtin: could not sweep the temporary files of crashed writes", "failed", sw.failed, "err", sw.err)
			}
			if sw.removed > 0 {
				s.opts.Logger.Info("builtin: removed temporary files crashed writes left", "count", sw.removed)
			}
			sweepAt = sw.next
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
}
