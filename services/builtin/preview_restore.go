package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// A restore_snapshot step is previewed as what it will put back: for each path its
// snapshot kept, the diff from what is there now to what the snapshot holds. A rollback
// that undoes built-in writes is such steps, so the person deciding it sees what each
// file will be set back to. Its fingerprint is the state of every path it restores, and
// the restore, run with it expected, refuses to put anything back when one changed.

// restorePrefix starts a restore's fingerprint: "restore " and a JSON list of each path
// it puts back (area/path) with its state ("absent", "sha256:…", or otherStateFP).
// Compared path by path, so a snapshot whose crashed write is finished by the restore
// (which drops the paths the write never changed) is checked on the paths it restores.
const restorePrefix = "restore"

// otherStateFP is a restore path's state when it holds something a fingerprint does not
// describe: a directory, a symlink, a file past the size a snapshot keeps.
const otherStateFP = "other"

// restoreSnapshotOf is the snapshot id of a restore_snapshot call, ok false for any
// other call.
func restoreSnapshotOf(pc PreviewCall) (id string, ok bool) {
	if pc.Tool != "file_operations" {
		return "", false
	}
	var a struct {
		Operation  string `json:"operation"`
		SnapshotID string `json:"snapshotId"`
	}
	if json.Unmarshal(pc.Arguments, &a) != nil || a.Operation != "restore_snapshot" {
		return "", false
	}
	return a.SnapshotID, true
}

// restorePath is one path a restore puts back, with what it puts there: the path's
// first entry in the manifest (what it held before the write; the restore puts entries
// back newest first, so the first is what stays).
type restorePath struct {
	t target
	e snapEntry
}

// restorePathsOf are the paths a restore of snapshot id by c puts back, each once, in
// the order the manifest first names them; nil when the snapshot cannot be read (the
// restore says why when it runs) or names none. It looks without making or finishing
// anything.
func (s *Server) restorePathsOf(c Call, id string) []restorePath {
	m, ok := s.lookManifest(c, id)
	if !ok {
		return nil
	}
	return s.restorePaths(c, m)
}

// restorePaths are the paths a restore of m by c puts back (restorePathsOf).
func (s *Server) restorePaths(c Call, m snapManifest) []restorePath {
	ws := filepath.Base(c.Workspace)
	seen := map[[2]string]bool{}
	var out []restorePath
	for _, e := range m.Entries {
		k := [2]string{e.Area, e.Path}
		if seen[k] {
			continue
		}
		seen[k] = true
		abs := filepath.Join(s.opts.Root, e.Area, e.Path)
		t := target{area: e.Area, rel: e.Path, abs: abs, shown: abs, own: e.Area == ws}
		if t.own {
			t.shown = e.Path
		}
		out = append(out, restorePath{t: t, e: e})
	}
	return out
}

// restoreFingerprint is the fingerprint of a restore of paths whose states are states.
func restoreFingerprint(paths []restorePath, states []string) string {
	pairs := make([][2]string, len(paths))
	for i, rp := range paths {
		pairs[i] = [2]string{afterKey(rp.e.Area, rp.e.Path), states[i]}
	}
	b, _ := json.Marshal(pairs)
	return restorePrefix + " " + string(b)
}

// restoreStates is the state of each of paths now, as a restore's fingerprint has them.
func (s *Server) restoreStates(paths []restorePath) []string {
	states := make([]string, len(paths))
	for i, rp := range paths {
		content, ok := s.current(rp.t)
		if !ok {
			states[i] = otherStateFP
			continue
		}
		states[i] = fingerprint(content)
	}
	return states
}

