package builtin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Limits of file_operations.
const (
	// maxFileBytes bounds a file that is written, edited, copied or searched.
	maxFileBytes = 10 << 20
	// maxReadOutput bounds the text read_file returns in one call.
	maxReadOutput = 256 << 10
	// maxReadScan bounds what read_file reads through in one call (the lines before
	// the offset, the rest of a line too long to show): a huge file (a sparse one of
	// terabytes passes the binary check) would otherwise keep the call reading for hours.
	maxReadScan = 8 * maxFileBytes
	// defaultReadLines and maxReadLines: read_file's limit.
	defaultReadLines = 2000
	maxReadLines     = 20000
	// maxListEntries bounds list_dir.
	maxListEntries = 1000
	// maxListScan bounds the entries list_dir reads of a directory to show the first
	// maxListEntries by name; maxDirScan those file_search and grep_search read of each
	// directory. Both read in batches of dirBatch, so memory stays bounded too.
	maxListScan = 10 * maxListEntries
	maxDirScan  = 100 * maxListEntries
	dirBatch    = 1024
	// maxWalkDepth and maxWalkPath bound how deep file_search and grep_search go: each
	// level holds its path and each open resolves it again, so a tree thousands of
	// levels deep (a terminal makes one in seconds) took gigabytes.
	maxWalkDepth = 256
	maxWalkPath  = 4096
	// defaultResults and maxResults: file_search's and grep_search's maxResults.
	defaultResults = 200
	maxResults     = 1000
	// binarySniff is how much of a file is looked at to tell binary from text.
	binarySniff = 8000
	// maxGrepInsts bounds grep_search's pattern, in instructions of its compiled program:
	// a match costs about that times the bytes searched (5 ns each), and cannot be
	// stopped. Real patterns stay below it: `func\s+\w+\(` is 11, [a-z]{1,100} 201, a
	// URL with {1,200} 410, an alternation of 40 identifiers about 600.
	maxGrepInsts = 2000
	// grepChunk is how much of a file grep_search matches between checks that the call
	// was not cancelled: whole lines, under a second at maxGrepInsts.
	grepChunk = 64 << 10
	// maxGrepLineWork bounds the match of one line longer than grepChunk, in bytes times
	// instructions (about 1.3 s): a longer line is left out and the result says so.
	maxGrepLineWork = 1 << 28
)

// maxWalkEntries bounds the directory entries one file_search or grep_search reads in
// all: each level's entries are held while the walk is below it, so 256 levels of
// 100,000 entries (hard links are cheap) held gigabytes. A var so tests can lower it.
var maxWalkEntries = 1_000_000

// maxSearches bounds the searches (file_search, grep_search) that walk at once in one
// process: each may hold a directory's maxDirScan entries with their file information
// (some 35 MB) and a file's bytes, so many parallel calls held gigabytes. More wait for
// a place, within their call's timeout.
const maxSearches = 4

// fileOp is the Run of a file operation, with the arguments decoded.
type fileOp[T any] func(ctx context.Context, s *Server, c Call, in T) (*mcp.CallToolResult, error)

func run[T any](s *Server, f fileOp[T]) func(ctx context.Context, c Call, args json.RawMessage) (*mcp.CallToolResult, error) {
	return func(ctx context.Context, c Call, args json.RawMessage) (*mcp.CallToolResult, error) {
		var in T
		if err := json.Unmarshal(args, &in); err != nil {
			res := errorResult("the arguments: " + err.Error())
			res.StructuredContent = map[string]any{"errorType": ErrorInvalidParameters}
			return res, nil
		}
		res, err := f(ctx, s, c, in)
		if err != nil {
			return fileError(err), nil
		}
		return res, nil
	}
}

// The errorType of a failed operation's structured content (seed 001's error result),
// for an agent that acts on the kind of failure rather than its words.
const (
	ErrorFileNotFound          = "FileNotFound"
	ErrorPermissionDenied      = "PermissionDenied"
	ErrorAlreadyExists         = "AlreadyExists"
	ErrorPathNotAllowed        = "PathNotAllowed" // the path guard's refusal: no grant can allow it
	ErrorAuthorizationRequired = "AuthorizationRequired"
	ErrorExecutionFailed       = "ExecutionFailed"
	ErrorInvalidParameters     = "InvalidParameters" // arguments the operation cannot read
)

// errFile is a failure of the file system at a path, of a kind (an Error* constant).
type errFile struct {
	kind, path string
	err        error
}

func (e *errFile) Error() string { return e.err.Error() }
func (e *errFile) Unwrap() error { return e.err }

// fileError is the result of a refused or failed operation: the message, and in its
// structured content the errorType and the path it concerns (seed 001); an
// authorization refusal says what to ask for (requiresAuthorization).
func fileError(err error) *mcp.CallToolResult {
	res := errorResult("ERROR: " + err.Error())
	var ae *errAuthorization
	var fe *errFile
	var ge *errGuard
	var sc map[string]any
	switch {
	case errors.As(err, &ae):
		sc = AuthorizationContent(ae.key, ae.path)
	case errors.As(err, &fe):
		sc = map[string]any{"errorType": fe.kind, "attemptedPath": fe.path}
	case errors.As(err, &ge):
		sc = map[string]any{"errorType": ErrorPathNotAllowed}
	default:
		sc = map[string]any{"errorType": ErrorExecutionFailed}
	}
	var ke *errKept
	var ce *errChanged
	if errors.As(err, &ke) {
		sc["snapshotId"] = ke.id
		sc["changed"] = true
	} else if errors.As(err, &ce) {
		sc["changed"] = true
	}
	res.StructuredContent = sc
	return res
}

// errKept is a write that failed after it may have changed something (made directories,
// removed what a restore replaces): its snapshot is kept and named, so that
// restore_snapshot can put back what was there.
type errKept struct {
	err error
	id  string
}

func (e *errKept) Error() string {
	return fmt.Sprintf("%v (part of the write may have happened: restore_snapshot %s puts back what was there before)", e.err, e.id)
}
func (e *errKept) Unwrap() error { return e.err }

// errChanged is a write that changed something but whose snapshot could not be saved:
// its result says changed, so that a rollback names the step as one that may have
// taken effect rather than one that changed nothing.
type errChanged struct{ err error }

func (e *errChanged) Error() string { return e.err.Error() }
func (e *errChanged) Unwrap() error { return e.err }

// AuthorizationContent is the structured content of a call refused until a grant
// allows operation key on path: the tool's own refusal, and the gateway's when the
// check before approval refused the call (seed 001: requiresAuthorization).
func AuthorizationContent(key, path string) map[string]any {
	return map[string]any{"errorType": ErrorAuthorizationRequired, "requiresAuthorization": true, "authorizationKey": key,
		"reason": "Operation affects files outside the conversation's working directory", "attemptedPath": path}
}

func pathProp(desc string) map[string]any {
	return map[string]any{"type": "string", "minLength": 1, "maxLength": maxPathLen, "description": desc}
}

var (
	propFilePath = pathProp("the file's path: relative to the conversation's workspace, or absolute under the built-in root")
	propNewPath  = pathProp("the destination path (relative to the workspace, or absolute under the root)")
	propDir      = map[string]any{"type": "string", "maxLength": maxPathLen, "description": "a directory (relative to the workspace, or absolute under the root); the workspace when omitted"}
	propContent  = map[string]any{"type": "string", "maxLength": maxFileBytes, "description": "the text to write"}
	propOverwrte = map[string]any{"type": "boolean", "description": "replace an existing file (default false: an existing file is refused)"}
	propMax      = map[string]any{"type": "integer", "minimum": 1, "maximum": maxResults, "description": fmt.Sprintf("at most this many results (default %d)", defaultResults)}
)

