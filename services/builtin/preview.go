package builtin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/aymanbagabas/go-udiff"
)

// Previews: before a plan that writes files is approved, the person sees the unified
// diff each step will make, computed against the files as they are now (and, for a
// later step on the same file, as the earlier steps will have left it). Each preview
// carries a fingerprint of the content the step expects to find; when the step runs,
// a file whose fingerprint differs was changed since the preview, and the step is
// refused as stale (services/executions).

// maxPreviewDiff bounds the diff a preview keeps (the plan stores it).
const maxPreviewDiff = 128 << 10

// maxDiffLines and maxDiffBytes bound the two sides of a line diff together: its time
// and memory grow with them (measured here: at the bounds about 12 MB and 10-20 ms; two
// 10 MB files 1.5 GB and 4.6 s), and it cannot be interrupted, so past them a preview
// diffs only the lines that changed and their context (middleDiff), and gives the
// sizes instead when those too pass them.
const (
	maxDiffLines = 20000
	maxDiffBytes = 1 << 20
)

// PreviewCall is one step of a plan: a built-in tool (its bare name) and its arguments.
type PreviewCall struct {
	Tool      string
	Arguments json.RawMessage
}

// FilePreview is what a step will change in a file.
type FilePreview struct {
	// Path is the file as the agent named it (relative to the workspace when in it).
	Path string `json:"path"`
	// Diff is the unified diff of the change ("" when the content stays the same).
	Diff string `json:"diff"`
	// Fingerprint is the content the step expects to find: "absent" or "sha256:<hex>";
	// for a copy or a rename, its source's and then newPath's ("<source> newPath=<new>").
	Fingerprint string `json:"fingerprint"`
}

// previewable are the file operations whose change a preview shows: each changes the
// one file filePath names.
var previewable = map[string]func(json.RawMessage) (func(shown string, b []byte) ([]byte, string, error), error){
	"replace_string": decodeChange[replaceIn],
	"multi_replace":  decodeChange[multiIn],
	"insert_edit":    decodeChange[insertIn],
	"create_file": func(raw json.RawMessage) (func(string, []byte) ([]byte, string, error), error) {
		var in createIn
		if err := json.Unmarshal(raw, &in); err != nil || in.Content == nil {
			return nil, errors.New("no content")
		}
		return func(string, []byte) ([]byte, string, error) { return []byte(*in.Content), "", nil }, nil
	},
	"delete_file": func(json.RawMessage) (func(string, []byte) ([]byte, string, error), error) {
		return func(string, []byte) ([]byte, string, error) { return nil, "", nil }, nil
	},
}

// moves are the file operations that a preview shows by what they move, copy or
// create rather than by an edit of filePath's content: filePath is the file the step
// reads, newPath the one it writes (what the step expects is the fingerprints of both).
var moves = map[string]bool{"rename_file": true, "copy_file": true, "create_directory": true}

type changer interface {
	change(shown string, b []byte) ([]byte, string, error)
}

func decodeChange[T changer](raw json.RawMessage) (func(string, []byte) ([]byte, string, error), error) {
	var in T
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, err
	}
	return in.change, nil
}

// moveFingerprint is what a copy or a rename expects: its source's fingerprint and that
// of what newPath holds, which an overwrite would otherwise replace unseen.
func moveFingerprint(from, to string) string { return from + " newPath=" + to }