// restoreStale says which of paths changed since a preview whose fingerprint is want,
// or were not in it ("" when none).
func (s *Server) restoreStale(paths []restorePath, want string) string {
	var pairs [][2]string
	if body, ok := strings.CutPrefix(want, restorePrefix+" "); !ok || json.Unmarshal([]byte(body), &pairs) != nil {
		return "the snapshot's paths" // not a restore's preview: nothing is known to match
	}
	was := make(map[string]string, len(pairs))
	for _, p := range pairs {
		was[p[0]] = p[1]
	}
	var changed []string
	for i, st := range s.restoreStates(paths) {
		if prev, ok := was[afterKey(paths[i].e.Area, paths[i].e.Path)]; !ok || st != prev {
			changed = append(changed, paths[i].t.shown)
		}
	}
	return strings.Join(changed, ", ")
}

// restoreStep previews a restore of snapshot st.snapshot: nil when the snapshot cannot be
// read, the caller may not read one of its paths, or what an earlier step leaves at one
// is unknown. Later steps on its paths are previewed against what it puts back, or,
// when it is not previewed, not at all (what it leaves is unknown).
func (p *planPreview) restoreStep(ctx context.Context, c Call, st previewStep) *FilePreview {
	if len(st.restore) == 0 {
		return nil
	}
	left := make([]*previewFile, len(st.restore)) // what the restore leaves at each path
	defer func() {
		for i, rp := range st.restore {
			if left[i] == nil {
				left[i] = &previewFile{} // unknown: a directory, a symlink, or not previewed
			}
			p.files[[2]string{rp.t.area, rp.t.rel}] = left[i]
		}
	}()
	for _, rp := range st.restore {
		if a, err := p.s.accessOf(ctx, c, rp.t); err != nil || a != accessOwn && a != accessMine {
			return nil // the preview shows content
		}
	}
	store, err := p.s.lookStore()
	if err != nil || store == nil {
		return nil
	}
	defer store.Close()
	states := make([]string, len(st.restore))
	var diff strings.Builder
	shown := make([]string, len(st.restore))
	kept := make([]*previewFile, len(st.restore))
	for i, rp := range st.restore {
		shown[i] = rp.t.shown
		cur := p.file(rp.t)
		if cur == nil {
			states[i] = otherStateFP
		} else if states[i] = cur.fingerprint(); states[i] == "" {
			return nil // what an earlier step leaves is unknown
		}
		kept[i] = p.keptFile(store, st.snapshot, rp.e)
		text, leaves := p.restoreDiff(rp, cur, kept[i])
		diff.WriteString(text)
		if leaves {
			kept[i] = cur // left as it is
		}
	}
	copy(left, kept)
	return &FilePreview{Path: strings.Join(shown, ", "), Fingerprint: restoreFingerprint(st.restore, states), Diff: bounded(diff.String())}
}

// keptFile is what entry e of snapshot id puts back as a preview file: absent, or a
// file's bytes (within the preview's read bound; past it only its fingerprint); nil for
// a directory or a symlink, or a blob that cannot be read.
func (p *planPreview) keptFile(store *os.Root, id string, e snapEntry) *previewFile {
	switch {
	case !e.Existed:
		return &previewFile{absent: true}
	case e.Dir || e.Link != "" || e.Blob == "":
		return nil
	}
	name := filepath.Join(id, e.Blob)
	fi, err := store.Stat(name)
	if err != nil || fi.Size() > maxFileBytes {
		return nil
	}
	if p.read+fi.Size() > maxPreviewRead {
		if fp := e.fingerprint(); fp != "" {
			return &previewFile{fp: fp}
		}
		return nil
	}
	b, err := store.ReadFile(name)
	if err != nil {
		return nil
	}
	p.read += int64(len(b))
	return &previewFile{content: &b}
}