// FileOperations is the tool file_operations (seed 000): reading, searching and
// editing files in the conversation's workspace, behind the path guard (guard.go);
// every write snapshots what it changes first (snapshot.go).
func (s *Server) FileOperations() Tool {
	name := func(a map[string]any, k string) string {
		p := str(a[k])
		if p == "" {
			return ""
		}
		return " " + clip(filepath.Base(p), 60)
	}
	disp := func(verb, k string) func(map[string]any) string {
		return func(a map[string]any) string { return verb + name(a, k) }
	}
	return Tool{
		Name:  "file_operations",
		Title: "File operations",
		Description: "Read, search and edit files in this conversation's workspace. Relative paths resolve in the workspace; " +
			"writes elsewhere need a person's permission (user_collaboration with authorize_operation). " +
			"Every write keeps a snapshot of what it changed (its result says snapshotId); restore_snapshot puts it back.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: new(true), OpenWorldHint: new(false)},
		Operations: []Operation{
			{Name: "read_file", Description: "read a text file's lines (offset: the first line, from 0; limit: how many)",
				Properties: map[string]any{"filePath": propFilePath,
					"offset": map[string]any{"type": "integer", "minimum": 0, "description": "the first line to read, counting from 0"},
					"limit":  map[string]any{"type": "integer", "minimum": 1, "maximum": maxReadLines, "description": fmt.Sprintf("how many lines (default %d)", defaultReadLines)}},
				Required: []string{"filePath"}, Display: disp("Reading", "filePath"), Run: run(s, readFile)},
			{Name: "list_dir", Description: "list a directory",
				Properties: map[string]any{"path": propDir}, Display: func(a map[string]any) string {
					if str(a["path"]) == "" {
						return "Listing the workspace"
					}
					return "Listing" + name(a, "path")
				}, Run: run(s, listDir)},
			{Name: "file_search", Description: "find files by a glob pattern (*, ?, ** for any directories)",
				Properties: map[string]any{"pattern": map[string]any{"type": "string", "minLength": 1, "maxLength": 1000, "description": "a glob, e.g. **/*.go"},
					"path": propDir, "maxResults": propMax},
				Required: []string{"pattern"}, Display: func(a map[string]any) string { return "Finding files " + clip(str(a["pattern"]), 60) }, Run: run(s, fileSearch)},
			{Name: "grep_search", Description: "search text files for a regular expression (binary files are skipped)",
				Properties: map[string]any{"pattern": map[string]any{"type": "string", "minLength": 1, "maxLength": 1000, "description": "a regular expression (RE2 syntax)"},
					"path": propDir, "include": map[string]any{"type": "string", "maxLength": 1000, "description": "only files matching this glob"}, "maxResults": propMax},
				Required: []string{"pattern"}, Display: func(a map[string]any) string { return "Searching code: " + clip(str(a["pattern"]), 60) }, Run: run(s, grepSearch)},
			{Name: "get_file_info", Description: "a file's type, size, mode and modification time",
				Properties: map[string]any{"filePath": propFilePath}, Required: []string{"filePath"}, Display: disp("Inspecting", "filePath"), Run: run(s, fileInfo)},
			{Name: "create_file", Description: "create a file with content (an existing file is refused unless overwrite is true)",
				Properties: map[string]any{"filePath": propFilePath, "content": propContent, "overwrite": propOverwrte},
				Required:   []string{"filePath", "content"}, Display: disp("Creating file", "filePath"), Run: run(s, createFile)},
			{Name: "replace_string", Description: "replace oldString, which must occur exactly once, with newString",
				Properties: map[string]any{"filePath": propFilePath,
					"oldString": map[string]any{"type": "string", "minLength": 1, "maxLength": maxFileBytes, "description": "the exact text to replace, with enough context to be unique"},
					"newString": map[string]any{"type": "string", "maxLength": maxFileBytes, "description": "the replacement"}},
				Required: []string{"filePath", "oldString", "newString"}, Display: disp("Editing", "filePath"), Run: run(s, replaceString)},
			{Name: "multi_replace", Description: "several replacements in one file, each oldString exactly once, all or none",
				Properties: map[string]any{"filePath": propFilePath, "replacements": map[string]any{"type": "array", "minItems": 1, "maxItems": 100,
					"items": map[string]any{"type": "object", "required": []string{"oldString", "newString"}, "additionalProperties": false,
						"properties": map[string]any{"oldString": map[string]any{"type": "string", "minLength": 1}, "newString": map[string]any{"type": "string"}}}}},
				Required: []string{"filePath", "replacements"}, Display: disp("Editing", "filePath"), Run: run(s, multiReplace)},
			{Name: "insert_edit", Description: "insert content after line (0: at the start)",
				Properties: map[string]any{"filePath": propFilePath, "content": propContent,
					"line": map[string]any{"type": "integer", "minimum": 0, "description": "insert after this line (counting from 1; 0 inserts at the start)"}},
				Required: []string{"filePath", "content", "line"}, Display: disp("Inserting into", "filePath"), Run: run(s, insertEdit)},
			{Name: "delete_file", Description: "delete a file or an empty directory",
				Properties: map[string]any{"filePath": propFilePath}, Required: []string{"filePath"}, Display: disp("Deleting", "filePath"), Run: run(s, deleteFile)},
			{Name: "rename_file", Description: "rename or move a file within one workspace",
				Properties: map[string]any{"filePath": propFilePath, "newPath": propNewPath, "overwrite": propOverwrte},
				Required:   []string{"filePath", "newPath"}, Display: func(a map[string]any) string {
					return "Renaming" + name(a, "filePath") + " to" + name(a, "newPath")
				}, Run: run(s, renameFile)},
			{Name: "copy_file", Description: "copy a file",
				Properties: map[string]any{"filePath": propFilePath, "newPath": propNewPath, "overwrite": propOverwrte},
				Required:   []string{"filePath", "newPath"}, Display: func(a map[string]any) string {
					return "Copying" + name(a, "filePath") + " to" + name(a, "newPath")
				}, Run: run(s, copyFile)},
			{Name: "create_directory", Description: "create a directory and any missing parents",
				Properties: map[string]any{"filePath": propFilePath}, Required: []string{"filePath"}, Display: disp("Creating directory", "filePath"), Run: run(s, createDirectory)},
			{Name: "restore_snapshot", Description: "undo a write: put back exactly what its snapshot kept",
				Properties: map[string]any{"snapshotId": map[string]any{"type": "string", "minLength": 1, "maxLength": 200, "description": "the snapshotId a write returned"}},
				Required:   []string{"snapshotId"}, Display: func(a map[string]any) string { return "Restoring snapshot " + clip(str(a["snapshotId"]), 40) }, Run: run(s, restoreSnapshot)},
		},
	}
}

// openRead resolves p for reading (operation op), checked by the guard, and opens its
// area.
func (s *Server) openRead(ctx context.Context, c Call, op, param, p string) (target, *os.Root, error) {
	t, err := s.resolve(c, param, p)
	if err != nil {
		return t, nil, err
	}
	anyGrant := false
	if t.area != "" {
		if anyGrant, err = s.mayRead(ctx, c, op, t); err != nil {
			return t, nil, err
		}
	}
	t, ar, err := s.open(c, param, p)
	t.anyGrant = anyGrant
	return t, ar, err
}

// open resolves p and opens its area.
func (s *Server) open(c Call, param, p string) (target, *os.Root, error) {
	t, err := s.resolve(c, param, p)
	if err != nil {
		return t, nil, err
	}
	if t.area == "" {
		return t, nil, guardf("%s: %s is the built-in root, which holds workspaces, not files", param, p)
	}
	ar, err := s.openArea(t.area)
	return t, ar, err
}

func isBinary(b []byte) bool {
	if bytes.IndexByte(b, 0) >= 0 {
		return true
	}
	// A multi-byte character may be cut at the end of the sniffed part.
	for i := 0; i < utf8.UTFMax && len(b) > 0 && !utf8.Valid(b); i++ {
		b = b[:len(b)-1]
	}
	return !utf8.Valid(b)
}

// --- reading ---

// openNoWait opens rel in ar for reading without blocking: a FIFO (made by a terminal
// command, or swapped in after a check) would otherwise hang the call in the kernel,
// deaf to its context. Callers refuse what is not a regular file or a directory.
func openNoWait(ar *os.Root, rel string) (*os.File, error) {
	return ar.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}

// readRegular reads regular file rel of ar, refusing more than maxFileBytes however it
// grew since it was looked at.
func readRegular(ar *os.Root, rel string) ([]byte, error) {
	f, err := openNoWait(ar, rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "read", Path: rel, Err: errors.New("not a regular file")}
	}
	b, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxFileBytes {
		return nil, &fs.PathError{Op: "read", Path: rel, Err: fmt.Errorf("more than the limit of %d bytes", maxFileBytes)}
	}
	return b, nil
}

// lastRuneStart is where the last character of b begins (at most utf8.UTFMax back).
func lastRuneStart(b []byte) int {
	i := len(b)
	for n := 0; n < utf8.UTFMax && i > 0; n++ {
		i--
		if utf8.RuneStart(b[i]) {
			return i
		}
	}
	return len(b)
}

// cutNote ends a line too long to show whole (its full size in bytes); cutScanNote one
// that goes on past what read_file reads.
const (
	cutNote     = "… [line cut: %d bytes in all]\n"
	cutScanNote = "… [line cut: more than the %d MiB read_file reads]\n"
)

// errScanLimit: read_file read maxReadScan bytes of a file without getting where it
// was asked to.
var errScanLimit = errors.New("read_file's scan limit")

// readLine reads one line of br (its newline included), keeping at most keep bytes of
// it; size is its whole length, or what was read of it. err is io.EOF after the last
// line, errScanLimit once *left bytes were read (it counts them down), or ctx's error.
func readLine(ctx context.Context, br *bufio.Reader, keep int, left *int) (kept []byte, size int, err error) {
	for {
		if err := ctx.Err(); err != nil {
			return kept, size, err
		}
		if *left <= 0 {
			if _, err := br.Peek(1); err != nil {
				return kept, size, err // the file ends here
			}
			return kept, size, errScanLimit
		}
		chunk, err := br.ReadSlice('\n')
		size += len(chunk)
		*left -= len(chunk)
		if room := keep - len(kept); room > 0 {
			kept = append(kept, chunk[:min(room, len(chunk))]...)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return kept, size, err
		}
	}
}

type readIn struct {
	FilePath string `json:"filePath"`
	Offset   int    `json:"offset"`
	Limit    int    `json:"limit"`
}