// fingerprint is content's fingerprint (nil: the file does not exist).
func fingerprint(content *[]byte) string {
	if content == nil {
		return "absent"
	}
	sum := sha256.Sum256(*content)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// fileStep is the file a previewable call changes, and how.
func (s *Server) fileStep(c Call, pc PreviewCall) (t target, change func(string, []byte) ([]byte, string, error), op string, ok bool) {
	if pc.Tool != "file_operations" {
		return t, nil, "", false
	}
	var a struct {
		Operation string `json:"operation"`
		FilePath  string `json:"filePath"`
	}
	if json.Unmarshal(pc.Arguments, &a) != nil {
		return t, nil, "", false
	}
	var err error
	if !moves[a.Operation] {
		mk, found := previewable[a.Operation]
		if !found {
			return t, nil, "", false
		}
		if change, err = mk(pc.Arguments); err != nil {
			return t, nil, "", false
		}
	}
	t, err = s.resolve(c, "filePath", a.FilePath)
	if err != nil || t.area == "" || t.rel == "." {
		return t, nil, "", false
	}
	return t, change, a.Operation, true
}

// current is t's content now (nil when it does not exist); ok is false when it cannot
// be read as a file (the step will say why when it runs).
func (s *Server) current(t target) (content *[]byte, ok bool) {
	ar, err := s.openArea(t.area)
	if err != nil {
		return nil, false
	}
	defer ar.Close()
	fi, err := ar.Lstat(t.rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, true
	}
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > maxFileBytes {
		return nil, false
	}
	b, err := readRegular(ar, t.rel)
	if err != nil {
		return nil, false
	}
	return &b, true
}

// maxPreviewRead bounds the bytes of files one preview reads into memory: a plan's 50
// steps may each name a different 10 MiB file. Past it, a file is only hashed as it is
// read, and its steps show the fingerprint (which the check before each step runs
// needs) without a diff.
const maxPreviewRead = 32 << 20

// previewFile is what a preview knows of a file: as it is now, or as the plan's earlier
// steps will leave it. A copy shares its source's bytes. Neither bytes nor fingerprint:
// unknown (an edit of a file read past maxPreviewRead), and later steps on it are not
// previewed.
type previewFile struct {
	absent  bool
	content *[]byte // its bytes, when held
	fp      string  // its fingerprint, once computed (or all that is known past the bound)
}

func (f *previewFile) held() bool { return f.absent || f.content != nil }

func (f *previewFile) bytes() []byte {
	if f.content == nil {
		return nil
	}
	return *f.content
}

// fingerprint is f's fingerprint, computed once ("" when unknown).
func (f *previewFile) fingerprint() string {
	switch {
	case f.absent:
		return "absent"
	case f.fp == "" && f.content != nil:
		f.fp = fingerprint(f.content)
	}
	return f.fp
}

// planPreview is one PreviewPlan's view of the files its steps touch.
type planPreview struct {
	s *Server
	// files: what each file (by area and path) holds as the steps so far leave it. A
	// file is read once however many steps name it, and forgotten after the last step
	// that names it (last), so a plan holds only what its later steps still need.
	files map[[2]string]*previewFile
	last  map[[2]string]int
	// read is what the preview read into memory so far (maxPreviewRead).
	read int64
}

// previewStep is a step of the plan as resolved before the preview runs.
type previewStep struct {
	t      target
	change func(string, []byte) ([]byte, string, error)
	op     string
	ok     bool
	to     target // newPath of a move (toOK: it resolved)
	toOK   bool
	keys   [][2]string // the files it names
	// snapshot and restore: a restore_snapshot's snapshot and the paths it puts back
	// (preview_restore.go).
	snapshot string
	restore  []restorePath
}

// file is what t holds as the steps so far leave it; nil when it cannot be read as a
// file (a directory; the step will say what is wrong when it runs).
func (p *planPreview) file(t target) *previewFile {
	key := [2]string{t.area, t.rel}
	if f, ok := p.files[key]; ok {
		return f
	}
	f := p.load(t)
	if f != nil {
		p.files[key] = f
	}
	return f
}

// load reads t as it is now: its bytes within maxPreviewRead, past it its fingerprint.
func (p *planPreview) load(t target) *previewFile {
	ar, err := p.s.openArea(t.area)
	if err != nil {
		return nil
	}
	defer ar.Close()
	fi, err := ar.Lstat(t.rel)
	if errors.Is(err, fs.ErrNotExist) {
		return &previewFile{absent: true}
	}
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > maxFileBytes {
		return nil
	}
	if p.read+fi.Size() > maxPreviewRead {
		fp, err := hashRegular(ar, t.rel)
		if err != nil {
			return nil
		}
		return &previewFile{fp: fp}
	}
	b, err := readRegular(ar, t.rel)
	if err != nil {
		return nil
	}
	p.read += int64(len(b))
	return &previewFile{content: &b}
}

// hashRegular is the fingerprint of regular file rel of ar, hashed as it is read (at
// most maxFileBytes, as readRegular).
func hashRegular(ar *os.Root, rel string) (string, error) {
	f, err := openNoWait(ar, rel)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", &fs.PathError{Op: "read", Path: rel, Err: errors.New("not a regular file")}
	}
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return "", err
	}
	if n > maxFileBytes {
		return "", &fs.PathError{Op: "read", Path: rel, Err: fmt.Errorf("more than the limit of %d bytes", maxFileBytes)}
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// diff is the unified diff of old to new, or, when either was not read (past
// maxPreviewRead), a line saying why it is not shown.
func (p *planPreview) diff(shown string, old, new *previewFile) string {
	if old.held() && new.held() {
		return unified(shown, old.bytes(), new.bytes())
	}
	return fmt.Sprintf("%s: diff not shown: this plan's previews read their limit of %d MiB of files (what the step expects to find is still checked before it runs)\n",
		shown, maxPreviewRead>>20)
}

// PreviewPlan previews the steps of a plan run in conversation for user (its id; ""
// for no person), in order: a step's preview is nil when it is not a previewable file
// write, its file cannot be read, or user may not read it (another person's
// conversation or workspace, or one that needs a grant: the preview shows content).
func (s *Server) PreviewPlan(ctx context.Context, conversation, user string, calls []PreviewCall) ([]*FilePreview, error) {
	ws, err := s.Workspace(conversation)
	if err != nil {
		return nil, err
	}
	c := Call{Workspace: ws}
	c.ConversationID, c.UserID = conversation, user
	if a, err := s.accessOf(ctx, c, target{area: filepath.Base(ws)}); err != nil {
		return nil, err
	} else if a == accessOthers {
		return make([]*FilePreview, len(calls)), nil
	}
	p := &planPreview{s: s, files: map[[2]string]*previewFile{}, last: map[[2]string]int{}}
	steps := make([]previewStep, len(calls))
	for i, pc := range calls {
		st := &steps[i]
		if id, ok := restoreSnapshotOf(pc); ok {
			st.op, st.snapshot, st.restore = "restore_snapshot", id, s.restorePathsOf(c, id)
			for _, rp := range st.restore {
				st.keys = append(st.keys, [2]string{rp.t.area, rp.t.rel})
			}
			for _, k := range st.keys {
				p.last[k] = i
			}
			continue
		}
		st.t, st.change, st.op, st.ok = s.fileStep(c, pc)
		if !st.ok {
			continue
		}
		st.keys = append(st.keys, [2]string{st.t.area, st.t.rel})
		if st.op == "rename_file" || st.op == "copy_file" {
			var in twoPathIn
			if json.Unmarshal(pc.Arguments, &in) == nil {
				if to, err := s.resolve(c, "newPath", in.NewPath); err == nil && to.area != "" && to.rel != "." {
					st.to, st.toOK = to, true
					st.keys = append(st.keys, [2]string{to.area, to.rel})
				}
			}
		}
		for _, k := range st.keys {
			p.last[k] = i
		}
	}
	// The same plan over files that have not changed is answered as it was a moment ago
	// (preview_cache.go); otherwise it waits for a place among the previews computed now.
	key, sig := previewKey(conversation, user, calls), s.previewSig(p.last)
	if out, ok := s.previews.get(key, sig); ok {
		return out, nil
	}
	release, err := s.previews.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	out := make([]*FilePreview, len(calls))
	for i, pc := range calls {
		if err := ctx.Err(); err != nil {
			return nil, err // a request that ended: each step may read and compare 10 MiB files
		}
		st := steps[i]
		if st.op == "restore_snapshot" {
			out[i] = p.restoreStep(ctx, c, st)
		}
		if !st.ok {
			p.forget(st, i)
			continue
		}
		if a, err := s.accessOf(ctx, c, st.t); err != nil {
			return nil, err
		} else if a == accessOwn || a == accessMine {
			out[i] = p.step(ctx, c, st, pc.Arguments)
		}
		p.forget(st, i)
	}
	s.previews.put(key, sig, out)
	return out, nil
}

// forget drops the files step i names that no later step does.
func (p *planPreview) forget(st previewStep, i int) {
	for _, k := range st.keys {
		if p.last[k] == i {
			delete(p.files, k)
		}
	}
}

// step previews one step (nil: it will fail, or cannot be shown) and notes what it
// leaves in its files.
func (p *planPreview) step(ctx context.Context, c Call, st previewStep, args json.RawMessage) *FilePreview {
	t, key := st.t, [2]string{st.t.area, st.t.rel}
	old := p.file(t)
	if old == nil {
		return nil // a directory, or unreadable
	}
	switch {
	case st.op == "create_directory":
		if !old.absent {
			return nil // a file is there: the step will fail
		}
		return &FilePreview{Path: t.shown, Diff: "new directory " + t.shown + "/\n"}
	case moves[st.op]:
		if old.absent || !st.toOK {
			return nil // nothing to move or copy: the step will fail
		}
		return p.move(ctx, c, st.op, args, t, old, st.to)
	case st.op == "create_file" && !old.absent && !overwriting(args):
		return nil // refused when it runs: the file exists
	}
	oldFP := old.fingerprint()
	if oldFP == "" {
		return nil // what an earlier step leaves is unknown
	}
	next := &previewFile{absent: true}
	if st.op != "delete_file" {
		if old.absent && st.op != "create_file" {
			return nil // editing a file that will not exist: the step will fail
		}
		if old.held() || st.op == "create_file" {
			nb, _, err := st.change(t.shown, old.bytes())
			if err != nil {
				return nil // the step will fail, and say why
			}
			next = &previewFile{content: &nb}
		} else {
			next = &previewFile{} // an edit of a file read past the bound: what it leaves is unknown
		}
	}
	diff := p.diff(t.shown, old, next)
	p.files[key] = next
	return &FilePreview{Path: t.shown, Fingerprint: oldFP, Diff: diff}
}

// bounded is diff cut at a line to at most maxPreviewDiff bytes, saying so.
func bounded(diff string) string { return cutDiff(diff, len(diff)) }

// cutDiff is a diff of total bytes cut as bounded cuts it, from prefix: its first
// maxPreviewDiff bytes (or all of it).
func cutDiff(prefix string, total int) string {
	if total <= maxPreviewDiff {
		return prefix
	}
	cut := strings.LastIndexByte(prefix[:maxPreviewDiff], '\n') + 1
	return prefix[:cut] + fmt.Sprintf("[… the diff goes on: %d bytes in all, the first %d shown]\n", total, cut)
}

// unified is the bounded unified diff of old to new (labelled a/shown and b/shown): ""
// when they are the same, all of one side when the other is empty, and, when a line
// diff of them would cost too much (see maxDiffLines), the diff of only the lines they
// do not share at the start and end (see middleDiff).
func unified(shown string, old, new []byte) string {
	switch {
	case bytes.Equal(old, new):
		return ""
	case len(old) == 0:
		return wholeDiff(shown, new, '+')
	case len(new) == 0:
		return wholeDiff(shown, old, '-')
	case !diffable(old, new):
		return middleDiff(shown, old, new)
	}
	return lineDiff(shown, string(old), string(new), 0)
}

// lineDiff is the bounded unified diff of old to new, parts of two files after their
// first skipped lines (which they share): udiff.Unified's, with the hunks' line numbers
// counted in the whole files. Each hunk's line in new is its line in old moved by the
// lines the hunks before it added or removed; udiff v0.4.1 leaves out of it the
// unchanged lines a hunk joins between two changes.
func lineDiff(shown, old, new string, skipped int) string {
	d, err := udiff.ToUnifiedDiff("a/"+shown, "b/"+shown, old, udiff.Lines(old, new), udiff.DefaultContextLines)
	if err != nil { // cannot happen: the edits are udiff's own
		return fmt.Sprintf("%s: %d bytes → %d bytes, no line diff\n", shown, len(old), len(new))
	}
	moved := 0
	for _, h := range d.Hunks {
		h.FromLine += skipped
		h.ToLine = h.FromLine + moved
		for _, l := range h.Lines {
			switch l.Kind {
			case udiff.Insert:
				moved++
			case udiff.Delete:
				moved--
			}
		}
	}
	return bounded(d.String())
}

// diffable is whether a line diff of old and new stays within maxDiffLines and maxDiffBytes.
func diffable(old, new []byte) bool {
	return len(old)+len(new) <= maxDiffBytes && bytes.Count(old, []byte{'\n'})+bytes.Count(new, []byte{'\n'}) <= maxDiffLines
}

// middleDiff is the diff of old to new, two large files, from a line diff of only the
// lines between those they share at the start and at the end, with the context a
// unified diff keeps (udiff.DefaultContextLines lines each side) and hunk headers
// counting lines in the whole files: a small edit in a large file shows as such, not
// hidden behind the files' sizes. When even that middle is too large to diff, it is
// the sizes and the line where the two first differ.
func middleDiff(shown string, old, new []byte) string {
	pre, suf := commonLines(old, new)
	preLines := bytes.Count(old[:pre], []byte{'\n'})
	// from: the start of the context before the change (the lines before it are skipped).
	from, kept := pre, 0
	for ; kept < udiff.DefaultContextLines && from > 0; kept++ {
		from = bytes.LastIndexByte(old[:from-1], '\n') + 1
	}
	// after: the context after the change, the first lines of the common suffix.
	tail, after := old[len(old)-suf:], 0
	for k := 0; k < udiff.DefaultContextLines && after < len(tail); k++ {
		if i := bytes.IndexByte(tail[after:], '\n'); i >= 0 {
			after += i + 1
		} else {
			after = len(tail)
		}
	}
	oldMid, newMid := old[from:len(old)-suf+after], new[from:len(new)-suf+after]
	if !diffable(oldMid, newMid) {
		return fmt.Sprintf("%s: %d bytes → %d bytes, too large to show a line diff; the first difference is at line %d\n",
			shown, len(old), len(new), preLines+1)
	}
	// The skipped lines are the same on both sides: both line numbers move by them.
	return lineDiff(shown, string(oldMid), string(newMid), preLines-kept)
}

// commonLines is the length in bytes of the whole lines old and new share at their
// start (pre) and, after those, at their end (suf): each starts and ends at a line
// boundary in both, and the two do not overlap. old and new differ.
func commonLines(old, new []byte) (pre, suf int) {
	n := min(len(old), len(new))
	p := 0
	for p < n && old[p] == new[p] {
		p++
	}
	pre = bytes.LastIndexByte(old[:p], '\n') + 1
	for suf < n-pre && old[len(old)-1-suf] == new[len(new)-1-suf] {
		suf++
	}
	lineStart := func(b []byte, i int) bool { return i == 0 || b[i-1] == '\n' }
	if !lineStart(old, len(old)-suf) || !lineStart(new, len(new)-suf) {
		// The first line of the common bytes is only the end of a line in one of them.
		if i := bytes.IndexByte(old[len(old)-suf:], '\n'); i >= 0 {
			suf -= i + 1
		} else {
			suf = 0
		}
	}
	return pre, suf
}

// wholeDiff is the diff that adds (sign '+') or removes ('-') every line of content,
// as udiff.Unified writes it and bounded cuts it, but built directly: it needs no line
// diff, and only the part a preview keeps is written, so a new or deleted file of any
// size costs a pass over its bytes.
func wholeDiff(shown string, content []byte, sign byte) string {
	const noEOL = "\n\\ No newline at end of file\n"
	lines := bytes.Count(content, []byte{'\n'})
	partial := content[len(content)-1] != '\n'
	if partial {
		lines++
	}
	count := "1"
	if lines > 1 {
		count = "1," + strconv.Itoa(lines)
	}
	hunk := "@@ -0,0 +" + count + " @@\n"
	if sign == '-' {
		hunk = "@@ -" + count + " +0,0 @@\n"
	}
	head := "--- a/" + shown + "\n+++ b/" + shown + "\n" + hunk
	total := len(head) + lines + len(content)
	if partial {
		total += len(noEOL)
	}
	var b strings.Builder
	b.Grow(min(total, maxPreviewDiff))
	put := func(s []byte) { b.Write(s[:min(len(s), maxPreviewDiff-b.Len())]) }
	put([]byte(head))
	for rest := content; len(rest) > 0 && b.Len() < maxPreviewDiff; {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line = rest[:i+1]
		}
		rest = rest[len(line):]
		b.WriteByte(sign)
		put(line)
		if len(rest) == 0 && partial {
			put([]byte(noEOL))
		}
	}
	return cutDiff(b.String(), total)
}

