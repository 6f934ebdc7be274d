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

// restorePrefix starts a restore's fingerprint: "restore <state> <state>…", one state
// per path in restorePaths' order ("absent", "sha256:…", or otherStateFP).
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
	store, err := s.lookStore()
	if err != nil || store == nil {
		return nil
	}
	defer store.Close()
	m, err := manifest(store, c, id)
	if err != nil {
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

// restoreFingerprint joins the states of a restore's paths.
func restoreFingerprint(states []string) string {
	return restorePrefix + " " + strings.Join(states, " ")
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

// restoreStale says which of paths changed since a preview whose fingerprint is want
// ("" when none did, or want is not a restore's).
func (s *Server) restoreStale(paths []restorePath, want string) string {
	wantStates := strings.Fields(strings.TrimPrefix(want, restorePrefix))
	if !strings.HasPrefix(want, restorePrefix+" ") || len(wantStates) != len(paths) {
		return "the snapshot's paths" // not this snapshot's preview: nothing is known to match
	}
	var changed []string
	for i, st := range s.restoreStates(paths) {
		if st != wantStates[i] {
			changed = append(changed, paths[i].t.shown)
		}
	}
	return strings.Join(changed, ", ")
}

// restoreStep previews a restore of snapshot st.snapshot: nil when the snapshot cannot be
// read, the caller may not read one of its paths, or what an earlier step leaves at one
// is unknown.
func (p *planPreview) restoreStep(ctx context.Context, c Call, st previewStep) *FilePreview {
	if len(st.restore) == 0 {
		return nil
	}
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
	for i, rp := range st.restore {
		shown[i] = rp.t.shown
		cur := p.file(rp.t)
		if cur == nil {
			states[i] = otherStateFP
		} else if states[i] = cur.fingerprint(); states[i] == "" {
			return nil // what an earlier step leaves is unknown
		}
		kept := p.keptFile(store, st.snapshot, rp.e)
		diff.WriteString(p.restoreDiff(rp, cur, kept))
		key := [2]string{rp.t.area, rp.t.rel}
		switch {
		case kept != nil:
			p.files[key] = kept
		default:
			p.files[key] = &previewFile{} // a directory or a symlink: unknown to later steps
		}
	}
	return &FilePreview{Path: strings.Join(shown, ", "), Fingerprint: restoreFingerprint(states), Diff: bounded(diff.String())}
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
// diff does not show (a directory, a symlink, what is there now when it is not a file).
func (p *planPreview) restoreDiff(rp restorePath, cur, kept *previewFile) string {
	shown, e := rp.t.shown, rp.e
	if cur == nil {
		now := p.s.describeAt(rp.t)
		switch {
		case !e.Existed:
			if now == "a directory" {
				return fmt.Sprintf("%s/: the directory the write created is removed (left if it holds files made since)\n", shown)
			}
			return fmt.Sprintf("%s: %s, which the write made, is removed\n", shown, now)
		case e.Dir:
			if now == "a directory" {
				return "" // it stays a directory (its mode is set back)
			}
			return fmt.Sprintf("%s: %s is replaced by the directory that was there\n", shown, now)
		case e.Link != "":
			return fmt.Sprintf("%s: %s is replaced by the symlink to %s that was there\n", shown, now, e.Link)
		}
		return fmt.Sprintf("%s: %s is replaced by the file that was there (%d bytes)\n", shown, now, e.Size)
	}
	switch {
	case kept == nil && e.Dir:
		return fmt.Sprintf("%s/: the directory that was there is put back\n", shown)
	case kept == nil && e.Link != "":
		return fmt.Sprintf("%s: the symlink to %s that was there is put back\n", shown, e.Link)
	case kept == nil:
		return fmt.Sprintf("%s: the snapshot's copy cannot be read for a preview\n", shown)
	case cur.absent && kept.absent:
		return ""
	case cur.absent:
		return fmt.Sprintf("%s: put back (it was deleted since)\n", shown) + p.diff(shown, cur, kept)
	case kept.absent:
		return fmt.Sprintf("%s: removed (the write created it)\n", shown) + p.diff(shown, cur, kept)
	}
	return p.diff(shown, cur, kept)
}

// describeAt says what is at t when it is not a file a preview reads.
func (s *Server) describeAt(t target) string {
	ar, err := s.openArea(t.area)
	if err != nil {
		return "what is there"
	}
	defer ar.Close()
	fi, err := ar.Lstat(t.rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "nothing" // cannot be: a preview reads an absent path
	case err != nil:
		return "what is there"
	case fi.IsDir():
		return "a directory"
	case fi.Mode()&fs.ModeSymlink != 0:
		return "a symlink"
	case fi.Mode().IsRegular():
		return fmt.Sprintf("a file of %d bytes", fi.Size())
	}
	return "a special file"
}