func readFile(ctx context.Context, s *Server, c Call, in readIn) (*mcp.CallToolResult, error) {
	t, ar, err := s.openRead(ctx, c, "read_file", "filePath", in.FilePath)
	if err != nil {
		return nil, err
	}
	defer ar.Close()
	f, err := openNoWait(ar, t.rel)
	if err != nil {
		return nil, fsError(t, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("%s is a directory; use list_dir", t.shown)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", t.shown)
	}
	br := bufio.NewReaderSize(f, 64<<10)
	head, _ := br.Peek(binarySniff)
	if isBinary(head) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%s is a binary file (%d bytes); read_file shows text only", t.shown, fi.Size())}},
			StructuredContent: map[string]any{"filePath": t.shown, "binary": true, "size": fi.Size()}}, nil
	}
	limit := in.Limit
	if limit <= 0 {
		limit = defaultReadLines
	}
	limit = min(limit, maxReadLines)
	var out strings.Builder
	line, n, more, capped, scanned := 0, 0, false, false, false
	left := maxReadScan
	// cut shows the start of line l, too long to show whole, ended by note.
	cut := func(l []byte, note string) {
		l = l[:maxReadOutput-len(note)-24]
		// Not in the middle of a character (a bad byte elsewhere stays, as read_file
		// shows it).
		if start := lastRuneStart(l); !utf8.FullRune(l[start:]) {
			l = l[:start]
		}
		out.Write(l)
		out.WriteString(note)
	}
	for {
		if line >= in.Offset && n == limit {
			if _, err := br.Peek(1); err == nil {
				more = true
			}
			break
		}
		// What is kept of a line is bounded (the output's room), whatever its length: a
		// line before the offset is not kept at all.
		keep := 0
		if line >= in.Offset {
			keep = maxReadOutput - out.Len() + 1
		}
		l, size, err := readLine(ctx, br, keep, &left)
		if errors.Is(err, errScanLimit) {
			switch {
			case line >= in.Offset && n > 0: // the next call starts at this line
				more, capped, scanned = true, true, true
			case line >= in.Offset && size > maxReadOutput:
				cut(l, fmt.Sprintf(cutScanNote, maxReadScan>>20))
				n++
			default:
				upTo := line
				if line >= in.Offset {
					upTo-- // this very line does not fit
				}
				return nil, fmt.Errorf("%s: read_file reads at most the first %d MiB of a file, and they end within line %d (counting from 0): "+
					"read from an offset of at most %d, or use a terminal command (sed -n, tail) for the lines beyond", t.shown, maxReadScan>>20, line, max(upTo, 0))
			}
			break
		}
		if size == 0 && err == io.EOF {
			break
		}
		if err != nil && err != io.EOF {
			return nil, err
		}
		if line >= in.Offset {
			switch {
			case out.Len()+size <= maxReadOutput:
				out.Write(l)
			case n > 0: // the next call starts at this line
				more, capped = true, true
			default:
				// One line longer than the whole output: its start, cut, so that reading
				// on gets past it.
				cut(l, fmt.Sprintf(cutNote, size))
			}
			if capped {
				break
			}
			n++
		}
		line++
		if err == io.EOF {
			break
		}
	}
	sc := map[string]any{"filePath": t.shown, "offset": in.Offset, "lines": n, "size": fi.Size(), "more": more}
	text := out.String()
	if more {
		sc["nextOffset"] = in.Offset + n
		why := ""
		switch {
		case scanned:
			why = fmt.Sprintf(" (read_file reads at most the first %d MiB of a file)", maxReadScan>>20)
		case capped:
			why = fmt.Sprintf(" (output capped at %d bytes)", maxReadOutput)
		}
		text += fmt.Sprintf("\n[… more lines follow%s: read on with offset %d]", why, in.Offset+n)
	} else if n == 0 && in.Offset > 0 {
		text = fmt.Sprintf("[%s has %d lines; offset %d is past the end]", t.shown, line, in.Offset)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: sc}, nil
}

func fsError(t target, err error) error {
	var pe *fs.PathError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &errFile{ErrorFileNotFound, t.shown, fmt.Errorf("file not found: %s", t.shown)}
	case errors.As(err, &pe) && strings.Contains(pe.Err.Error(), "escapes"):
		return guardf("%s leads outside its workspace (a symlink or ..), which the path guard refuses", t.shown)
	case errors.Is(err, fs.ErrPermission):
		why := err
		if errors.As(err, &pe) {
			why = pe.Err
		}
		return &errFile{ErrorPermissionDenied, t.shown, fmt.Errorf("%s: %v", t.shown, why)}
	case errors.As(err, &pe):
		return &errFile{ErrorExecutionFailed, t.shown, fmt.Errorf("%s: %v", t.shown, pe.Err)}
	}
	return err
}

type dirIn struct {
	Path string `json:"path"`
}

func listDir(ctx context.Context, s *Server, c Call, in dirIn) (*mcp.CallToolResult, error) {
	p := in.Path
	if p == "" {
		p = "."
	}
	t, err := s.resolve(c, "path", p)
	if err != nil {
		return nil, err
	}
	var ar *os.Root
	// shows: the workspaces a listing of the root shows (nil: all), the caller's own.
	var shows map[string]bool
	if t.area == "" {
		if s.opts.Conversations != nil && c.UserID != "" {
			if shows, err = s.opts.Conversations.DirsOf(ctx, c.UserID); err != nil {
				return nil, err
			}
		}
		ar, err = os.OpenRoot(s.opts.Root)
	} else {
		if _, err := s.mayRead(ctx, c, "list_dir", t); err != nil {
			return nil, err
		}
		ar, err = s.openArea(t.area)
	}
	if err != nil {
		return nil, err
	}
	defer ar.Close()
	f, err := openNoWait(ar, t.rel)
	if err != nil {
		return nil, fsError(t, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, fsError(t, err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", t.shown)
	}
	var ents []fs.DirEntry
	var total int
	var cut bool
	if shows != nil {
		// The caller's own workspaces, looked up by name: the root holds everyone's.
		for _, n := range slices.Sorted(maps.Keys(shows)) {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if n == "." || n == ".." || n == snapshotDir || strings.ContainsRune(n, filepath.Separator) {
				continue
			}
			if fi, err := ar.Lstat(n); err == nil && fi.IsDir() {
				if total++; len(ents) < maxListEntries {
					ents = append(ents, fs.FileInfoToDirEntry(fi))
				}
			}
		}
	} else if ents, total, cut, err = firstEntries(ctx, f, maxListEntries, maxListScan, func(e fs.DirEntry) bool {
		if t.area != "" {
			return !isTemp(e) // a write's temporary file, in flight or a crash's leftover
		}
		return e.Name() != snapshotDir && e.IsDir()
	}); err != nil {
		return nil, fsError(t, err)
	}
	var lines []string
	var names []string
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() {
			n += "/"
		} else if e.Type()&fs.ModeSymlink != 0 {
			n += "@"
		}
		names = append(names, n)
		lines = append(lines, n)
	}
	switch {
	case cut:
		lines = append(lines, fmt.Sprintf("[… more than %d entries; the first %d by name of the %d read shown]", maxListScan, len(ents), maxListScan))
	case total > len(ents):
		lines = append(lines, fmt.Sprintf("[… %d entries in all; the first %d shown]", total, len(ents)))
	}
	text := strings.Join(lines, "\n")
	if len(names) == 0 {
		text = t.shown + " is empty"
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}},
		StructuredContent: map[string]any{"path": t.shown, "entries": names}}, nil
}

// firstEntries reads directory f in batches, checking ctx between them, and returns
// the first n entries by name of those keep accepts, how many it accepted in all, and
// whether it stopped at scan entries with more to read. Only about 2n entries and a
// batch are held at a time, however large the directory.
func firstEntries(ctx context.Context, f *os.File, n, scan int, keep func(fs.DirEntry) bool) (ents []fs.DirEntry, total int, cut bool, err error) {
	byName := func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) }
	read := 0
	for {
		if err := ctx.Err(); err != nil {
			return nil, 0, false, err
		}
		if read >= scan {
			_, err := f.ReadDir(1)
			cut = err == nil
			break
		}
		batch, err := f.ReadDir(min(dirBatch, scan-read))
		read += len(batch)
		for _, e := range batch {
			if keep(e) {
				ents = append(ents, e)
				total++
			}
		}
		if len(ents) > 2*n {
			slices.SortFunc(ents, byName)
			ents = slices.Delete(ents, n, len(ents))
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, 0, false, err
		}
	}
	slices.SortFunc(ents, byName)
	if len(ents) > n {
		ents = ents[:n]
	}
	return ents, total, cut, nil
}

// globRegexp turns a glob (*, ?, **, [...]) into a regular expression on
// slash-separated paths; a glob without a slash matches base names.
func globRegexp(g string) (*regexp.Regexp, bool, error) {
	base := !strings.Contains(g, "/")
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(g); i++ {
		switch ch := g[i]; ch {
		case '*':
			if i+1 < len(g) && g[i+1] == '*' {
				i++
				if i+1 < len(g) && g[i+1] == '/' {
					i++
					b.WriteString("(?:.*/)?")
				} else {
					b.WriteString(".*")
				}
			} else {
				b.WriteString("[^/]*")
			}
		case '?':
			b.WriteString("[^/]")
		case '[':
			j := strings.IndexByte(g[i:], ']')
			if j < 0 {
				return nil, false, fmt.Errorf("pattern: unclosed [ in %q", g)
			}
			cls := g[i+1 : i+j]
			if strings.HasPrefix(cls, "!") {
				cls = "^" + cls[1:]
			}
			b.WriteString("[" + cls + "]")
			i += j
		default:
			b.WriteString(regexp.QuoteMeta(string(ch)))
		}
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return nil, false, fmt.Errorf("pattern: %v", err)
	}
	return re, base, nil
}

// walkCut is what a walk left out: the directories it read only part of, those past
// maxWalkDepth or maxWalkPath it did not read, and those it read partly or not at all
// once it had read maxWalkEntries (the first of each, and how many).
type walkCut struct {
	wide                             []string
	deep, long, spent                int
	firstDeep, firstLong, firstSpent string
}