// restoreDiff is what restoring rp changes: the diff of a file, or a line for what a
// diff does not show (a directory, a symlink, what is there now when it is not a file, a
// mode put back); leaves reports a path the restore will leave as it is.
func (p *planPreview) restoreDiff(rp restorePath, cur, kept *previewFile) (text string, leaves bool) {
	shown, e := rp.t.shown, rp.e
	now := p.s.lookAt(rp.t)
	if now.tooBig {
		// restoreEntry cannot keep it first, so it leaves it (restoring could not be undone).
		return fmt.Sprintf("%s: left as it is: it is now larger than the %d MiB a snapshot keeps, so restoring it could not be undone\n",
			shown, maxFileBytes>>20), true
	}
	if cur == nil {
		switch {
		case !e.Existed:
			if now.dir {
				return fmt.Sprintf("%s/: the directory the write created is removed (left if it holds files made since)\n", shown), false
			}
			return fmt.Sprintf("%s: %s, which the write made, is removed\n", shown, now.what), false
		case e.Dir:
			if now.dir {
				return p.modeLine(shown, e, now), false // it stays a directory
			}
			return fmt.Sprintf("%s: %s is replaced by the directory that was there\n", shown, now.what), false
		case e.Link != "":
			return fmt.Sprintf("%s: %s is replaced by the symlink to %s that was there\n", shown, now.what, e.Link), false
		}
		return fmt.Sprintf("%s: %s is replaced by the file that was there (%d bytes)\n", shown, now.what, e.Size), false
	}
	switch {
	case kept == nil && e.Dir:
		return fmt.Sprintf("%s/: the directory that was there is put back\n", shown), false
	case kept == nil && e.Link != "":
		return fmt.Sprintf("%s: the symlink to %s that was there is put back\n", shown, e.Link), false
	case kept == nil:
		return fmt.Sprintf("%s: the snapshot's copy cannot be read for a preview\n", shown), false
	case cur.absent && kept.absent:
		return "", false
	case cur.absent:
		return fmt.Sprintf("%s: put back (it was deleted since)\n", shown) + p.diff(shown, cur, kept), false
	case kept.absent:
		return fmt.Sprintf("%s: removed (the write created it)\n", shown) + p.diff(shown, cur, kept), false
	}
	return p.modeLine(shown, e, now) + p.diff(shown, cur, kept), false
}

// modeLine says that a restore sets e's mode back, when it differs from now's.
func (p *planPreview) modeLine(shown string, e snapEntry, now pathState) string {
	if e.Mode == 0 || !now.exists || now.mode&keptMode == e.Mode {
		return ""
	}
	return fmt.Sprintf("%s: mode %04o put back (it is %04o now)\n", shown, uint32(e.Mode.Perm())|specialBits(e.Mode), uint32(now.mode.Perm())|specialBits(now.mode))
}

// specialBits are the setuid, setgid and sticky bits of m in chmod's octal.
func specialBits(m fs.FileMode) uint32 {
	var b uint32
	if m&fs.ModeSetuid != 0 {
		b |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		b |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		b |= 0o1000
	}
	return b
}

// pathState is what lookAt found at a path.
type pathState struct {
	exists, dir bool
	// tooBig: a regular file larger than a snapshot keeps (a restore leaves it).
	tooBig bool
	mode   fs.FileMode
	what   string // as a sentence names it: "a directory", "a file of 12 bytes"
}

// lookAt says what is at t, without following a symlink.
func (s *Server) lookAt(t target) pathState {
	ar, err := s.openArea(t.area)
	if err != nil {
		return pathState{what: "what is there"}
	}
	defer ar.Close()
	fi, err := ar.Lstat(t.rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return pathState{what: "nothing"}
	case err != nil:
		return pathState{what: "what is there"}
	}
	st := pathState{exists: true, dir: fi.IsDir(), mode: fi.Mode()}
	switch {
	case fi.IsDir():
		st.what = "a directory"
	case fi.Mode()&fs.ModeSymlink != 0:
		st.what = "a symlink"
	case fi.Mode().IsRegular():
		st.what = fmt.Sprintf("a file of %d bytes", fi.Size())
		st.tooBig = fi.Size() > maxFileBytes
	default:
		st.what = "a special file"
	}
	return st
}
