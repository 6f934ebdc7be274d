// Package builtin is Toolwarden's own tools (seeds 000 and 001): file_operations,
// terminal_operations, memory_operations, think and user_collaboration, served by an
// in-process MCP server that the registry knows as the server builtin. They are
// discovered, vetted, configured, tested, risk-rated, approved and audited like any
// upstream's tools; only the transport is a pipe inside the process.
//
// A consolidated tool takes an operation ("read_file"); the router also accepts the
// dotted name builtin__file_operations.read_file. Each call carries who makes it and
// in which conversation (internal/callmeta), and a conversation has a workspace under
// the root (Workspace).
package builtin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"

	"github.com/toolwarden/toolwarden/internal/callmeta"
)

// Options configure the built-in server.
type Options struct {
	// Root holds the conversations' workspaces (--builtin-root). Required.
	Root    string
	Logger  *slog.Logger
	Version string
	// Grants are what people allowed through user_collaboration; nil: none.
	Grants Grants
	// Conversations says who owns a conversation; nil: conversations are not owned
	// (reads reach every workspace under the root).
	Conversations Conversations
	// SnapshotBudget is the most the snapshot store may hold (--snapshot-budget); past
	// it the oldest snapshots go, whatever their age. 0: DefaultSnapshotBudget.
	SnapshotBudget int64
}

// Conversations are the owners of conversations (services/grants): the first person
// to call in a conversation owns it, and nobody else may use it.
type Conversations interface {
	// Claim makes userID the owner of conversation (workspace directory dir) unless
	// someone owns it already, and returns the owner ("" when the owner was removed).
	Claim(ctx context.Context, conversation, dir, userID, userName string) (string, error)
	// OwnerOfDir is the owner of the workspace directory dir; known is false for one no
	// conversation claimed, and owner "" for one whose owner was removed.
	OwnerOfDir(ctx context.Context, dir string) (owner string, known bool, err error)
	// DirsOf is the workspace directories of userID's conversations.
	DirsOf(ctx context.Context, userID string) (map[string]bool, error)
	// OwnerOf is conversation's owner without claiming it: claimed is false when
	// nobody has called in it yet, and owner "" when the owner was removed.
	OwnerOf(ctx context.Context, conversation string) (owner string, claimed bool, err error)
}

// Grants are the permissions a person gave through user_collaboration with
// authorize_operation (services/grants), scoped to a conversation and an operation.
type Grants interface {
	// Use reports whether a grant lets conversation do operation (a built-in
	// operation's name, "write_file"...) on target (a path, a command), consuming it
	// when it is for one use only, and whether the grant it used has no target (so
	// allows the operation on any).
	Use(ctx context.Context, conversation, operation, target string) (allowed, anyTarget bool, err error)
	// Has reports whether a grant would allow it now, without using it.
	Has(ctx context.Context, conversation, operation, target string) (bool, error)
}

// Server is the built-in tools and the MCP server that serves them.
type Server struct {
	opts    Options
	srv     *mcp.Server
	mu      sync.Mutex
	tools   map[string]*Tool
	closers []func()
	// editing serializes the edits of one file (read, change, write): two at once
	// would each write their change over the same original, and one would be lost.
	// Striped by path and by file (stripes), so memory stays bounded. Each stripe is
	// also flocked (lockDir), since replicas share the root and a mutex holds only in
	// this process.
	editing [64]sync.Mutex
	// beforeEditLock, set by tests only, is called as a write is about to take its
	// paths' edit locks, so a test holding one knows the write waits on it.
	beforeEditLock func()
	// flock, set by tests only, stands for unix.Flock (a file system without it).
	flock func(fd, how int) error
	// noFlockWarned warns, once, that the root's file system has no flock.
	noFlockWarned sync.Once
	// afterEditRead, set by tests only, is called as an edit has read its file (or a
	// copy its source, or a plan step checked what it expects) and is about to write,
	// under the file's edit lock.
	afterEditRead func()
	// beforeGrepFile, set by tests only, is called as grep_search is about to match a
	// file it has read, so a test can cancel the search while it is in a file.
	beforeGrepFile func()
	// searches holds a place for each search walking now (maxSearches).
	searches chan struct{}
	// previews are the plans' previews computed a moment ago, and the places for those
	// computed now (preview_cache.go).
	previews previewCache
	// afterChange, set by tests only, is called as a write has made the change a
	// snapshot guards (snapFirst), before the write finishes.
	afterChange func()
	// snapBytes is what the snapshot store holds, as last counted (trimSnapshots) plus
	// the blobs kept since (snapshots dropped since are not taken off: that only brings
	// the next count forward); snapCounted: it was counted once. trimming: one count at
	// a time.
	snapBytes   atomic.Int64
	snapCounted atomic.Bool
	trimming    sync.Mutex
	// pinned are the snapshots restores read now (pinSnapshot), by id: not trimmed.
	// Under trimming.
	pinned map[string]int
	// trimAfter (Unix ns): a count that could not bring the store under its budget
	// makes writes wait until then to count again (trimDue).
	trimAfter atomic.Int64
}