// walk visits the regular files under dir of c's path p (symlinks are not followed),
// in order of their names, with their path relative to dir (slash-separated), until
// visit says stop. Each directory is read in batches, at most maxDirScan of its
// entries (cut names the directories that had more), and maxWalkEntries in all (cut
// names where it ran out); it goes at most maxWalkDepth directories down, and not into
// one whose path is longer than maxWalkPath (cut says which it left); and the walk
// stops when the call is cancelled or times out.
func (s *Server) walk(ctx context.Context, c Call, op, p string, visit func(ar *os.Root, name, rel string) (stop bool)) (t target, cut walkCut, err error) {
	if p == "" {
		p = "."
	}
	t, ar, err := s.openRead(ctx, c, op, "path", p)
	if err != nil {
		return t, cut, err
	}
	defer ar.Close()
	start := filepath.ToSlash(t.rel)
	if fi, err := ar.Stat(start); err != nil {
		return t, cut, fsError(t, err)
	} else if !fi.IsDir() {
		return t, cut, fmt.Errorf("%s is not a directory", t.shown)
	}
	select {
	case s.searches <- struct{}{}:
		defer func() { <-s.searches }()
	case <-ctx.Done():
		return t, cut, ctx.Err()
	}
	stopped := errors.New("stop")
	all := func(fs.DirEntry) bool { return true }
	left := maxWalkEntries // entries the walk may still read
	spent := func(dir string) {
		if cut.spent++; cut.spent == 1 {
			cut.firstSpent = dir
		}
	}
	var walkDir func(dir string, depth int) error
	walkDir = func(dir string, depth int) error {
		if left <= 0 {
			spent(dir)
			return nil
		}
		f, err := openNoWait(ar, dir)
		if err != nil {
			return nil // unreadable: skipped
		}
		scan := min(maxDirScan, left)
		ents, read, more, err := firstEntries(ctx, f, scan, scan, all)
		f.Close()
		if ctx.Err() != nil {
			return ctx.Err() // the call timed out or was cancelled: a large tree stops here
		}
		if err != nil {
			return nil // unreadable: skipped
		}
		left -= read // all entries are kept, so all read are counted
		// Only each entry's name and type are held while the walk is below this
		// directory: a directory read through an os.Root comes with every entry's file
		// information (some 340 bytes an entry), and the budget's million entries kept
		// so took a third of a gigabyte.
		kids := make([]walkEntry, len(ents))
		for i, e := range ents {
			kids[i] = walkEntry{name: e.Name(), typ: e.Type()}
		}
		switch {
		case more && scan == maxDirScan:
			cut.wide = append(cut.wide, dir)
		case more:
			spent(dir)
		}
		for _, d := range kids {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			name := path.Join(dir, d.name)
			switch isDir := d.typ.IsDir(); {
			case isDir && depth == maxWalkDepth:
				if cut.deep++; cut.deep == 1 {
					cut.firstDeep = name
				}
			case isDir && len(name) > maxWalkPath:
				if cut.long++; cut.long == 1 {
					cut.firstLong = name
				}
			case isDir:
				if err := walkDir(name, depth+1); err != nil {
					return err
				}
			case d.typ.IsRegular() && !isTempName(d.name): // not a write's temporary file
				if visit(ar, name, relUnder(start, name)) {
					return stopped
				}
			}
		}
		return nil
	}
	if err := walkDir(start, 0); err != nil && !errors.Is(err, stopped) {
		return t, walkCut{}, err
	}
	return t, cut, nil
}

// walkEntry is what a walk keeps of a directory's entry while it is below the directory.
type walkEntry struct {
	name string
	typ  fs.FileMode
}

// relUnder is name (slash-separated, in the area) relative to directory start.
func relUnder(start, name string) string {
	switch {
	case name == start:
		return ""
	case start == ".":
		return name
	}
	return strings.TrimPrefix(name, start+"/")
}

// cutNoteOf says which directories a search read only part of or left out ("" when none).
func cutNoteOf(t target, cut walkCut) string {
	start := filepath.ToSlash(t.rel)
	note := ""
	if len(cut.wide) > 0 {
		what := shownUnder(t, relUnder(start, cut.wide[0]))
		if len(cut.wide) > 1 {
			what += fmt.Sprintf(" and %d other directories", len(cut.wide)-1)
		}
		note += fmt.Sprintf("\n[… %s has more than %d entries: only %d of them were searched]", what, maxDirScan, maxDirScan)
	}
	left := func(n int, first, one, many string) {
		what := shownUnder(t, relUnder(start, first))
		if n == 1 {
			note += fmt.Sprintf("\n[… %s %s: it was not searched]", what, one)
		} else if n > 1 {
			note += fmt.Sprintf("\n[… %s and %d other directories %s: they were not searched]", what, n-1, many)
		}
	}
	left(cut.deep, cut.firstDeep, fmt.Sprintf("is more than %d directories deep", maxWalkDepth),
		fmt.Sprintf("are more than %d directories deep", maxWalkDepth))
	left(cut.long, cut.firstLong, fmt.Sprintf("has a path longer than %d bytes", maxWalkPath),
		fmt.Sprintf("have paths longer than %d bytes", maxWalkPath))
	if cut.spent > 0 {
		what := shownUnder(t, relUnder(start, cut.firstSpent))
		switch cut.spent {
		case 1:
			what += " was"
		case 2:
			what += " and 1 other directory after it were"
		default:
			what += fmt.Sprintf(" and %d other directories after it were", cut.spent-1)
		}
		note += fmt.Sprintf("\n[… the search reads at most %d directory entries in all: %s not fully searched]", maxWalkEntries, what)
	}
	return note
}

func capOf(n int) int {
	if n <= 0 {
		return defaultResults
	}
	return min(n, maxResults)
}

// shownUnder is file rel (under the searched directory t) as the agent reads it.
func shownUnder(t target, rel string) string {
	if t.shown == "." {
		return rel
	}
	return path.Join(filepath.ToSlash(t.shown), rel)
}

type searchIn struct {
	Pattern    string `json:"pattern"`
	Path       string `json:"path"`
	Include    string `json:"include"`
	MaxResults int    `json:"maxResults"`
}

func fileSearch(ctx context.Context, s *Server, c Call, in searchIn) (*mcp.CallToolResult, error) {
	re, base, err := globRegexp(in.Pattern)
	if err != nil {
		return nil, err
	}
	limit := capOf(in.MaxResults)
	var found []string
	more := false
	t, cut, err := s.walk(ctx, c, "file_search", in.Path, func(_ *os.Root, _, rel string) bool {
		m := rel
		if base {
			m = path.Base(rel)
		}
		if !re.MatchString(m) {
			return false
		}
		if len(found) == limit {
			more = true
			return true
		}
		found = append(found, rel)
		return false
	})
	if err != nil {
		return nil, err
	}
	shown := make([]string, len(found))
	for i, f := range found {
		shown[i] = shownUnder(t, f)
	}
	text := strings.Join(shown, "\n")
	if len(shown) == 0 {
		text = "no files match " + in.Pattern
	}
	if more {
		text += fmt.Sprintf("\n[… more files match; the first %d shown]", limit)
	}
	text += cutNoteOf(t, cut)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}},
		StructuredContent: map[string]any{"files": shown, "more": more}}, nil
}

type grepMatch struct {
	File string `json:"file"`
	Line int    `json:"line"`
	Text string `json:"text"`
}

func grepSearch(ctx context.Context, s *Server, c Call, in searchIn) (*mcp.CallToolResult, error) {
	re, err := regexp.Compile(in.Pattern)
	if err != nil {
		return nil, fmt.Errorf("pattern: %v", err)
	}
	insts, textAnchors := grepProgram(in.Pattern)
	if insts > maxGrepInsts {
		return nil, fmt.Errorf("pattern is too complex (%d steps, at most %d): simplify it (fewer or smaller counted repeats such as {100})", insts, maxGrepInsts)
	}
	// anyLine finds whether a piece of whole lines has a match at all, lines being what
	// ^ and $ mean. \A, \z, and ^ or $ without (?m) would mean the piece's start and end
	// instead of each line's: such a pattern is matched line by line only. A flag prefix,
	// not a group: \Q with no \E would take a group's closing parenthesis as literal.
	var anyLine *regexp.Regexp
	if !textAnchors {
		anyLine, _ = regexp.Compile("(?m)" + in.Pattern) // nil, should it fail: line by line
	}
	var inc *regexp.Regexp
	incBase := false
	if in.Include != "" {
		if inc, incBase, err = globRegexp(in.Include); err != nil {
			return nil, fmt.Errorf("include: %v", err)
		}
	}
	limit := capOf(in.MaxResults)
	var matches []grepMatch
	more := false
	skipped, longLines := 0, 0
	buf := make([]byte, 0, 64<<10)
	t, cut, err := s.walk(ctx, c, "grep_search", in.Path, func(ar *os.Root, name, rel string) bool {
		if inc != nil {
			m := rel
			if incBase {
				m = path.Base(rel)
			}
			if !inc.MatchString(m) {
				return false
			}
		}
		f, err := openNoWait(ar, name)
		if err != nil {
			return false
		}
		fi, err := f.Stat() // the size too: too large a file is skipped unread
		if err != nil || !fi.Mode().IsRegular() {
			f.Close()
			return false
		}
		if fi.Size() > maxFileBytes {
			f.Close()
			skipped++
			return false
		}
		buf = buf[:0]
		b := bytes.NewBuffer(buf)
		_, err = b.ReadFrom(io.LimitReader(f, maxFileBytes+1))
		f.Close()
		data := b.Bytes()
		buf = data
		if err != nil || isBinary(data[:min(len(data), binarySniff)]) {
			return false
		}
		if len(data) > maxFileBytes { // it grew since it was listed
			skipped++
			return false
		}
		if s.beforeGrepFile != nil {
			s.beforeGrepFile()
		}
		// In pieces of whole lines, checking the call between them; line by line in place
		// within a piece (a slice of all the lines took 24 bytes a line). As with
		// bytes.Split, what follows the last newline is a line too, even when empty.
		for i, rest := 1, data; ; {
			if ctx.Err() != nil {
				return true // walk's caller returns the context's error
			}
			n := len(rest)
			if n > grepChunk {
				if j := bytes.LastIndexByte(rest[:grepChunk], '\n'); j >= 0 {
					n = j + 1
				} else if j := bytes.IndexByte(rest[grepChunk:], '\n'); j >= 0 {
					n = grepChunk + j + 1
				}
			}
			piece, last := rest[:n], n == len(rest)
			if !last {
				piece = piece[:n-1] // its lines, without the newline that ends the last
			}
			rest = rest[n:]
			lines := bytes.Count(piece, []byte{'\n'}) + 1
			switch {
			case len(piece) > grepChunk && len(piece)*max(insts, 1) > maxGrepLineWork:
				longLines++ // one line: a piece longer than grepChunk has no newline in it
			case anyLine != nil && !anyLine.Match(piece):
			default:
				for k, rest := i, piece; ; k++ {
					line, j := rest, bytes.IndexByte(rest, '\n')
					if j >= 0 {
						line = rest[:j]
					}
					if re.Match(line) {
						if len(matches) == limit {
							more = true
							return true
						}
						matches = append(matches, grepMatch{File: rel, Line: k, Text: clip(strings.TrimRight(string(line), "\r"), 200)})
					}
					if j < 0 {
						break
					}
					rest = rest[j+1:]
				}
			}
			if last {
				return false
			}
			i += lines
		}
	})
	if err == nil {
		err = ctx.Err() // cancelled or timed out within a file: what was found is not all
	}
	if err != nil {
		return nil, err
	}
	var out strings.Builder
	for i := range matches {
		matches[i].File = shownUnder(t, matches[i].File)
		fmt.Fprintf(&out, "%s:%d: %s\n", matches[i].File, matches[i].Line, matches[i].Text)
	}
	if len(matches) == 0 {
		out.WriteString("no matches for " + in.Pattern)
	}
	if more {
		fmt.Fprintf(&out, "[… more matches; the first %d shown]", limit)
	}
	note := ""
	if skipped == 1 {
		note += fmt.Sprintf("\n[… 1 file over %d MiB was not searched]", maxFileBytes>>20)
	} else if skipped > 1 {
		note += fmt.Sprintf("\n[… %d files over %d MiB were not searched]", skipped, maxFileBytes>>20)
	}
	if longLines > 0 {
		what := fmt.Sprintf("%d lines longer than %d bytes were", longLines, maxGrepLineWork/max(insts, 1))
		if longLines == 1 {
			what = fmt.Sprintf("1 line longer than %d bytes was", maxGrepLineWork/max(insts, 1))
		}
		note += "\n[… " + what + " not searched: a simpler pattern searches longer lines]"
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.TrimRight(out.String(), "\n") + note + cutNoteOf(t, cut)}},
		StructuredContent: map[string]any{"matches": matches, "more": more, "skippedFiles": skipped, "skippedLines": longLines}}, nil
}