// move previews a rename_file or copy_file of from (which holds src) to to: git's
// "rename from/to" or "copy from/to" lines, then the diff of what to holds (nothing, or
// what an overwrite replaces) to src; nil when the step will fail or to may not be read.
func (p *planPreview) move(ctx context.Context, c Call, op string, args json.RawMessage, from target, src *previewFile, to target) *FilePreview {
	var in twoPathIn
	if json.Unmarshal(args, &in) != nil || op == "rename_file" && (to.area != from.area || p.sameEntry(from, to)) {
		return nil // refused when it runs: across workspaces, or onto itself
	}
	if a, err := p.s.accessOf(ctx, c, to); err != nil || a != accessOwn && a != accessMine {
		return nil
	}
	was := p.file(to)
	if was == nil || !was.absent && !in.Overwrite {
		return nil // refused when it runs: newPath is a directory, or exists
	}
	srcFP, wasFP := src.fingerprint(), was.fingerprint()
	if srcFP == "" || wasFP == "" {
		return nil // what an earlier step leaves is unknown
	}
	verb := "copy"
	if op == "rename_file" {
		verb = "rename"
	}
	diff := fmt.Sprintf("%s from %s\n%s to %s\n", verb, from.shown, verb, to.shown) + p.diff(to.shown, was, src)
	p.files[[2]string{to.area, to.rel}] = &previewFile{content: src.content, fp: srcFP}
	if op == "rename_file" {
		p.files[[2]string{from.area, from.rel}] = &previewFile{absent: true}
	}
	return &FilePreview{Path: from.shown, Fingerprint: moveFingerprint(srcFP, wasFP), Diff: diff}
}

