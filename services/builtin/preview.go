package builtin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
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
	// after: what earlier steps will have left in a file (by area and path).
	after := map[[2]string]*[]byte{}
	out := make([]*FilePreview, len(calls))
	for i, pc := range calls {
		if err := ctx.Err(); err != nil {
			return nil, err // a request that ended: each step may read and compare 10 MiB files
		}
		t, change, op, ok := s.fileStep(c, pc)
		if !ok {
			continue
		}
		if a, err := s.accessOf(ctx, c, t); err != nil {
			return nil, err
		} else if a != accessOwn && a != accessMine {
			continue
		}
		key := [2]string{t.area, t.rel}
		if op == "create_directory" {
			cur, seen := after[key]
			if !seen {
				if cur, ok = s.current(t); !ok {
					continue // a directory already (nothing to do), or unreadable
				}
			}
			if cur != nil {
				continue // a file is there: the step will fail
			}
			out[i] = &FilePreview{Path: t.shown, Diff: "new directory " + t.shown + "/\n"}
			continue
		}
		old, seen := after[key]
		if !seen {
			if old, ok = s.current(t); !ok {
				continue
			}
		}
		if moves[op] {
			if old == nil {
				continue // nothing to move or copy: the step will fail
			}
			p, dst, next, ok := s.previewMove(ctx, c, op, pc.Arguments, t, *old, after)
			if !ok {
				continue
			}
			out[i] = p
			after[dst] = next
			if op == "rename_file" {
				after[key] = nil
			}
			continue
		}
		var oldBytes []byte
		if old != nil {
			oldBytes = *old
		}
		if op == "create_file" && old != nil && !overwriting(pc.Arguments) {
			continue // refused when it runs: the file exists
		}
		var next *[]byte
		if op != "delete_file" {
			if old == nil && op != "create_file" {
				continue // editing a file that will not exist: the step will fail
			}
			nb, _, err := change(t.shown, oldBytes)
			if err != nil {
				continue // the step will fail, and say why
			}
			next = &nb
		}
		var newBytes []byte
		if next != nil {
			newBytes = *next
		}
		diff := unified(t.shown, oldBytes, newBytes)
		out[i] = &FilePreview{Path: t.shown, Fingerprint: fingerprint(old), Diff: diff}
		after[key] = next
	}
	return out, nil
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

// previewMove previews a rename_file or copy_file of from (whose content will be
// content) to its newPath: git's "rename from/to" or "copy from/to" lines, then the
// diff of what newPath holds (nothing, or what an overwrite replaces) to content. It
// returns newPath's key in after and its content once the step ran; ok is false when
// the step will fail or newPath may not be read.
func (s *Server) previewMove(ctx context.Context, c Call, op string, args json.RawMessage, from target, content []byte,
	after map[[2]string]*[]byte) (p *FilePreview, key [2]string, next *[]byte, ok bool) {
	var in twoPathIn
	if json.Unmarshal(args, &in) != nil {
		return nil, key, nil, false
	}
	to, err := s.resolve(c, "newPath", in.NewPath)
	if err != nil || to.area == "" || to.rel == "." || op == "rename_file" && to.area != from.area {
		return nil, key, nil, false
	}
	if a, err := s.accessOf(ctx, c, to); err != nil || a != accessOwn && a != accessMine {
		return nil, key, nil, false
	}
	key = [2]string{to.area, to.rel}
	was, seen := after[key]
	if !seen {
		if was, ok = s.current(to); !ok {
			return nil, key, nil, false
		}
	}
	if was != nil && !in.Overwrite {
		return nil, key, nil, false // refused when it runs: newPath exists
	}
	var wasBytes []byte
	if was != nil {
		wasBytes = *was
	}
	verb := "copy"
	if op == "rename_file" {
		verb = "rename"
	}
	head := fmt.Sprintf("%s from %s\n%s to %s\n", verb, from.shown, verb, to.shown)
	diff := head + unified(to.shown, wasBytes, content)
	return &FilePreview{Path: from.shown, Fingerprint: moveFingerprint(fingerprint(&content), fingerprint(was)), Diff: diff}, key, &content, true
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