// grepProgram is the number of instructions pattern compiles to (as regexp.Compile
// does), and whether it has \A, \z, or a ^ or $ without (?m), which mean the start or
// end of the whole text matched.
func grepProgram(pattern string) (insts int, textAnchors bool) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return 0, false
	}
	var walk func(*syntax.Regexp)
	walk = func(r *syntax.Regexp) {
		if r.Op == syntax.OpBeginText || r.Op == syntax.OpEndText {
			textAnchors = true
		}
		for _, sub := range r.Sub {
			walk(sub)
		}
	}
	walk(re)
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return 0, textAnchors
	}
	return len(prog.Inst), textAnchors
}

type pathIn struct {
	FilePath string `json:"filePath"`
}

func fileInfo(ctx context.Context, s *Server, c Call, in pathIn) (*mcp.CallToolResult, error) {
	t, ar, err := s.openRead(ctx, c, "get_file_info", "filePath", in.FilePath)
	if err != nil {
		return nil, err
	}
	defer ar.Close()
	fi, err := ar.Lstat(t.rel)
	if err != nil {
		return nil, fsError(t, err)
	}
	kind := "file"
	switch {
	case fi.IsDir():
		kind = "directory"
	case fi.Mode()&fs.ModeSymlink != 0:
		kind = "symlink"
	case !fi.Mode().IsRegular():
		kind = "other"
	}
	sc := map[string]any{"filePath": t.shown, "type": kind, "size": fi.Size(), "mode": fi.Mode().String(),
		"modified": fi.ModTime().UTC().Format("2006-01-02T15:04:05Z")}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%s: %s, %d bytes, %s, modified %s",
		t.shown, kind, fi.Size(), fi.Mode(), sc["modified"])}}, StructuredContent: sc}, nil
}

// --- writing ---

// write is one write operation: it resolves and checks its paths, snapshots what it
// will change, and runs.
type write struct {
	s    *Server
	c    Call
	op   string
	sn   *snapshot
	open []*os.Root
	// anyGrant are the areas outside the workspace where a grant with no target
	// already let this write change a path: it allows the write's other paths there
	// too (a rename asks once, not for each of its two paths). A grant for a path
	// allows that path only.
	anyGrant map[string]bool
	// covered are the second paths of a two-path write that a grant covered before the
	// first path used one (lookAhead): only those may go on the first path's grant.
	covered map[string]bool
	// changed: the write may have changed something before it failed, so its snapshot
	// is kept rather than discarded.
	changed bool
	// read is the fingerprint of what the write read or checked at the path snapFirst
	// keeps ("" for none): the edit lock does not stop a terminal command rewriting the
	// file, so snapFirst refuses the write when what it keeps is no longer that.
	read string
}

func (s *Server) newWrite(c Call, op string) *write { return &write{s: s, c: c, op: op} }

// target resolves p for writing: checked by the guard, its area opened.
func (w *write) target(ctx context.Context, param, p string) (target, *os.Root, error) {
	t, ar, err := w.s.open(w.c, param, p)
	if err != nil {
		return t, nil, err
	}
	w.open = append(w.open, ar)
	if t.rel == "." {
		return t, nil, guardf("%s: %s is a workspace itself, not a file in it", param, p)
	}
	// A name of the writes' own temporary files is hidden from listings and swept once
	// old (sweepTemps): a file made under one would vanish. Reading, editing, renaming
	// away or deleting one (a crash's leftover) is left alone.
	if makes := param == "newPath" || w.op == "create_file" || w.op == "create_directory"; makes && isTempName(path.Base(filepath.ToSlash(t.rel))) {
		return t, ar, guardf("%s: %s has the form of a write's temporary file (.<name>%s<%d hex digits>%s), which listings leave out and a sweep removes: choose another name",
			param, p, tempMark, tempHex, tempExt)
	}
	if w.anyGrant[t.area] && w.covered[t.abs] {
		// The first path used a grant with no target, which covers this one too. That
		// a grant for this path is gone by now does not say so: a call in parallel may
		// have used it, or it was revoked.
		return t, ar, nil
	}
	anyGrant, err := w.s.mayWriteAny(ctx, w.c, w.op, t)
	if err != nil {
		return t, ar, err
	}
	if anyGrant {
		w.allowAny(t.area)
	}
	return t, ar, nil
}

// allowAny notes that a grant with no target let this write change a path of area.
func (w *write) allowAny(area string) {
	if w.anyGrant == nil {
		w.anyGrant = map[string]bool{}
	}
	w.anyGrant[area] = true
}

// lookAhead notes, before the first path of a two-path write uses a grant, whether a
// grant covers its second path p (param) too. A grant for the first path alone does
// not let the write change the second (a grant for README.md is no grant to overwrite
// main.go); and when nothing covers the second, the write is refused now, before the
// first path uses up a grant for a write that cannot happen.
func (w *write) lookAhead(ctx context.Context, firstPath string, firstRead bool, param, p string) error {
	first, ferr := w.s.resolve(w.c, "filePath", firstPath)
	t, err := w.s.resolve(w.c, param, p)
	if ferr != nil || err != nil || first.area == "" || t.own || t.area == "" || t.rel == "." {
		return nil // the write says what is wrong when it comes to it
	}
	need, err := w.s.needsGrant(ctx, w.c, t, false)
	if err != nil {
		return err
	}
	if !need {
		// Another person's workspace, or none at all: the write would be refused at its
		// second path, after the first path used its grant.
		if a, err := w.s.accessOf(ctx, w.c, t); err != nil {
			return err
		} else if a == accessOthers {
			return w.s.errUnreachable(t.area)
		}
		if ok, err := w.s.isArea(t.area); err != nil {
			return err
		} else if !ok {
			return w.s.errUnreachable(t.area)
		}
		return nil
	}
	has, err := w.s.hasGrant(ctx, w.c, w.op, t)
	if err != nil {
		return err
	}
	if has {
		if w.covered == nil {
			w.covered = map[string]bool{}
		}
		w.covered[t.abs] = true
		return nil
	}
	// The first path's own refusal comes first when it has no grant either.
	if needFirst, err := w.s.needsGrant(ctx, w.c, first, firstRead); err != nil {
		return err
	} else if needFirst {
		if ok, err := w.s.hasGrant(ctx, w.c, w.op, first); err != nil || !ok {
			return err
		}
	}
	return &errAuthorization{key: "file_operations." + w.op, path: t.abs, workspace: w.c.Workspace}
}

// expected refuses the write when the call expects t to have content it no longer
// has: a plan's step previewed against a file that changed since (callmeta Expect).
func (w *write) expected(t target, ar *os.Root) error {
	if w.c.Expect == "" {
		return nil
	}
	fp, err := fingerprintAt(t, ar)
	if err != nil {
		return err
	}
	if fp != w.c.Expect {
		return fmt.Errorf("stale: %s changed since the plan's preview; nothing was written", t.shown)
	}
	w.read = fp
	if w.s.afterEditRead != nil { // tests: a writer outside Toolwarden changes the file now
		w.s.afterEditRead()
	}
	return nil
}

// expectedMove is expected for a copy or a rename: its preview showed the source (src:
// the fingerprint of the source as the caller read it) and what newPath held (which an
// overwrite replaces), and both must be as they were. Callers check w.c.Expect is set.
func (w *write) expectedMove(from target, src string, to target, tar *os.Root) error {
	dst, err := fingerprintAt(to, tar)
	if err != nil {
		return err
	}
	if moveFingerprint(src, dst) == w.c.Expect {
		w.read = dst // what an overwrite replaces, checked again as snapFirst keeps it
		return nil
	}
	changed := from.shown
	if strings.HasPrefix(w.c.Expect, src+" ") {
		changed = to.shown
	}
	return fmt.Errorf("stale: %s changed since the plan's preview; nothing was written", changed)
}

// fingerprintAt is the fingerprint of what is at t now (see contentAt).
func fingerprintAt(t target, ar *os.Root) (string, error) {
	b, _, err := contentAt(t, ar)
	if err != nil {
		return "", err
	}
	return fingerprint(b), nil
}

