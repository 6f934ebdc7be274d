package builtin

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"time"
)

// A write puts its content in a temporary file beside its path (tempFile) and renames
// or links it in place; a process killed in between leaves that whole copy in the
// person's workspace, where git add -A and the terminal see it. The hourly prune pass
// (KeepSnapshotsPruned) sweeps such leftovers: regular files whose name is exactly one
// tempName makes, untouched for tempSweepAge.

const (
	// tempMark and tempExt frame a temporary file's random part, tempHex hex digits.
	tempMark = ".tw-"
	tempExt  = ".tmp"
	tempHex  = 12
	// maxTempBase bounds the part of the written file's name a temporary name repeats,
	// so that the name stays within a file system's 255 bytes.
	maxTempBase = 100
	// tempSweepAge is how long a temporary file must have been left unmodified before a
	// sweep removes it. Its modification time is its last write, and a write renames
	// (or links) it a chmod, an fsync and a close later, for at most maxFileBytes: well
	// under a minute even on a slow disk. Ten minutes leave room for that and for the
	// clocks of replicas sharing the root over a network file system; and should a
	// write still be in flight, its rename or link fails on the missing file, so the
	// write reports an error with its path untouched, and nothing is lost.
	tempSweepAge = 10 * time.Minute
	// maxSweepEntries bounds the directory entries one sweep pass reads (a quarter of
	// what one search may read): the pass stops there and the next goes on from where
	// it stopped (sweepPos), so a huge workspace is swept over several hours instead
	// of stalling the pass.
	maxSweepEntries = 250_000
)

// tempName is the name of a new temporary file beside a file named base.
func tempName(base string) string {
	if len(base) > maxTempBase {
		base = base[:maxTempBase]
	}
	return "." + base + tempMark + randomID()[:tempHex] + tempExt
}

// isTempName says whether name is one tempName makes: "." + 1 to maxTempBase bytes +
// tempMark + tempHex lowercase hex digits + tempExt, and nothing else.
func isTempName(name string) bool {
	n := len(name)
	if n < 1+1+len(tempMark)+tempHex+len(tempExt) || name[0] != '.' || !strings.HasSuffix(name, tempExt) {
		return false
	}
	hexAt := n - len(tempExt) - tempHex
	for _, c := range []byte(name[hexAt : n-len(tempExt)]) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	baseEnd := hexAt - len(tempMark)
	return name[baseEnd:hexAt] == tempMark && baseEnd-1 <= maxTempBase
}

// sweepPos is where a sweep pass stopped, for the next to go on from: directory dir
// (slash-separated, "." for the workspace itself) of workspace area is the next to
// read, or, when after is set, the one whose subtree was swept last. The zero value
// is the start of the root.
type sweepPos struct {
	area, dir string
	after     bool
}

// sweepResult is what a sweep pass did: the directory entries it read, the leftovers
// it removed, those it failed to remove (err the first failure, or why the root could
// not be read), and where the next pass goes on.
type sweepResult struct {
	read, removed, failed int
	err                   error
	next                  sweepPos
}

// sweepTemps removes the temporary files a crashed write left (isTempName, regular,
// unmodified since now less tempSweepAge) from the workspaces, going on from where
// the last pass stopped (from). Workspaces are taken by name, and each is walked in
// order of its directories' names, files not followed into symlinks, through its own
// os.Root (openArea). A pass reads about budget entries: at most maxDirScan more, as a
// directory is read whole (up to maxDirScan of its entries, as a search does) once
// begun. Where it stops, res.next says; once the last workspace is done, res.next is
// the start again. Like the searches, it reads no more than maxDirScan entries of a
// directory and enters none past maxWalkDepth or maxWalkPath: a leftover there stays.
func (s *Server) sweepTemps(from sweepPos, budget int, now time.Time) (res sweepResult) {
	areas, err := s.sweepAreas()
	if err != nil {
		res.err, res.next = err, from
		return res
	}
	sw := &sweeper{left: budget, cutoff: now.Add(-tempSweepAge), res: &res}
	for _, area := range areas {
		pos := sweepPos{area: area, dir: "."}
		if area < from.area {
			continue
		} else if area == from.area {
			pos = from
		}
		ar, err := s.openArea(area)
		if err != nil {
			continue // gone or replaced since the root was read
		}
		sw.ar, sw.area = ar, area
		stopped := sw.resume(pos)
		ar.Close()
		if stopped {
			return res
		}
	}
	res.next = sweepPos{}
	return res
}