// lockDir holds the edit locks' files, one a stripe, in the snapshot store: no tool
// reaches it, and pruning skips it. They are made once and never removed, as a lock
// on a file removed while held would not exclude one on the file made in its place.
const lockDir = ".locks"

// lockEdit locks the edits of file rel of area (and of the few paths that share its
// stripe) until the returned function is called.
func (s *Server) lockEdit(area, rel string) (func(), error) {
	return s.lockEdits(target{area: area, rel: rel})
}

// lockEdits locks the edits of the files ts (a write's paths) until the returned
// function is called: their stripes once each, in ascending order, so two writes
// locking the same two paths named the other way round do not wait on each other.
// A stripe is locked in this process (editing), then across the processes sharing
// the root (flock on its file in lockDir; in this process alone on a file system
// without flock); an error is returned with nothing held.
func (s *Server) lockEdits(ts ...target) (func(), error) {
	var idx []int
	for _, t := range ts {
		idx = append(idx, s.stripes(t)...)
	}
	slices.Sort(idx)
	idx = slices.Compact(idx)
	if s.beforeEditLock != nil {
		s.beforeEditLock()
	}
	var held []int
	var files []*os.File
	unlock := func() {
		for _, f := range slices.Backward(files) {
			f.Close() // releases its flock
		}
		for _, i := range slices.Backward(held) {
			s.editing[i].Unlock()
		}
	}
	dir, err := s.openLockDir()
	if err != nil {
		return nil, fmt.Errorf("builtin: lock the files to edit: %w (the built-in root must be writable)", err)
	}
	defer dir.Close()
	for _, i := range idx {
		s.editing[i].Lock()
		held = append(held, i)
		f, err := flockFile(dir, fmt.Sprintf("%02d", i), s.flock)
		if noFlock(err) {
			// A file system without flock (NFSv3 without lockd): one replica's writes
			// still work as they did before the lock files, under the in-process lock.
			s.noFlockWarned.Do(func() {
				s.opts.Logger.Warn("builtin: the built-in root's file system has no flock; file edits take the in-process lock alone, and replicas sharing this root may lose concurrent edits (docs/deploy.md)",
					"root", s.opts.Root, "err", err)
			})
			continue
		}
		if err != nil {
			unlock()
			return nil, fmt.Errorf("builtin: lock the files to edit: %s: %w (the built-in root must be writable, on a file system with flock)",
				filepath.Join(s.opts.Root, snapshotDir, lockDir, fmt.Sprintf("%02d", i)), err)
		}
		files = append(files, f)
	}
	return unlock, nil
}

// stripes are the edit lock stripes of t: its path's, and its file's, so that paths
// naming one file through a symlinked directory (alias/a.go, src/a.go) share one. The
// file is its directory's inode and its name, the directory resolved through os.Root
// (the nearest one that exists, with the rest of the path, for a file not made yet).
// The path's stripe stays, so two calls naming one path share one even when its
// directory is made between them. The device is left out: replicas mounting the root
// see its files' inodes alike but may number the device differently.
func (s *Server) stripes(t target) []int {
	stripe := func(key string) int {
		h := fnv.New32a()
		_, _ = h.Write([]byte(key))
		return int(h.Sum32() % uint32(len(s.editing)))
	}
	idx := []int{stripe(t.area + "\x00" + t.rel)}
	ar, err := s.openArea(t.area)
	if err != nil {
		return idx // the write cannot reach the area either
	}
	defer ar.Close()
	dir, name := filepath.Dir(t.rel), filepath.Base(t.rel)
	for {
		if fi, err := ar.Stat(dir); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && fi.IsDir() {
				idx = append(idx, stripe(fmt.Sprintf("inode %d\x00%s", st.Ino, name)))
			}
			return idx
		}
		if dir == "." || dir == string(filepath.Separator) {
			return idx
		}
		dir, name = filepath.Dir(dir), filepath.Join(filepath.Base(dir), name)
	}
}