// contentAt is what is at t now, as a preview reads it (nil: nothing), and its
// permissions; what is not a regular file within the size limit is not what a preview
// showed.
func contentAt(t target, ar *os.Root) (*[]byte, fs.FileMode, error) {
	fi, err := ar.Lstat(t.rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, 0, nil
	case err != nil:
		return nil, 0, fsError(t, err)
	case fi.Mode().IsRegular() && fi.Size() <= maxFileBytes:
		b, err := readRegular(ar, t.rel)
		if err != nil {
			return nil, 0, fsError(t, err)
		}
		return &b, fi.Mode().Perm(), nil
	}
	return nil, 0, fmt.Errorf("stale: %s is no longer the file that was previewed", t.shown)
}

// keep snapshots t as it is now (on disk at the next flush: snapFirst's, before the
// change).
func (w *write) keep(t target, ar *os.Root) error {
	if w.sn == nil {
		sn, err := w.s.newSnapshot(w.c, w.op)
		if err != nil {
			return err
		}
		w.sn = sn
	}
	return w.sn.keep(ar, t.area, t.rel)
}

// done finishes the write: on success the snapshot is saved and the result names it;
// on failure it is saved (errKept) with only the paths the write changed, or discarded
// when it changed none. A change whose snapshot could not be saved is errChanged.
func (w *write) done(text string, sc map[string]any, err error) (*mcp.CallToolResult, error) {
	for _, r := range w.open {
		r.Close()
	}
	if err != nil {
		if w.sn != nil && w.changed {
			w.s.dropUnchanged(w.sn) // what it recorded but did not change is not put back
		}
		switch {
		case w.sn == nil:
		case !w.changed || len(w.sn.m.Entries) == 0:
			w.sn.discard()
		default:
			after := w.afterStates()
			if serr := w.sn.save(); serr != nil {
				w.sn.discard()
				err = &errChanged{fmt.Errorf("%w (part of the write happened, but its snapshot could not be saved: %v)", err, serr)}
			} else {
				w.sn.saveAfter(after)
				err = &errKept{err: err, id: w.sn.m.ID}
				w.sn.close()
			}
		}
		return nil, err
	}
	if sc == nil {
		sc = map[string]any{}
	}
	if w.sn != nil {
		defer w.sn.close()
		after := w.afterStates()
		if err := w.sn.save(); err != nil {
			return nil, &errChanged{fmt.Errorf("the write happened, but its snapshot could not be saved: %w", err)}
		}
		w.sn.saveAfter(after)
		sc["snapshotId"] = w.sn.m.ID
		text += " (snapshot " + w.sn.m.ID + ")"
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: sc}, nil
}

// snapFirst snapshots t, puts every path kept so far on disk, and then does f; a
// snapshot error stops the write, and so does a t whose kept content is not what the
// write read or checked (w.read): it changed since, and writing would lose that change.
func (w *write) snapFirst(t target, ar *os.Root, f func() error) error {
	if err := w.keep(t, ar); err != nil {
		return fmt.Errorf("snapshot of %s: %w", t.shown, err)
	}
	if w.read != "" && w.sn.m.Entries[len(w.sn.m.Entries)-1].fingerprint() != w.read {
		stale := ""
		if w.c.Expect != "" {
			stale = "stale: "
		}
		return fmt.Errorf("%s%s changed while being edited; nothing was written", stale, t.shown)
	}
	if err := w.sn.flush(); err != nil {
		return fmt.Errorf("snapshot of %s: %w", t.shown, err)
	}
	if w.s.afterChange != nil {
		defer w.s.afterChange()
	}
	return f()
}

// mkParents makes t's missing parents (kept by keepParents first): from then on a
// failure keeps the snapshot, whose restore removes them again.
func (w *write) mkParents(t target, ar *os.Root) error {
	d := filepath.Dir(t.rel)
	if d == "." {
		return nil
	}
	if _, err := ar.Lstat(d); err != nil {
		w.changed = true
	}
	return fsError(t, ar.MkdirAll(d, 0o755))
}

// keepParents snapshots the missing parents of rel (outermost first), so a restore
// removes the directories a write created.
func (w *write) keepParents(t target, ar *os.Root) error {
	var missing []string
	for d := filepath.Dir(t.rel); d != "."; d = filepath.Dir(d) {
		if _, err := ar.Lstat(d); errors.Is(err, fs.ErrNotExist) {
			missing = append(missing, d)
		}
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := w.keep(target{area: t.area, rel: missing[i]}, ar); err != nil {
			return err
		}
	}
	return nil
}

type createIn struct {
	FilePath  string  `json:"filePath"`
	Content   *string `json:"content"`
	Overwrite bool    `json:"overwrite"`
}

func createFile(ctx context.Context, s *Server, c Call, in createIn) (*mcp.CallToolResult, error) {
	w := s.newWrite(c, "create_file")
	if in.Content == nil {
		return w.done("", nil, errors.New("content: missing"))
	}
	if len(*in.Content) > maxFileBytes {
		return w.done("", nil, fmt.Errorf("content: %d bytes, more than the limit of %d", len(*in.Content), maxFileBytes))
	}
	t, ar, err := w.target(ctx, "filePath", in.FilePath)
	if err != nil {
		return w.done("", nil, err)
	}
	// Held from the checks to the write, as an edit holds it (edit).
	unlock, err := s.lockEdits(t)
	if err != nil {
		return w.done("", nil, err)
	}
	defer unlock()
	mode := fs.FileMode(0o644)
	excl := !in.Overwrite // nothing there: made only if still nothing is (another call may be making it)
	if fi, err := ar.Lstat(t.rel); err == nil {
		excl = false
		switch {
		case fi.IsDir():
			return w.done("", nil, fmt.Errorf("%s is a directory", t.shown))
		case !in.Overwrite:
			return w.done("", nil, &errFile{ErrorAlreadyExists, t.shown,
				fmt.Errorf("%s already exists; to replace it set overwrite to true, or edit it with replace_string", t.shown)})
		case !fi.Mode().IsRegular():
			return w.done("", nil, fmt.Errorf("%s is not a regular file", t.shown))
		}
		mode = fi.Mode().Perm()
	} else if !errors.Is(err, fs.ErrNotExist) {
		return w.done("", nil, fsError(t, err))
	}
	if err := w.expected(t, ar); err != nil {
		return w.done("", nil, err)
	}
	if err := w.keepParents(t, ar); err != nil {
		return w.done("", nil, err)
	}
	err = w.snapFirst(t, ar, func() error {
		if err := w.mkParents(t, ar); err != nil {
			return err
		}
		if excl {
			if err := createNew(ar, t.rel, []byte(*in.Content), mode); errors.Is(err, fs.ErrExist) {
				return &errFile{ErrorAlreadyExists, t.shown, fmt.Errorf("%s was created meanwhile (by another call?); to replace it set overwrite to true", t.shown)}
			} else {
				return fsError(t, err)
			}
		}
		return fsError(t, writeFile(ar, t.rel, []byte(*in.Content), mode))
	})
	return w.done(fmt.Sprintf("created %s (%d bytes)", t.shown, len(*in.Content)), map[string]any{"filePath": t.shown, "bytes": len(*in.Content)}, err)
}

// createNew makes rel with content b, whole or not at all, failing with fs.ErrExist
// if it exists: the content is written beside it first and then linked in place, which
// fails when something is there (another call may be making it).
func createNew(ar *os.Root, rel string, b []byte, mode fs.FileMode) error {
	tmp, err := tempFile(ar, rel, b, mode, false)
	if err != nil {
		return err
	}
	defer func() { _ = ar.Remove(tmp) }()
	if err := ar.Link(tmp, rel); err != nil {
		return asPathError("create", rel, err)
	}
	return nil
}

// writeFile replaces rel's content with b, whole or not at all: b is written to a new
// file beside rel, synced, and renamed over it, so a write that fails (a full disk)
// leaves rel as it was. The file keeps its mode, or gets mode when it is new. What is
// at rel must be a regular file or nothing: a FIFO is neither opened nor waited for.
func writeFile(ar *os.Root, rel string, b []byte, mode fs.FileMode) error {
	exact := false
	if fi, err := ar.Lstat(rel); err == nil {
		if !fi.Mode().IsRegular() {
			return &fs.PathError{Op: "write", Path: rel, Err: errors.New("not a regular file")}
		}
		mode, exact = fi.Mode().Perm(), true
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return replaceFile(ar, rel, b, mode, exact)
}

// replaceFile puts a new file with content b and mode (exactly, or as the umask leaves
// it) at rel, in place of whatever is there, by a rename: rel is never half written.
func replaceFile(ar *os.Root, rel string, b []byte, mode fs.FileMode, exact bool) error {
	tmp, err := tempFile(ar, rel, b, mode, exact)
	if err != nil {
		return err
	}
	if err := ar.Rename(tmp, rel); err != nil {
		_ = ar.Remove(tmp)
		return asPathError("write", rel, err)
	}
	return nil
}

// tempFile writes b, synced, to a new file with a hidden unique name in rel's
// directory (the same file system, so a rename or link to rel is atomic); nothing is
// left when it fails, and what a crash leaves is swept (sweepTemps).
func tempFile(ar *os.Root, rel string, b []byte, mode fs.FileMode, exact bool) (string, error) {
	tmp := filepath.Join(filepath.Dir(rel), tempName(filepath.Base(rel)))
	f, err := ar.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode.Perm()) // os.Root takes no setuid: Chmod sets it
	if err != nil {
		return "", asPathError("write", rel, err)
	}
	_, err = f.Write(b)
	if err == nil && exact {
		if err = f.Chmod(mode); err != nil && mode != mode.Perm() {
			err = f.Chmod(mode.Perm()) // a setuid, setgid or sticky bit refused: a restore notes it
		}
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = ar.Remove(tmp)
		return "", asPathError("write", rel, err)
	}
	return tmp, nil
}

// asPathError is err of an operation on a temporary file, as one on rel: the agent is
// told of the file it named.
func asPathError(op, rel string, err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		err = pe.Err
	case errors.As(err, &le):
		err = le.Err
	}
	return &fs.PathError{Op: op, Path: rel, Err: err}
}