// sweepAreas is the names of the workspaces under the root, in order. The root holds a
// directory a conversation, which the names alone (not their entries) stand for.
func (s *Server) sweepAreas() ([]string, error) {
	rr, err := os.OpenRoot(s.opts.Root)
	if err != nil {
		return nil, err
	}
	defer rr.Close()
	f, err := openNoWait(rr, ".")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var areas []string
	for {
		batch, err := f.ReadDir(dirBatch)
		for _, e := range batch {
			if e.IsDir() && workspaceName.MatchString(e.Name()) {
				areas = append(areas, e.Name())
			}
		}
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, err
		}
	}
	slices.Sort(areas)
	return areas, nil
}

// sweeper is one sweep pass in one workspace (ar, named area).
type sweeper struct {
	ar     *os.Root
	area   string
	left   int // entries the pass may still read
	cutoff time.Time
	res    *sweepResult
}

// resume sweeps from pos to the end of the workspace; true when the budget ran out
// first (res.next says where).
func (sw *sweeper) resume(pos sweepPos) (stopped bool) {
	dir, after := pos.dir, pos.after
	for {
		if !after && sw.tree(dir) {
			return true
		}
		if dir == "." {
			return false
		}
		// dir's subtree is done: on to its parent's later subdirectories. The parent is
		// read again (a pass that begins below it did not read it).
		if sw.left <= 0 {
			sw.res.next = sweepPos{area: sw.area, dir: dir, after: true}
			return true
		}
		parent, base := path.Dir(dir), path.Base(dir)
		for _, d := range sw.read(parent) {
			if d > base && sw.tree(path.Join(parent, d)) {
				return true
			}
		}
		dir, after = parent, true
	}
}

// tree sweeps dir and the directories under it, in order of their names; true when
// the budget ran out first (res.next says where).
func (sw *sweeper) tree(dir string) (stopped bool) {
	if sw.left <= 0 {
		sw.res.next = sweepPos{area: sw.area, dir: dir}
		return true
	}
	for _, d := range sw.read(dir) {
		if sw.tree(path.Join(dir, d)) {
			return true
		}
	}
	return false
}

// read reads up to maxDirScan entries of dir, counted against the budget, removes the
// leftovers among them, and returns, by name, the subdirectories a walk enters (a
// symlink is not one). Only names are held: a directory read through an os.Root comes
// with each entry's file information.
func (sw *sweeper) read(dir string) []string {
	f, err := openNoWait(sw.ar, dir)
	if err != nil {
		return nil // gone or unreadable: skipped
	}
	defer f.Close()
	depth := 1
	if dir != "." {
		depth += strings.Count(dir, "/") + 1
	}
	var subs []string
	for read := 0; read < maxDirScan; {
		batch, err := f.ReadDir(min(dirBatch, maxDirScan-read))
		read += len(batch)
		sw.left -= len(batch)
		sw.res.read += len(batch)
		for _, e := range batch {
			name := path.Join(dir, e.Name())
			switch typ := e.Type(); {
			case typ.IsDir():
				if depth <= maxWalkDepth && len(name) <= maxWalkPath {
					subs = append(subs, e.Name())
				}
			case typ.IsRegular() && isTempName(e.Name()):
				sw.remove(name)
			}
		}
		if err != nil {
			break // the end, or unreadable: what was read is swept
		}
	}
	slices.Sort(subs)
	return subs
}

// remove removes leftover name if it is a regular file (looked at again, not followed)
// unmodified since the cutoff.
func (sw *sweeper) remove(name string) {
	fi, err := sw.ar.Lstat(name)
	if err != nil || !fi.Mode().IsRegular() || !fi.ModTime().Before(sw.cutoff) {
		return
	}
	switch err := sw.ar.Remove(name); {
	case err == nil:
		sw.res.removed++
	case errors.Is(err, fs.ErrNotExist):
		// gone meanwhile (another replica's pass)
	default:
		if sw.res.failed++; sw.res.err == nil {
			sw.res.err = err
		}
	}
}

// isTemp says whether directory entry e is a write's temporary file, which listings
// and searches leave out: Toolwarden's own, in flight or left by a crash until swept.
func isTemp(e fs.DirEntry) bool {
	return e.Type().IsRegular() && isTempName(e.Name())
}