// noFlock reports whether err says the file system has no flock, rather than that
// taking it failed.
func noFlock(err error) bool {
	return errors.Is(err, unix.ENOLCK) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP)
}

// openLockDir opens lockDir, made if need be, through os.Root so that a link put in
// its place cannot take the lock files elsewhere.
func (s *Server) openLockDir() (*os.Root, error) {
	store, err := s.openStore()
	if err != nil {
		return nil, err
	}
	defer store.Close()
	if err := store.Mkdir(lockDir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	return store.OpenRoot(lockDir)
}

// flockFile opens lock file name in dir, made if need be, and holds an exclusive
// flock on it until the file is closed; flock nil is unix.Flock.
func flockFile(dir *os.Root, name string, flock func(fd, how int) error) (*os.File, error) {
	f, err := dir.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := flockRetry(f, flock, unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("flock: %w", err)
	}
	return f, nil
}

// flockRetry takes f's flock how (LOCK_EX, with LOCK_NB not to wait), again when a
// signal interrupts it; flock nil is unix.Flock.
func flockRetry(f *os.File, flock func(fd, how int) error, how int) error {
	if flock == nil {
		flock = unix.Flock
	}
	for {
		err := flock(int(f.Fd()), how)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// OnClose has Close call f (a tool's sessions, processes).
func (s *Server) OnClose(f func()) {
	s.mu.Lock()
	s.closers = append(s.closers, f)
	s.mu.Unlock()
}

// Close ends what the tools keep running (terminals, the snapshot pruner), last added
// first, once: App calls it when it stops, and a stop may come twice.
func (s *Server) Close() {
	s.mu.Lock()
	cs := s.closers
	s.closers = nil
	s.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		cs[i]()
	}
}

// Call is one call of a built-in operation: who makes it, in which conversation, and
// that conversation's workspace (a directory that exists).
type Call struct {
	callmeta.Meta
	Workspace string
	// peek: the guard only looks (Preflight): a grant it finds is not used.
	peek bool
}

// Operation is one operation of a tool.
type Operation struct {
	Name        string
	Description string
	// Properties are the JSON Schemas of the operation's own parameters, by name; a
	// parameter another operation of the tool has too must have the same schema.
	Properties map[string]any
	Required   []string
	// Display is the short line that says what a call does ("Creating file notes.txt"),
	// for live logs, approval cards and the audit view (seed 000 §6).
	Display func(args map[string]any) string
	Run     func(ctx context.Context, c Call, args json.RawMessage) (*mcp.CallToolResult, error)
}

// Tool is a built-in tool: one operation, or several chosen by the argument operation.
type Tool struct {
	Name        string
	Title       string
	Description string
	Annotations *mcp.ToolAnnotations
	// Operations: a tool of one operation whose Name is "" takes no operation argument.
	Operations []Operation
}

// New returns the built-in server with no tools yet (Add adds them).
func New(opts *Options) (*Server, error) {
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if o.Root == "" {
		return nil, fmt.Errorf("builtin: no workspace root")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	root, err := filepath.Abs(o.Root)
	if err != nil {
		return nil, fmt.Errorf("builtin: workspace root: %w", err)
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("builtin: create the workspace root: %w", err)
	}
	o.Root = root
	s := &Server{opts: o, tools: map[string]*Tool{}, searches: make(chan struct{}, maxSearches)}
	s.srv = mcp.NewServer(&mcp.Implementation{Name: "toolwarden-builtin", Title: "Toolwarden built-in tools", Version: o.Version},
		&mcp.ServerOptions{Logger: o.Logger})
	return s, nil
}

// MCP is the MCP server of the built-in tools (the session manager connects to it over
// an in-process pipe).
func (s *Server) MCP() *mcp.Server { return s.srv }

// Root is the workspaces' root.
func (s *Server) Root() string { return s.opts.Root }

// Add serves t.
func (s *Server) Add(t Tool) {
	s.mu.Lock()
	s.tools[t.Name] = &t
	s.mu.Unlock()
	s.srv.AddTool(&mcp.Tool{Name: t.Name, Title: t.Title, Description: describe(t), InputSchema: schemaOf(t),
		Annotations: t.Annotations}, s.handler(&t))
}

// consolidated reports whether t chooses its operation by the argument operation.
func consolidated(t Tool) bool { return len(t.Operations) != 1 || t.Operations[0].Name != "" }

func describe(t Tool) string {
	if !consolidated(t) {
		return t.Description
	}
	var b strings.Builder
	b.WriteString(t.Description)
	b.WriteString("\n\nOperations (the argument operation):")
	for _, op := range t.Operations {
		fmt.Fprintf(&b, "\n- %s: %s", op.Name, op.Description)
		if len(op.Required) > 0 {
			fmt.Fprintf(&b, " (needs %s)", strings.Join(op.Required, ", "))
		}
	}
	return b.String()
}

// schemaOf is a tool's input schema: for a consolidated tool, operation (an enum) and
// every operation's parameters, with each operation's required ones required when it
// is the one chosen (if/then), so the router names a missing parameter like any other.
// Each then also lists the operation's parameters, which forms read (views/form).
func schemaOf(t Tool) json.RawMessage {
	props := map[string]any{}
	var required []string
	var allOf []any
	if consolidated(t) {
		names := make([]string, 0, len(t.Operations))
		for _, op := range t.Operations {
			names = append(names, op.Name)
		}
		props["operation"] = map[string]any{"type": "string", "enum": names, "description": "what to do"}
		required = append(required, "operation")
	}
	for _, op := range t.Operations {
		for k, v := range op.Properties {
			if _, ok := props[k]; !ok {
				props[k] = v
			}
		}
		if !consolidated(t) {
			required = append(required, op.Required...)
			continue
		}
		// then names the operation's parameters too (each schema already in
		// properties; {} adds nothing), so a form can show an operation's own ones.
		then := map[string]any{}
		if len(op.Required) > 0 {
			then["required"] = op.Required
		}
		if len(op.Properties) > 0 {
			own := map[string]any{}
			for k := range op.Properties {
				own[k] = map[string]any{}
			}
			then["properties"] = own
		}
		if len(then) > 0 {
			allOf = append(allOf, map[string]any{
				"if":   map[string]any{"properties": map[string]any{"operation": map[string]any{"const": op.Name}}, "required": []string{"operation"}},
				"then": then,
			})
		}
	}
	schema := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		schema["required"] = required
	}
	if len(allOf) > 0 {
		schema["allOf"] = allOf
	}
	b, _ := json.Marshal(schema)
	return b
}

// handler runs the operation a call names, in its conversation's workspace.
func (s *Server) handler(t *Tool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		meta, ok := callmeta.Decode(req.Params.Meta)
		if !ok {
			return errorResult("this tool runs only through Toolwarden's router (the call names no conversation)"), nil
		}
		args := req.Params.Arguments
		if len(args) == 0 {
			args = json.RawMessage(`{}`)
		}
		op, err := t.operation(args)
		if err != nil {
			return errorResult(err.Error()), nil
		}
		ws, err := s.Workspace(meta.ConversationID)
		if err != nil {
			return nil, err
		}
		if msg, err := s.claim(ctx, meta, ws); err != nil {
			return nil, err
		} else if msg != "" {
			return errorResult(msg), nil
		}
		// What the operation records (a grant's use) names the caller as the call does.
		return op.Run(callmeta.With(ctx, meta), Call{Meta: meta, Workspace: ws}, args)
	}
}

// claim makes the caller the owner of the call's conversation, or says why the call
// may not use it (another person's conversation).
func (s *Server) claim(ctx context.Context, m callmeta.Meta, ws string) (string, error) {
	if s.opts.Conversations == nil || m.UserID == "" {
		return "", nil
	}
	owner, err := s.opts.Conversations.Claim(ctx, m.ConversationID, filepath.Base(ws), m.UserID, m.UserName)
	if err != nil {
		return "", err
	}
	if msg := notYours(m, owner); msg != "" {
		return "conversation_id: " + msg, nil
	}
	return "", nil
}

// notYours says why m's caller may not call in a conversation owned by owner ("" for
// one whose owner was removed), or "" when it is theirs.
func notYours(m callmeta.Meta, owner string) string {
	switch owner {
	case m.UserID:
		return ""
	case "":
		return fmt.Sprintf("the conversation %q belonged to a person who was removed; start a new conversation", m.ConversationID)
	}
	return fmt.Sprintf("the conversation %q belongs to another person; use a conversation id of your own", m.ConversationID)
}

// operation is the operation args choose.
func (t *Tool) operation(args json.RawMessage) (*Operation, error) {
	if !consolidated(*t) {
		return &t.Operations[0], nil
	}
	var a struct {
		Operation string `json:"operation"`
	}
	if err := json.Unmarshal(args, &a); err != nil {
		return nil, fmt.Errorf("the arguments are not a JSON object: %v", err)
	}
	i := slices.IndexFunc(t.Operations, func(op Operation) bool { return op.Name == a.Operation })
	if i < 0 {
		names := make([]string, 0, len(t.Operations))
		for _, op := range t.Operations {
			names = append(names, op.Name)
		}
		return nil, fmt.Errorf("operation: %q is not an operation of %s; use one of %s", a.Operation, t.Name, strings.Join(names, ", "))
	}
	return &t.Operations[i], nil
}

// Display is the short line that says what a call of tool (its bare name) with args
// does, or "" when the tool or operation is not known or says nothing.
func (s *Server) Display(tool string, args json.RawMessage) string {
	s.mu.Lock()
	t := s.tools[tool]
	s.mu.Unlock()
	if t == nil {
		return ""
	}
	op, err := t.operation(args)
	if err != nil || op.Display == nil {
		return ""
	}
	var m map[string]any
	_ = json.Unmarshal(args, &m)
	return op.Display(m)
}

// safeName is a snapshot id that may be a directory name as it is.
var safeName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)