// readText is rel's content for an edit: a regular text file within the size limit.
func readText(t target, ar *os.Root) ([]byte, fs.FileMode, error) {
	fi, err := ar.Lstat(t.rel)
	if err != nil {
		return nil, 0, fsError(t, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("%s is not a regular file", t.shown)
	}
	if fi.Size() > maxFileBytes {
		return nil, 0, fmt.Errorf("%s is %d bytes, more than the edit limit of %d", t.shown, fi.Size(), maxFileBytes)
	}
	b, err := readRegular(ar, t.rel)
	if err != nil {
		return nil, 0, fsError(t, err)
	}
	if isBinary(b[:min(len(b), binarySniff)]) {
		return nil, 0, fmt.Errorf("%s is a binary file (%d bytes); only text files can be edited", t.shown, len(b))
	}
	return b, fi.Mode().Perm(), nil
}

// replaceOnce replaces old, which must occur exactly once in b.
func replaceOnce(shown string, b []byte, old, new string) ([]byte, error) {
	if old == "" {
		return nil, errors.New("oldString: empty")
	}
	o := []byte(old)
	i := bytes.Index(b, o)
	if i < 0 {
		return nil, fmt.Errorf("oldString was not found in %s; read the file and copy the exact text, whitespace included", shown)
	}
	// A second match may overlap the first ("aa" in "aaa"), which bytes.Count, counting
	// matches that do not overlap, misses: the edit would then pick one of two places.
	if bytes.Index(b[i+1:], o) >= 0 {
		if n := bytes.Count(b, o); n > 1 {
			return nil, fmt.Errorf("oldString occurs %d times in %s; it must occur exactly once: include more of the surrounding lines", n, shown)
		}
		return nil, fmt.Errorf("oldString occurs more than once in %s, at overlapping positions; it must occur exactly once: include more of the surrounding lines", shown)
	}
	return bytes.Replace(b, o, []byte(new), 1), nil
}

// edit is a write that changes a text file's content with f.
func edit(ctx context.Context, s *Server, c Call, op, p string, f func(shown string, b []byte) ([]byte, string, error)) (*mcp.CallToolResult, error) {
	w := s.newWrite(c, op)
	t, ar, err := w.target(ctx, "filePath", p)
	if err != nil {
		return w.done("", nil, err)
	}
	unlock, err := s.lockEdit(t.area, t.rel) // taken once the call may write: a grant's wait is not under it
	if err != nil {
		return w.done("", nil, err)
	}
	defer unlock()
	b, mode, err := readText(t, ar)
	if err != nil {
		return w.done("", nil, err)
	}
	if s.afterEditRead != nil {
		s.afterEditRead()
	}
	// The bytes edited are the ones previewed, or nothing is written; and they are still
	// the file's when snapFirst keeps it, or the edit would overwrite a change made since.
	w.read = fingerprint(&b)
	if w.c.Expect != "" && w.read != w.c.Expect {
		return w.done("", nil, fmt.Errorf("stale: %s changed since the plan's preview; nothing was written", t.shown))
	}
	nb, what, err := f(t.shown, b)
	if err != nil {
		return w.done("", nil, err)
	}
	if len(nb) > maxFileBytes {
		return w.done("", nil, fmt.Errorf("%s would be %d bytes, more than the limit of %d", t.shown, len(nb), maxFileBytes))
	}
	err = w.snapFirst(t, ar, func() error { return fsError(t, writeFile(ar, t.rel, nb, mode)) })
	return w.done(what, map[string]any{"filePath": t.shown, "bytes": len(nb)}, err)
}

type replaceIn struct {
	FilePath  string  `json:"filePath"`
	OldString string  `json:"oldString"`
	NewString *string `json:"newString"`
}

func replaceString(ctx context.Context, s *Server, c Call, in replaceIn) (*mcp.CallToolResult, error) {
	return edit(ctx, s, c, "replace_string", in.FilePath, in.change)
}

func (in replaceIn) change(shown string, b []byte) ([]byte, string, error) {
	if in.NewString == nil {
		return nil, "", errors.New("newString: missing")
	}
	nb, err := replaceOnce(shown, b, in.OldString, *in.NewString)
	return nb, "replaced one occurrence in " + shown, err
}

type multiIn struct {
	FilePath     string `json:"filePath"`
	Replacements []struct {
		OldString string `json:"oldString"`
		NewString string `json:"newString"`
	} `json:"replacements"`
}

func multiReplace(ctx context.Context, s *Server, c Call, in multiIn) (*mcp.CallToolResult, error) {
	return edit(ctx, s, c, "multi_replace", in.FilePath, in.change)
}

func (in multiIn) change(shown string, b []byte) ([]byte, string, error) {
	if len(in.Replacements) == 0 {
		return nil, "", errors.New("replacements: none")
	}
	for i, r := range in.Replacements {
		nb, err := replaceOnce(shown, b, r.OldString, r.NewString)
		if err != nil {
			return nil, "", fmt.Errorf("replacement %d (nothing was changed): %w", i+1, err)
		}
		b = nb
	}
	return b, fmt.Sprintf("made %d replacements in %s", len(in.Replacements), shown), nil
}

type insertIn struct {
	FilePath string  `json:"filePath"`
	Content  *string `json:"content"`
	Line     int     `json:"line"`
}

func insertEdit(ctx context.Context, s *Server, c Call, in insertIn) (*mcp.CallToolResult, error) {
	return edit(ctx, s, c, "insert_edit", in.FilePath, in.change)
}

func (in insertIn) change(shown string, b []byte) ([]byte, string, error) {
	if in.Content == nil {
		return nil, "", errors.New("content: missing")
	}
	ins := *in.Content
	if !strings.HasSuffix(ins, "\n") {
		ins += "\n"
	}
	// The lines are counted and the place found in place: a slice of all the lines took
	// 24 bytes a line. A last line without a newline gets one when lines go after it.
	n := bytes.Count(b, []byte("\n"))
	unended := len(b) > 0 && b[len(b)-1] != '\n'
	if unended {
		n++
	}
	if in.Line < 0 || in.Line > n {
		return nil, "", fmt.Errorf("line: %s has %d lines; line must be from 0 to %d", shown, n, n)
	}
	out := make([]byte, 0, len(b)+len(ins)+1)
	if in.Line == n {
		out = append(out, b...)
		if unended {
			out = append(out, '\n')
		}
		out = append(out, ins...)
	} else {
		at := 0
		for range in.Line {
			at += bytes.IndexByte(b[at:], '\n') + 1
		}
		out = append(append(append(out, b[:at]...), ins...), b[at:]...)
	}
	return out, fmt.Sprintf("inserted %d lines after line %d of %s", strings.Count(ins, "\n"), in.Line, shown), nil
}

func deleteFile(ctx context.Context, s *Server, c Call, in pathIn) (*mcp.CallToolResult, error) {
	w := s.newWrite(c, "delete_file")
	t, ar, err := w.target(ctx, "filePath", in.FilePath)
	if err != nil {
		return w.done("", nil, err)
	}
	unlock, err := s.lockEdits(t)
	if err != nil {
		return w.done("", nil, err)
	}
	defer unlock()
	fi, err := ar.Lstat(t.rel)
	if err != nil {
		return w.done("", nil, fsError(t, err))
	}
	if fi.Mode().IsRegular() && fi.Size() > maxFileBytes {
		return w.done("", nil, fmt.Errorf("%s is %d bytes, more than the limit of %d that can be kept for undoing", t.shown, fi.Size(), maxFileBytes))
	}
	if fi.IsDir() {
		f, err := openNoWait(ar, t.rel)
		if err != nil {
			return w.done("", nil, fsError(t, err))
		}
		names, _ := f.Readdirnames(1)
		f.Close()
		if len(names) > 0 {
			return w.done("", nil, fmt.Errorf("%s is a directory that is not empty; delete its files first", t.shown))
		}
	}
	if err := w.expected(t, ar); err != nil {
		return w.done("", nil, err)
	}
	err = w.snapFirst(t, ar, func() error { return fsError(t, ar.Remove(t.rel)) })
	return w.done("deleted "+t.shown, map[string]any{"filePath": t.shown}, err)
}

type twoPathIn struct {
	FilePath  string `json:"filePath"`
	NewPath   string `json:"newPath"`
	Overwrite bool   `json:"overwrite"`
}

// destination checks that the destination of a rename or copy may be written.
func destination(t target, ar *os.Root, overwrite bool) error {
	fi, err := ar.Lstat(t.rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fsError(t, err)
	case fi.IsDir():
		return fmt.Errorf("newPath: %s is a directory; name the file to create", t.shown)
	case !overwrite:
		return &errFile{ErrorAlreadyExists, t.shown, fmt.Errorf("newPath: %s already exists; set overwrite to true to replace it", t.shown)}
	case !fi.Mode().IsRegular():
		return fmt.Errorf("newPath: %s is not a regular file", t.shown)
	}
	return nil
}

// errRenameAcross is why a rename cannot cross workspaces, whatever grants there are:
// said before any grant is asked for (and by the check before approval alike).
var errRenameAcross = errors.New("rename_file moves files within one workspace; to another, use copy_file and then delete_file")

// renameAcross reports whether a rename from from to to names two different workspaces.
func (s *Server) renameAcross(c Call, from, to string) bool {
	f, ferr := s.resolve(c, "filePath", from)
	t, terr := s.resolve(c, "newPath", to)
	return ferr == nil && terr == nil && f.area != "" && t.area != "" && f.area != t.area
}

func renameFile(ctx context.Context, s *Server, c Call, in twoPathIn) (*mcp.CallToolResult, error) {
	w := s.newWrite(c, "rename_file")
	if s.renameAcross(c, in.FilePath, in.NewPath) {
		return w.done("", nil, errRenameAcross)
	}
	if err := w.lookAhead(ctx, in.FilePath, false, "newPath", in.NewPath); err != nil {
		return w.done("", nil, err)
	}
	from, far, err := w.target(ctx, "filePath", in.FilePath)
	if err != nil {
		return w.done("", nil, err)
	}
	to, tar, err := w.target(ctx, "newPath", in.NewPath)
	if err != nil {
		return w.done("", nil, err)
	}
	unlock, err := s.lockEdits(from, to)
	if err != nil {
		return w.done("", nil, err)
	}
	defer unlock()
	// rename(2) moves the file itself, not bytes this call read and then writes, so
	// unlike copy_file there is no second read whose content could differ from this one.
	if w.c.Expect != "" {
		src, err := fingerprintAt(from, far)
		if err == nil {
			err = w.expectedMove(from, src, to, tar)
		}
		if err != nil {
			return w.done("", nil, err)
		}
	}
	fi, err := far.Lstat(from.rel)
	if err != nil {
		return w.done("", nil, fsError(from, err))
	}
	if !fi.Mode().IsRegular() {
		return w.done("", nil, fmt.Errorf("%s is not a regular file (rename_file moves files)", from.shown))
	}
	if fi.Size() > maxFileBytes {
		return w.done("", nil, fmt.Errorf("%s is %d bytes, more than the limit of %d", from.shown, fi.Size(), maxFileBytes))
	}
	if sameEntry(far, from.rel, to.rel) {
		return w.done("", nil, fmt.Errorf("filePath %s and newPath %s name the same file; there is nothing to rename", from.shown, to.shown))
	}
	if err := destination(to, tar, in.Overwrite); err != nil {
		return w.done("", nil, err)
	}
	if err := w.keep(from, far); err != nil {
		return w.done("", nil, err)
	}
	if err := w.keepParents(to, tar); err != nil {
		return w.done("", nil, err)
	}
	err = w.snapFirst(to, tar, func() error {
		if err := w.mkParents(to, tar); err != nil {
			return err
		}
		return fsError(from, moveEntry(far, from.rel, to.rel))
	})
	return w.done(fmt.Sprintf("renamed %s to %s", from.shown, to.shown), map[string]any{"filePath": from.shown, "newPath": to.shown}, err)
}

// sameEntry reports whether from and to name one directory entry of ar: one name in
// one directory, the directory reached the same way or through a symlinked alias of it
// (alias/a.go and src/a.go). Renaming it onto itself changes nothing; moveEntry, which
// removes from when the two are hard links, would delete the file.
func sameEntry(ar *os.Root, from, to string) bool {
	return filepath.Base(from) == filepath.Base(to) && sameDir(ar, from, to)
}

// sameDir reports whether the directories of from and to are one (false when either
// cannot be looked at: the rename then says what is wrong).
func sameDir(ar *os.Root, from, to string) bool {
	fd, ferr := ar.Stat(filepath.Dir(from))
	td, terr := ar.Stat(filepath.Dir(to))
	return ferr == nil && terr == nil && os.SameFile(fd, td)
}

// moveEntry renames from to to in ar. When the two are hard links to one file (a
// terminal's ln), rename(2) does nothing and succeeds, which would leave from in place
// after "renamed": the link at from is removed instead, leaving to as the file. Only
// for two entries, though: one entry named twice (a case-only rename on a
// case-insensitive file system) must still be renamed, and removing it would lose the
// file, whatever other links it has.
func moveEntry(ar *os.Root, from, to string) error {
	if from != to {
		ff, ferr := ar.Lstat(from)
		tf, terr := ar.Lstat(to)
		if ferr == nil && terr == nil && ff.Mode().IsRegular() && os.SameFile(ff, tf) {
			if st, ok := ff.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 && twoEntries(ar, from, to) {
				return ar.Remove(from)
			}
		}
	}
	return ar.Rename(from, to)
}

// twoEntries reports whether from and to, names of one file, are two directory entries:
// in different directories, or both listed, each spelt as given, in their directory.
// When that listing cannot tell (it reads at most maxDirScan entries), they are taken
// for one: a rename then at worst leaves from in place, where a removal would lose it.
func twoEntries(ar *os.Root, from, to string) bool {
	if !sameDir(ar, from, to) {
		return true
	}
	a, b := filepath.Base(from), filepath.Base(to)
	if a == b {
		return false
	}
	d, err := openNoWait(ar, filepath.Dir(from))
	if err != nil {
		return false
	}
	defer d.Close()
	seenA, seenB := false, false
	for read := 0; read < maxDirScan; {
		names, err := d.Readdirnames(dirBatch)
		for _, n := range names {
			seenA, seenB = seenA || n == a, seenB || n == b
		}
		if seenA && seenB {
			return true
		}
		if err != nil || len(names) == 0 {
			return false
		}
		read += len(names)
	}
	return false
}

func copyFile(ctx context.Context, s *Server, c Call, in twoPathIn) (*mcp.CallToolResult, error) {
	w := s.newWrite(c, "copy_file")
	if err := w.lookAhead(ctx, in.FilePath, true, "newPath", in.NewPath); err != nil {
		return w.done("", nil, err)
	}
	from, far, err := s.openRead(ctx, c, "copy_file", "filePath", in.FilePath)
	if err != nil {
		return w.done("", nil, err)
	}
	w.open = append(w.open, far)
	if from.anyGrant {
		w.allowAny(from.area)
	}
	to, tar, err := w.target(ctx, "newPath", in.NewPath)
	if err != nil {
		return w.done("", nil, err)
	}
	unlock, err := s.lockEdits(from, to)
	if err != nil {
		return w.done("", nil, err)
	}
	defer unlock()
	b, perm, err := w.copySource(from, far, to, tar)
	if err != nil {
		return w.done("", nil, err)
	}
	if s.afterEditRead != nil { // tests: a writer outside Toolwarden changes the source now
		s.afterEditRead()
	}
	if err := destination(to, tar, in.Overwrite); err != nil {
		return w.done("", nil, err)
	}
	if err := w.keepParents(to, tar); err != nil {
		return w.done("", nil, err)
	}
	err = w.snapFirst(to, tar, func() error {
		if err := w.mkParents(to, tar); err != nil {
			return err
		}
		return fsError(to, writeFile(tar, to.rel, b, perm))
	})
	return w.done(fmt.Sprintf("copied %s to %s (%d bytes)", from.shown, to.shown, len(b)), map[string]any{"filePath": from.shown, "newPath": to.shown}, err)
}

// copySource reads the source of a copy once: its bytes and permissions. A plan's step
// checks those very bytes against its preview, as edit does: the edit lock does not stop
// a terminal command rewriting the source, so a second read could copy content nobody
// approved.
func (w *write) copySource(from target, far *os.Root, to target, tar *os.Root) ([]byte, fs.FileMode, error) {
	if w.c.Expect != "" {
		b, perm, err := contentAt(from, far)
		if err == nil {
			err = w.expectedMove(from, fingerprint(b), to, tar)
		}
		if err != nil {
			return nil, 0, err
		}
		if b == nil { // previewed as absent, and still absent: nothing to copy
			return nil, 0, fsError(from, fs.ErrNotExist)
		}
		return *b, perm, nil
	}
	fi, err := far.Stat(from.rel)
	if err != nil {
		return nil, 0, fsError(from, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("%s is not a regular file", from.shown)
	}
	if fi.Size() > maxFileBytes {
		return nil, 0, fmt.Errorf("%s is %d bytes, more than the limit of %d", from.shown, fi.Size(), maxFileBytes)
	}
	b, err := readRegular(far, from.rel)
	if err != nil {
		return nil, 0, fsError(from, err)
	}
	return b, fi.Mode().Perm(), nil
}

func createDirectory(ctx context.Context, s *Server, c Call, in pathIn) (*mcp.CallToolResult, error) {
	w := s.newWrite(c, "create_directory")
	t, ar, err := w.target(ctx, "filePath", in.FilePath)
	if err != nil {
		return w.done("", nil, err)
	}
	unlock, err := s.lockEdits(t)
	if err != nil {
		return w.done("", nil, err)
	}
	defer unlock()
	if fi, err := ar.Lstat(t.rel); err == nil {
		if fi.IsDir() {
			return w.done(t.shown+" exists already", map[string]any{"filePath": t.shown}, nil)
		}
		return w.done("", nil, fmt.Errorf("%s exists and is not a directory", t.shown))
	}
	if err := w.keepParents(t, ar); err != nil {
		return w.done("", nil, err)
	}
	err = w.snapFirst(t, ar, func() error {
		w.changed = true // MkdirAll may make some of the directories and then fail
		return fsError(t, ar.MkdirAll(t.rel, 0o755))
	})
	return w.done("created directory "+t.shown, map[string]any{"filePath": t.shown}, err)
}

type restoreIn struct {
	SnapshotID string `json:"snapshotId"`
}

// restoreSnapshot is a write like any other: what it replaces is kept first, and its
// result's snapshotId (the rollback of a step that restored) undoes the restore.
func restoreSnapshot(ctx context.Context, s *Server, c Call, in restoreIn) (*mcp.CallToolResult, error) {
	w := s.newWrite(c, "restore_snapshot")
	restored, notes, err := s.restore(ctx, w, in.SnapshotID)
	if err != nil && len(restored) == 0 {
		if len(notes) > 0 {
			err = fmt.Errorf("%w; %s", err, strings.Join(notes, "; "))
		}
		return w.done("", nil, err)
	}
	text := fmt.Sprintf("restored %d paths from snapshot %s", len(restored), in.SnapshotID)
	for _, n := range notes {
		text += "; " + n
	}
	sc := map[string]any{"restoredFrom": in.SnapshotID, "restored": restored, "notes": notes}
	if err != nil {
		// Some paths were restored and are kept for undoing (only those: a path it could
		// not put back is not undone later); the error says which were not.
		text += "; NOT restored: " + err.Error()
		if w.sn != nil { // (restore left in it only what it changed)
			if len(w.sn.m.Entries) == 0 {
				w.sn.discard()
				w.sn = nil
			} else {
				sc["changed"] = true
			}
		}
	}
	res, derr := w.done(text, sc, nil)
	if derr == nil && err != nil {
		res.IsError = true
	}
	return res, derr
}