// sameEntry reports whether a rename from from to to names one directory entry twice,
// which the rename refuses (files.go sameEntry).
func (p *planPreview) sameEntry(from, to target) bool {
	ar, err := p.s.openArea(from.area)
	if err != nil {
		return false
	}
	defer ar.Close()
	return sameEntry(ar, from.rel, to.rel)
}

// Fingerprint is the fingerprint of the file a previewable call changes, as it is now
// ("" when the call is not a previewable file write).
func (s *Server) Fingerprint(_ context.Context, conversation string, pc PreviewCall) (string, error) {
	ws, err := s.Workspace(conversation)
	if err != nil {
		return "", err
	}
	c := Call{Workspace: ws}
	c.ConversationID = conversation
	if id, ok := restoreSnapshotOf(pc); ok {
		paths := s.restorePathsOf(c, id)
		if len(paths) == 0 {
			return "", nil // not previewed: the restore says what is wrong when it runs
		}
		return restoreFingerprint(paths, s.restoreStates(paths)), nil
	}
	t, _, op, ok := s.fileStep(c, pc)
	if !ok || op == "create_directory" {
		return "", nil
	}
	content, ok := s.current(t)
	if !ok {
		return "unreadable", nil
	}
	if !moves[op] {
		return fingerprint(content), nil
	}
	var in twoPathIn
	if json.Unmarshal(pc.Arguments, &in) != nil {
		return "", nil
	}
	to, err := s.resolve(c, "newPath", in.NewPath)
	if err != nil || to.area == "" || to.rel == "." {
		return "", nil // not previewed: the step says what is wrong when it runs
	}
	dst, ok := s.current(to)
	if !ok {
		return "unreadable", nil
	}
	return moveFingerprint(fingerprint(content), fingerprint(dst)), nil
}

func overwriting(args json.RawMessage) bool {
	var in createIn
	return json.Unmarshal(args, &in) == nil && in.Overwrite
}