// workspaceName is a workspace's directory name under the root: lowercase, since on a
// case-insensitive root (SMB, macOS, casefold ext4) "USER-x" would open user-x's.
var workspaceName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,99}$`)

// hashedName is the name of a workspace named by its conversation's hash, kept for the
// hashes: an id may not name one of them as it is.
var hashedName = regexp.MustCompile(`^c-[0-9a-f]{32}$`)

// Workspace is the directory of conversation id under the root, created if need be.
// An id that is not a plain lowercase name (capitals, slashes, very long, other
// characters) gets a directory named by its hash, so no id can name a path outside the
// root, nor another conversation's directory cased differently.
func (s *Server) Workspace(conversation string) (string, error) {
	dir := s.workspaceDir(conversation)
	s.adoptEarlierWorkspace(conversation, dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("builtin: create the workspace of %q: %w", conversation, err)
	}
	// A link put in a workspace's place would take the tools, and a terminal's
	// confinement, wherever it points.
	if st, err := os.Lstat(dir); err != nil || !st.IsDir() {
		return "", fmt.Errorf("builtin: the workspace of %q, %s, is not a directory (a symbolic link?); remove it", conversation, dir)
	}
	return dir, nil
}

// adoptEarlierWorkspace moves the workspace an earlier version made for conversation,
// named as the id was (capitals and all), to dir, its hashed name now, the first time
// the conversation is used: its files would otherwise be out of every tool's reach. The
// root's entries are compared by their exact names, since on a case-insensitive root
// the id's name would also find another conversation's lowercase directory.
//
// Only an id that lost its own name for its capitals is moved: the earlier version
// gave any safeName its own name, but an id naming a hashed directory (c-<hex>) would
// take another conversation's live workspace.
func (s *Server) adoptEarlierWorkspace(conversation, dir string) {
	if !safeName.MatchString(conversation) || workspaceName.MatchString(conversation) || filepath.Base(dir) == conversation {
		return
	}
	if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
		return
	}
	entries, err := os.ReadDir(s.opts.Root)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.Name() == conversation && e.Type().IsDir() {
			if err := os.Rename(filepath.Join(s.opts.Root, conversation), dir); err != nil {
				s.opts.Logger.Warn("builtin: move an earlier workspace to its new name", "conversation", conversation, "err", err)
			}
			return
		}
	}
}

// workspaceDir is the directory of conversation under the root (Workspace), made or not.
func (s *Server) workspaceDir(conversation string) string {
	name := conversation
	if !workspaceName.MatchString(name) || hashedName.MatchString(name) {
		sum := sha256.Sum256([]byte(conversation))
		name = "c-" + hex.EncodeToString(sum[:16])
	}
	return filepath.Join(s.opts.Root, name)
}

func errorResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// textResult is a result of one text.
func textResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}
