package builtin

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"

	"github.com/toolwarden/toolwarden/internal/confine"
	"github.com/toolwarden/toolwarden/internal/proctrack"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/usage"
)

// Terminal kinds.
const (
	KindPTY     = "pty"     // an interactive bash -il on a pseudo-terminal
	KindCommand = "command" // a run_command in the background
)

// Default limits of the terminals (TerminalOptions): enough for an agent's work, while
// a caller opening sessions in conversations of its choosing, or background commands
// without end, cannot exhaust the host's processes or memory.
const (
	DefaultMaxTerminalsPerOwner = 16
	DefaultMaxTerminals         = 256
	DefaultIdleTimeout          = 30 * time.Minute
	// An ended terminal keeps its output (up to 1 MiB) for KeepEnded: what the ended
	// ones of one person, and of the process, keep together is bounded too.
	DefaultEndedOutputPerOwner = 16 << 20
	DefaultEndedOutput         = 256 << 20
	// How many ended terminals one person, and the process, keep listed: each keeps its
	// command line (up to 100,000 characters) and its record, whatever its output.
	DefaultMaxEndedPerOwner = 100
	DefaultMaxEnded         = 1000
)

// closeGrace is how long a closed terminal's processes get between SIGTERM and SIGKILL.
const closeGrace = 100 * time.Millisecond

// TerminalOptions configure the terminals.
type TerminalOptions struct {
	// Root is the built-in root; running sessions are recorded under
	// <Root>/.terminals/<Host>.
	Root string
	// Host names this host's directory of records under <Root>/.terminals, which
	// replicas on other hosts sharing Root leave alone (CleanupOrphans). Default: the
	// host's name and machine id; tests set their own.
	Host   string
	Logger *slog.Logger
	// Env is added to every terminal's and command's environment, after Toolwarden's
	// own ("NAME=value"; a name given here wins, but for HOME and HISTFILE of a terminal
	// in a conversation's workspace, which are the conversation's own: homeOf). Tests
	// give terminals a home of their own, so that the host's login files do not run in them.
	Env []string
	// BufferBytes is how much output a terminal keeps. Default 1 MiB.
	BufferBytes int
	// InputWait bounds how long typed input waits for the program to take it (it is
	// not reading, and the PTY's queue is full). Default 10 s.
	InputWait time.Duration
	// KeepEnded is how long a terminal whose process ended stays listed, its output
	// readable (get_output of a finished background command). Default 15 minutes.
	KeepEnded time.Duration
	// MaxPerOwner is how many running terminals (PTY sessions and commands together) one
	// person may have on this process; default DefaultMaxTerminalsPerOwner. Ended
	// terminals kept for their output do not count.
	MaxPerOwner int
	// MaxRunning is how many running terminals this process allows in all; default
	// DefaultMaxTerminals.
	MaxRunning int
	// EndedOutputPerOwner bounds the bytes of output one person's ended terminals keep
	// together; past it, the output of their terminal that ended first is dropped (it
	// stays listed, ended, and says so), rather than new work refused. Default
	// DefaultEndedOutputPerOwner.
	EndedOutputPerOwner int
	// EndedOutput bounds it for every ended terminal of this process; default
	// DefaultEndedOutput. A background command's command line counts as output.
	EndedOutput int
	// MaxEndedPerOwner bounds how many ended terminals of one person stay listed; past
	// it, the one that ended first is forgotten before KeepEnded. Default
	// DefaultMaxEndedPerOwner. A terminal whose output was dropped still counts its
	// command line towards EndedOutputPerOwner and EndedOutput: once no ended terminal
	// within the bound has output left to drop, the one that ended first is forgotten.
	MaxEndedPerOwner int
	// MaxEnded bounds it for this process; default DefaultMaxEnded.
	MaxEnded int
	// IdleTimeout ends a PTY session nothing was typed into and that printed nothing for
	// that long, its shell at its prompt (ended_reason "idle"); a job in its foreground,
	// however quiet, keeps it. 0: DefaultIdleTimeout; negative: never.
	IdleTimeout time.Duration
	// OnInput, when set, records the lines one input typed into a terminal from the
	// browser or by send_input (TypedLine says which may be a password) before the keys
	// that end them reach the shell; when it fails, nothing of that input is typed.
	OnInput func(t *Terminal, who TerminalCaller, lines []TypedLine) error
	// OnChange, when set, is told when a terminal opens, when its process ends and
	// when it leaves the list (the /terminals page follows them).
	OnChange func(t *Terminal, change TerminalChange)
	// Store, when set, records every terminal in the database so that the other
	// replicas list it and send its requests here (terminal_store.go).
	Store *TerminalStore
	// Confiner, when set, confines every shell and command (docs/security.md, Built-in
	// terminals): what it hides (the data dir, the key, the database's socket, the
	// built-in root) is out of reach but for the terminal's own conversation's
	// workspace. Nil: terminals run unconfined.
	Confiner *confine.Confiner
	// Forward, when set, runs a terminal_operations operation on a terminal another
	// replica runs (rec), on that replica; ErrReplicaGone when it stopped.
	Forward func(ctx context.Context, rec TerminalRecord, op string, c Call, args json.RawMessage) (*mcp.CallToolResult, error)
}

// ErrReplicaGone: the replica that ran a terminal stopped (its processes ended with it).
var ErrReplicaGone = errors.New("the replica that ran the terminal stopped")

// ErrOwnerForgot is what a terminal's Forward returns when the replica that runs it no
// longer knows the session (it ended and was forgotten): no such session, as here.
var ErrOwnerForgot = errors.New("the replica that ran the terminal no longer knows it")

// ErrNotRun (TerminalOptions.Forward): the replica that runs the terminal refused the
// operation before running it (a hop refused, the request malformed): it may be sent
// again as it is.
var ErrNotRun = errors.New("the replica that runs the terminal did not run the operation")

// TerminalChange is what happened to a terminal (TerminalOptions.OnChange).
type TerminalChange int

const (
	TerminalOpened TerminalChange = iota
	TerminalExited
	TerminalClosed
)

func (ts *Terminals) changed(t *Terminal, c TerminalChange) {
	if s := ts.opts.Store; s != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var err error
		switch c {
		case TerminalOpened:
			err = s.opened(ctx, t)
		case TerminalExited:
			err = s.ended(ctx, t)
			if err != nil && t.endedFor.Load() != nil {
				// Its audit row is written with the record or not at all, and no later
				// sweep knows why it ended: it is tried again for a while.
				go ts.endedLater(t, err)
			}
		case TerminalClosed:
			err = s.gone(ctx, t)
		}
		cancel()
		if err != nil {
			ts.opts.Logger.Warn("terminals: record a change", "terminal", t.ID, "err", err)
		}
	}
	if ts.opts.OnChange != nil {
		ts.opts.OnChange(t, c)
	}
}

// endedRetryFor is how long an audited end whose record could not be written (the
// database down or a lock held) is tried again.
const endedRetryFor = 5 * time.Minute

// endedLater tries again to record an audited end (revoked, disabled, an
// administrator's) whose first write failed with first.
func (ts *Terminals) endedLater(t *Terminal, first error) {
	ctx, cancel := context.WithTimeout(context.Background(), endedRetryFor)
	defer cancel()
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval, bo.MaxInterval = 200*time.Millisecond, 10*time.Second
	tries := 1
	_, err := backoff.Retry(ctx, func() (struct{}, error) {
		tries++
		actx, acancel := context.WithTimeout(ctx, 5*time.Second)
		defer acancel()
		return struct{}{}, ts.opts.Store.endedAgain(actx, t, true)
	}, backoff.WithBackOff(bo), backoff.WithMaxElapsedTime(endedRetryFor))
	if err != nil {
		ts.opts.Logger.Error("terminals: the end of a terminal was not recorded nor audited", "terminal", t.ID,
			"reason", *t.endedFor.Load(), "tries", tries, "first_err", first, "err", err)
		return
	}
	ts.opts.Logger.Info("terminals: recorded and audited a terminal's end after a failed write", "terminal", t.ID, "tries", tries)
}

// TypedLine is a line one input completed (TerminalOptions.OnInput).
type TypedLine struct {
	Text string
	// EchoOff: the terminal did not echo when the input came (a password prompt).
	EchoOff bool
	// AfterLine: it came after another line of the same input, which may have started a
	// program that turns echo off before it reads this one (su -c id, then its
	// password): whether it showed cannot be known when it is recorded. Not set for an
	// empty line, which hides nothing.
	AfterLine bool
}

// Hidden reports whether the line may be a password, and is kept out of the records
// (but for what the terminal rules rate: auditTerminalInput).
func (l TypedLine) Hidden() bool { return l.EchoOff || l.AfterLine }

// TerminalCaller is who typed into a terminal or called the tool: a person, or their
// API token (ActorKind "token", TokenID) when an agent's call did.
type TerminalCaller struct {
	UserID, UserName, Source, ActorKind, TokenID string
	// Level is the risk level an agent's call was let through at (callmeta.Meta.Level).
	Level string
}

// BrowserSource is TerminalCaller.Source of keys a person types on the /terminals page
// (web/terminal_ws.go): they reach the shell past the router, so no rating of a call
// holds them (Input).
const BrowserSource = "browser"

// Terminals are the PTY sessions and background commands of every conversation.
type Terminals struct {
	opts     TerminalOptions
	realRoot string // opts.Root with its links resolved (working directories are real)
	records  string // where this host's sessions are recorded (recordDir)
	marker   string // this run's marker (markerEnv)
	// opening holds, by conversation, the lock its create_session takes (lockOpen): a
	// conversation gets one session, and one conversation's slow close of its old
	// session (up to seconds) does not hold up everyone else's create_session.
	openMu  sync.Mutex
	opening map[string]*openLock
	mu      sync.Mutex
	byID    map[string]*Terminal
	closed  bool
	// starting counts, by owner, the terminals that passed reserve and are not in byID
	// yet, so that calls at once cannot start more than the limits allow.
	starting map[string]int
	// barred are the owners whose account was disabled (EndOwnedBy) until Readmit: a
	// terminal of theirs whose start was under way as EndOwnedBy ran (past reserve, not
	// yet in byID) is refused by add, not left running unseen.
	barred map[string]bool
	// beforeAdd, when set (tests), runs as a terminal that started is about to be added.
	beforeAdd func(t *Terminal)
	// endedBytes counts, by owner, the output (and command lines) their ended terminals
	// keep (kept), and endedAll all of it; endedNum and endedNumAll count those
	// terminals; endedSeq orders the terminals as they ended.
	endedBytes  map[string]int
	endedAll    int
	endedNum    map[string]int
	endedNumAll int
	endedSeq    int64
	// ops are terminal_operations' operations on one session, as this process runs
	// them (RunOp), set by TerminalTool.
	ops map[string]func(ctx context.Context, c Call, args json.RawMessage) (*mcp.CallToolResult, error)
}

// Terminal is one PTY session or background command.
type Terminal struct {
	ID             string    `json:"id"`
	Kind           string    `json:"kind"`
	ConversationID string    `json:"conversation_id"`
	OwnerID        string    `json:"owner_id"`
	OwnerName      string    `json:"owner_name"`
	Dir            string    `json:"dir"`
	Command        string    `json:"command,omitempty"`
	Started        time.Time `json:"started"`

	ts     *Terminals
	out    *ring
	cmd    *exec.Cmd
	ptmx   *os.File // nil for a command; closed once the session ended and its output was read
	sid    int
	nested bool          // the shell runs under the confinement's init (sid), not as the session's leader
	done   chan struct{} // closed when the leader was reaped
	gone   chan struct{} // closed when its session's processes and record are gone too
	exit   int           // its exit code, once done (-1, or 128+n when confined: killed by signal n)
	closed atomic.Bool   // ended by close_session, not by itself
	// born and active (nanoseconds after born, monotonic) are when it started and when
	// it last printed or was typed into (the idle timeout).
	born   time.Time
	active atomic.Int64
	// endedFor is why Toolwarden ended it, when it did for a reason of its own (its
	// owner was disabled): its record says so, and the audit log (TerminalStore.ended).
	endedFor atomic.Pointer[string]
	// endedBy is the person who ended it from the /terminals page (EndBy): the audit
	// row of its end is theirs, not the system's.
	endedBy atomic.Pointer[audit.Actor]
	// kept is the memory its output and command line take once it ended (keptOut its
	// output's), counted in ts.endedBytes until the output is dropped (keptOut) or it is
	// forgotten (all); endedN orders it among the ended ones, 0 when it is not counted
	// (all under ts.mu). outputDropped: its output was dropped, its owner's share of
	// ended output full (keepEnded).
	kept          int
	keptOut       int
	endedN        int64
	outputDropped atomic.Bool
	// typing orders writes of input with their audit (a write blocks while the
	// program does not read; inMu, which Size and Resize take, is not held then).
	typing sync.Mutex
	// readDone closes when the PTY's reader stopped (nil for a command).
	readDone chan struct{}
	// keys carry input to the one goroutine that writes to the PTY (writeKeys), so a
	// write the program does not read is waited for a bounded time, not for ever.
	keys    chan keysWrite
	writing atomic.Bool // writeKeys is in a write the program has not taken yet
	inMu    sync.Mutex
	inLine  lineEditor // what was typed since the last newline (for the audit)
	// inPage: keys typed on the page are in inLine, rated by no one (a person's own);
	// a call that joins that line is rated with them (joinedRisk). Until the line ends.
	inPage bool
	once   sync.Once
	cols   uint16
	rows   uint16
}

// NewTerminals returns the terminals, first killing what a previous run left
// running (CleanupOrphans).
func NewTerminals(opts TerminalOptions) (*Terminals, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.BufferBytes <= 0 {
		opts.BufferBytes = 1 << 20
	}
	if opts.InputWait <= 0 {
		opts.InputWait = 10 * time.Second
	}
	if opts.KeepEnded <= 0 {
		opts.KeepEnded = 15 * time.Minute
	}
	if opts.MaxPerOwner <= 0 {
		opts.MaxPerOwner = DefaultMaxTerminalsPerOwner
	}
	if opts.MaxRunning <= 0 {
		opts.MaxRunning = DefaultMaxTerminals
	}
	if opts.EndedOutputPerOwner <= 0 {
		opts.EndedOutputPerOwner = DefaultEndedOutputPerOwner
	}
	if opts.EndedOutput <= 0 {
		opts.EndedOutput = DefaultEndedOutput
	}
	if opts.MaxEndedPerOwner <= 0 {
		opts.MaxEndedPerOwner = DefaultMaxEndedPerOwner
	}
	if opts.MaxEnded <= 0 {
		opts.MaxEnded = DefaultMaxEnded
	}
	if opts.IdleTimeout == 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.Root == "" {
		return nil, errors.New("terminals: no root")
	}
	if opts.Host == "" {
		opts.Host = hostID()
	}
	if n, err := CleanupOrphans(opts.Root, opts.Host); err != nil {
		opts.Logger.Warn("terminals: cleaning up after a previous run", "err", err)
	} else if n > 0 {
		opts.Logger.Warn("terminals: killed processes a previous run left running", "processes", n)
	}
	real, err := filepath.EvalSymlinks(opts.Root)
	if err != nil {
		real = opts.Root
	}
	ts := &Terminals{opts: opts, realRoot: real, records: recordDir(opts.Root, opts.Host), marker: newID("run-"),
		byID: map[string]*Terminal{}, starting: map[string]int{}, barred: map[string]bool{}, opening: map[string]*openLock{},
		endedBytes: map[string]int{}, endedNum: map[string]int{}}
	// Before any terminal starts: a process that leaves its session (setsid) is still
	// found by its marker after a crash.
	if err := proctrack.WriteRun(ts.records, ts.marker); err != nil {
		opts.Logger.Warn("terminals: record this run", "err", err)
	}
	return ts, nil
}

func newID(prefix string) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// env is a terminal's environment: Toolwarden's without its own settings (secrets
// among them: the database's address and password, the model's API key), TERM set, the
// run's marker and the terminal's (id), and Options.Env. A command as innocent as env
// would otherwise hand them to whoever reads its output, an agent or the audit log.
// home, when set, is the conversation's own (homeOf), and wins over Options.Env's.
func (ts *Terminals) env(home, id string) []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "TERM=") || privateEnv(kv) || (home != "" && sharedHomeEnv(kv))
	})
	env = append(env, "TERM=xterm-256color", "LANG=C.UTF-8", markerEnv+"="+ts.marker, terminalEnv+"="+id)
	env = append(env, ts.opts.Env...)
	if home != "" {
		env = append(env, "HOME="+home, "HISTFILE="+filepath.Join(home, ".bash_history"))
	}
	return env
}

// sharedHomeEnv reports whether kv points a program at files in Toolwarden's home (the
// XDG directories), which a terminal with a home of its own keeps under that home.
func sharedHomeEnv(kv string) bool {
	for _, p := range []string{"XDG_CONFIG_HOME=", "XDG_DATA_HOME=", "XDG_STATE_HOME=", "XDG_CACHE_HOME="} {
		if strings.HasPrefix(kv, p) {
			return true
		}
	}
	return false
}

// homeOf makes, and returns, the home of the terminals working in workspace ws:
// <ws>/.home (0700). One home shared by every conversation would let one plant login
// files that run in another's next shell, or read its history. "" when ws is ""
// (not in a workspace): such a terminal keeps Toolwarden's home.
func homeOf(ws string) (string, error) {
	if ws == "" {
		return "", nil
	}
	home := filepath.Join(ws, ".home")
	if err := os.Mkdir(home, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("make the terminal's home: %w", err)
	}
	return home, nil
}

// privateEnv reports whether the environment entry kv is one of Toolwarden's settings
// (TOOLWARDEN_*, DATABASE_URL) or PostgreSQL's client settings (PG*: a password, a
// server), which no terminal needs.
func privateEnv(kv string) bool {
	return strings.HasPrefix(kv, "TOOLWARDEN_") || strings.HasPrefix(kv, "DATABASE_URL=") || strings.HasPrefix(kv, "PG")
}

// Get is terminal id, or nil.
func (ts *Terminals) Get(id string) *Terminal {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.byID[id]
}

// List is every terminal, oldest first.
func (ts *Terminals) List() []*Terminal {
	ts.mu.Lock()
	out := make([]*Terminal, 0, len(ts.byID))
	for _, t := range ts.byID {
		out = append(out, t)
	}
	ts.mu.Unlock()
	slices.SortFunc(out, func(a, b *Terminal) int { return a.Started.Compare(b.Started) })
	return out
}

// reserve takes a place for a terminal owner is about to start, or says why there is
// none: owner has MaxPerOwner running terminals, or the process MaxRunning. Ended
// terminals, listed for their output, do not count; nor does replacing, a session about
// to be closed for the new one. add (or unreserve, when it did not start) gives it back.
func (ts *Terminals) reserve(owner string, replacing *Terminal) error {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.closed {
		return errors.New("terminals are closed (Toolwarden is stopping)")
	}
	if ts.barred[owner] {
		return errDisabledOwner
	}
	mine, all := ts.starting[owner], 0
	for _, n := range ts.starting {
		all += n
	}
	for _, t := range ts.byID {
		if t != replacing && !t.Exited() {
			all++
			if t.OwnerID == owner {
				mine++
			}
		}
	}
	const end = "end one with close_session (list_sessions lists a conversation's) or by typing exit into a session (send_input, or on the /terminals page), or wait for a background command to finish or reach its timeout"
	if mine >= ts.opts.MaxPerOwner {
		return fmt.Errorf("terminals: you have %d terminals running (sessions and commands; at most %d per person); %s", mine, ts.opts.MaxPerOwner, end)
	}
	if all >= ts.opts.MaxRunning {
		return fmt.Errorf("terminals: there are %d terminals running on this server (at most %d); %s", all, ts.opts.MaxRunning, end)
	}
	ts.starting[owner]++
	return nil
}

// unreserve gives back owner's place of a terminal that did not start.
func (ts *Terminals) unreserve(owner string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.unreserveLocked(owner)
}

func (ts *Terminals) unreserveLocked(owner string) {
	if ts.starting[owner]--; ts.starting[owner] <= 0 {
		delete(ts.starting, owner)
	}
}

// errDisabledOwner refuses a terminal whose owner's account was disabled (EndOwnedBy).
var errDisabledOwner = errors.New("terminals: your account was disabled")

// add lists t, whose owner reserved its place, unless its owner was disabled since
// (EndOwnedBy): the caller then ends it.
func (ts *Terminals) add(t *Terminal) error {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.unreserveLocked(t.OwnerID) // counted in byID from now on
	if ts.closed {
		return errors.New("terminals are closed (Toolwarden is stopping)")
	}
	if ts.barred[t.OwnerID] {
		return errDisabledOwner
	}
	ts.byID[t.ID] = t
	return nil
}

// OpenPTY returns conversation's PTY session in dir: the running one when it has
// one there, else a new bash -il (closing one it had in another directory).
func (ts *Terminals) OpenPTY(c TerminalCaller, conversation, dir string) (*Terminal, bool, error) {
	// The conversation's own lock, held while its old session closes (which waits up to
	// seconds for its processes): another create_session of the same conversation must
	// not find two sessions, and those of other conversations go on meanwhile.
	defer ts.lockOpen(conversation)()
	ts.mu.Lock()
	var old *Terminal
	for _, t := range ts.byID {
		if t.Kind == KindPTY && t.ConversationID == conversation && !t.Exited() {
			old = t
			break
		}
	}
	ts.mu.Unlock()
	if old != nil && old.Dir == dir {
		return old, true, nil
	}
	if err := ts.reserve(c.UserID, old); err != nil {
		return nil, false, err
	}
	if old != nil {
		old.Close()
	}
	t := &Terminal{ID: newID("term-"), Kind: KindPTY, ConversationID: conversation, OwnerID: c.UserID, OwnerName: c.UserName,
		Dir: dir, Started: time.Now().UTC(), ts: ts, out: newRing(ts.opts.BufferBytes), done: make(chan struct{}), gone: make(chan struct{}), cols: 120, rows: 32}
	ws := ts.workspaceOf(dir)
	home, err := homeOf(ws)
	if err != nil {
		ts.unreserve(c.UserID)
		return nil, false, fmt.Errorf("start a terminal: %w", err)
	}
	cmd := exec.Command("/bin/bash", "-il")
	cmd.Dir = dir
	cmd.Env = ts.env(home, t.ID)
	ts.opts.Confiner.ApplyTerminal(cmd, ws)
	ptmx, err := startPTY(cmd, t.cols, t.rows)
	if err != nil {
		ts.unreserve(c.UserID)
		return nil, false, fmt.Errorf("start a terminal: %w", err)
	}
	t.cmd, t.ptmx, t.sid, t.born = cmd, ptmx, cmd.Process.Pid, time.Now()
	t.nested = cmd.Path != "/bin/bash"
	// Both before track lists and announces it: from then on Input may send on keys,
	// and the reader must be reading before the shell can end (track's reaper waits
	// for it to finish, then closes the PTY).
	t.keys = make(chan keysWrite)
	t.readDone = make(chan struct{})
	go func() {
		defer close(t.readDone)
		_, _ = io.Copy(activeWriter{t}, ptmx) // ends with EIO once nothing holds the terminal, or when ptmx is closed
	}()
	if err := ts.track(t); err != nil {
		_ = ptmx.Close() // ends the reader
		return nil, false, err
	}
	go t.writeKeys()
	if ts.opts.IdleTimeout > 0 {
		go t.endWhenIdle()
	}
	return t, false, nil
}

// openLock is one conversation's create_session lock, and how many hold or wait for it.
type openLock struct {
	mu sync.Mutex
	n  int
}

// lockOpen takes conversation's create_session lock and returns what gives it back. A
// lock is dropped once nobody holds or waits for it, so the map does not grow with every
// conversation ever seen.
func (ts *Terminals) lockOpen(conversation string) (unlock func()) {
	ts.openMu.Lock()
	l := ts.opening[conversation]
	if l == nil {
		l = &openLock{}
		ts.opening[conversation] = l
	}
	l.n++
	ts.openMu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		ts.openMu.Lock()
		if l.n--; l.n == 0 {
			delete(ts.opening, conversation)
		}
		ts.openMu.Unlock()
	}
}

// activeWriter writes a session's output to its buffer, and notes that it was active.
type activeWriter struct{ t *Terminal }

func (w activeWriter) Write(p []byte) (int, error) {
	w.t.touch()
	return w.t.out.Write(p)
}

// touch notes that the terminal printed or was typed into now.
func (t *Terminal) touch() { t.active.Store(int64(time.Since(t.born))) }

// EndedIdle is the ended_reason of the record of a PTY session Toolwarden ended because
// nothing was typed into it and it printed nothing for IdleTimeout.
const EndedIdle = "idle"

// endWhenIdle ends the session, as close_session does, once it has been idle for
// IdleTimeout, its shell at its prompt: a shell an agent forgot would otherwise run until
// Toolwarden stops. It says so in its output, its record and the audit log (ended by the
// system).
func (t *Terminal) endWhenIdle() {
	idle := t.ts.opts.IdleTimeout
	timer := time.NewTimer(idle)
	defer timer.Stop()
	wasBusy := false
	for {
		select {
		case <-t.done:
			return
		case <-timer.C:
		}
		if left := idle - (time.Since(t.born) - time.Duration(t.active.Load())); left > 0 {
			timer.Reset(left)
			continue
		}
		if busy := t.busy(); busy || wasBusy {
			// A quiet job (a long sleep, a dump) is work going on, not a forgotten
			// shell. One that ended since the last look may have ended a moment ago,
			// the shell still between it and the rest of its command line: the
			// session counts as active until now either way, so that it is not ended
			// the moment a job ends.
			wasBusy = busy
			t.touch()
			timer.Reset(idle)
			continue
		}
		reason := EndedIdle
		t.endedFor.CompareAndSwap(nil, &reason) // before it ends: its record is written as it does
		_, _ = t.out.Write(fmt.Appendf(nil, "\n[ended: no input or output for %s]\n", idle))
		t.End()
		return
	}
}

// busy reports whether the session is at work: a job runs in its foreground (the
// terminal's foreground process group is not the shell's), or the shell itself is
// running rather than asleep (at its prompt it sleeps reading the terminal; between the
// commands of a line, or in a loop of its own, it runs). Unconfined, the shell leads the
// session and its group (sid); confined, it is the child of the namespace's init (sid)
// and, interactive, takes a group of its own, which a job's leader, its child, does not
// lead.
func (t *Terminal) busy() bool {
	rc, err := t.ptmx.SyscallConn() // not Fd: the PTY may be closed meanwhile
	if err != nil {
		return false
	}
	fg, ierr := 0, error(nil)
	if err := rc.Control(func(fd uintptr) { fg, ierr = unix.IoctlGetInt(int(fd), unix.TIOCGPGRP) }); err != nil || ierr != nil || fg <= 0 {
		return false
	}
	state, ppid := procStat(fg)
	if fg != t.sid && (!t.nested || ppid != t.sid) {
		return true // a job's group
	}
	return state == 'R' || state == 'D' // the shell's group, led by the shell
}

// procStat is the state and parent process id of pid, 0 and 0 when it is gone.
func procStat(pid int) (state byte, ppid int) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 || len(f[0]) != 1 {
		return 0, 0
	}
	ppid, _ = strconv.Atoi(f[1])
	return f[0][0], ppid
}

// keysWrite is one input for writeKeys, and where it answers.
type keysWrite struct {
	b    []byte
	done chan error // buffered: an answer nobody waits for any more is dropped
}

// writeKeys writes the terminal's input until it ends. A write waits while the PTY's
// input queue is full (the program is not reading); Input bounds how long its caller
// waits for it, and closing the master (non-blocking, startPTY) ends it.
func (t *Terminal) writeKeys() {
	for {
		select {
		case w := <-t.keys:
			t.writing.Store(true)
			_, err := t.ptmx.Write(w.b)
			t.writing.Store(false)
			w.done <- err
		case <-t.gone:
			return
		}
	}
}

// Start runs command with bash -c in dir, its output (stdout and stderr) in the
// terminal's buffer; timeout ends it.
func (ts *Terminals) Start(c TerminalCaller, conversation, dir, command string, timeout time.Duration, bufBytes int) (*Terminal, error) {
	if err := ts.reserve(c.UserID, nil); err != nil {
		return nil, err
	}
	if bufBytes <= 0 {
		bufBytes = ts.opts.BufferBytes
	}
	t := &Terminal{ID: newID("cmd-"), Kind: KindCommand, ConversationID: conversation, OwnerID: c.UserID, OwnerName: c.UserName,
		Dir: dir, Command: usage.RedactText(command), Started: time.Now().UTC(), ts: ts, out: newRing(bufBytes), done: make(chan struct{}), gone: make(chan struct{})}
	ws := ts.workspaceOf(dir)
	home, err := homeOf(ws)
	if err != nil {
		ts.unreserve(c.UserID)
		return nil, fmt.Errorf("run the command: %w", err)
	}
	// What runs is the command as given; what is kept, stored, announced and listed
	// (Command) has its credentials masked.
	cmd := exec.Command("/bin/bash", "-c", command)
	cmd.Dir = dir
	cmd.Env = ts.env(home, t.ID)
	cmd.Stdout, cmd.Stderr = t.out, t.out
	// Pdeathsig, as stdio servers have it: a SIGKILLed serve does not leave the command
	// running past its timeout, whose timer died with serve (confined, the helper's own
	// PDEATHSIG ends the namespace too); what it started in the background is cleaned at
	// the next start (CleanupOrphans).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = time.Second
	ts.opts.Confiner.ApplyTerminal(cmd, ws)
	if err := cmd.Start(); err != nil {
		ts.unreserve(c.UserID)
		return nil, fmt.Errorf("run the command: %w", err)
	}
	t.cmd, t.sid = cmd, cmd.Process.Pid
	if err := ts.track(t); err != nil {
		return nil, err
	}
	if timeout > 0 {
		go func() {
			select {
			case <-t.done:
			case <-time.After(timeout):
				_, _ = t.out.Write(fmt.Appendf(nil, "\n[timed out after %s]\n", timeout))
				t.End() // listed, its output readable, as one that ended by itself
			}
		}()
	}
	return t, nil
}

// Confinement says how terminals run (Confiner.Describe): which namespaces hide what
// from them, or "none: <why>".
func (ts *Terminals) Confinement() string { return ts.opts.Confiner.Describe() }

// workspaceOf is what a terminal working in dir may reach under its confinement: its
// conversation's workspace, the first directory below the root (dir may name it
// through the root's real path). Nothing ("") when dir is not below the root: the
// terminal then cannot start there, confined.
func (ts *Terminals) workspaceOf(dir string) string {
	for _, root := range []string{ts.opts.Root, ts.realRoot} {
		rel, err := filepath.Rel(root, dir)
		if err != nil || rel == "." || !filepath.IsLocal(rel) {
			continue
		}
		first, _, _ := strings.Cut(rel, string(filepath.Separator))
		return filepath.Join(root, first)
	}
	return ""
}

// track records t's session (for a cleanup after a crash), registers it and reaps it.
func (ts *Terminals) track(t *Terminal) error {
	if err := proctrack.Write(ts.records, record{SID: t.sid, Marker: ts.marker, Started: t.Started}); err != nil {
		ts.opts.Logger.Warn("terminals: record a session", "err", err)
	}
	if ts.beforeAdd != nil {
		ts.beforeAdd(t)
	}
	if err := ts.add(t); err != nil {
		endSession(t.sid, ts.marker, 0, make(chan struct{})) // not reaped yet
		_ = t.cmd.Wait()
		proctrack.Remove(ts.records, t.sid)
		return err
	}
	ts.changed(t, TerminalOpened)
	go func() {
		// What the leader left behind goes with it, before it is reaped: a zombie, it
		// keeps its session's id ours, so a process of the session that dropped the
		// marker from its environment goes too (signalSession).
		werr := proctrack.WaitExited(t.sid)
		swept := werr == nil
		if swept {
			sweepEnded(t.sid, t.ID)
		} else {
			ts.opts.Logger.Warn("terminals: wait for a terminal's process", "terminal", t.ID, "err", werr)
		}
		err := t.cmd.Wait()
		// The shell's own exit code whenever it exited, even when Wait also gave up
		// on output a job it left behind still holds (exec.ErrWaitDelay).
		code := 0
		if t.cmd.ProcessState != nil {
			code = t.cmd.ProcessState.ExitCode()
		} else if err != nil {
			code = -1
		}
		t.exit = code
		close(t.done)
		if !swept {
			endSession(t.sid, ts.marker, 0, nil) // reaped: only the marked ones are surely ours
		}
		proctrack.Remove(ts.records, t.sid)
		t.stopReading()
		ts.keepEnded(t)
		// Recorded before gone closes: Close, which a foreground command's call makes as
		// soon as it is done, waits for gone, so its exit code is stored and announced
		// before the terminal is recorded closed, never lost to it.
		ts.changed(t, TerminalExited)
		close(t.gone)
		time.AfterFunc(ts.opts.KeepEnded, t.Close)
	}()
	return nil
}

// ptyDrain is how long the reader of an ended PTY session may go on reading: a process
// that left the session (and so the sweep) may hold its terminal open, and would
// otherwise keep the PTY, its descriptor and its reader for as long as it runs.
const ptyDrain = 250 * time.Millisecond

// stopReading lets an ended PTY session's master go now rather than after KeepEnded
// (ended sessions do not count against the limits, and each would hold one of the
// host's PTYs, kernel.pty.max): once its output was read to the end (EIO: nothing holds
// the terminal), or after ptyDrain. The master is non-blocking (startPTY), so closing
// it ends a read under way.
func (t *Terminal) stopReading() {
	if t.readDone == nil {
		return
	}
	select {
	case <-t.readDone:
	case <-time.After(ptyDrain):
	}
	_ = t.ptmx.Close()
	select {
	case <-t.readDone:
	case <-time.After(time.Second):
		t.ts.opts.Logger.Warn("terminals: the reader of an ended session did not stop", "terminal", t.ID)
	}
}

// startPTY starts cmd on a new pseudo-terminal of cols x rows, in a session of its own
// whose controlling terminal it is, and returns the terminal's master. Unlike
// pty.Start, it never calls the master's Fd, which would put it in blocking mode for
// good: Close then would not end a read under way, and a process holding the terminal
// would keep the master, its reader and the host's PTY until it ends. Every ioctl goes
// through SyscallConn.
func startPTY(cmd *exec.Cmd, cols, rows uint16) (*os.File, error) {
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	var n uint32
	err = control(ptmx, func(fd int) (err error) {
		if err = unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil { // unlockpt
			return err
		}
		if n, err = unix.IoctlGetUint32(fd, unix.TIOCGPTN); err != nil { // ptsname
			return err
		}
		return unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Col: cols, Row: rows})
	})
	if err != nil {
		_ = ptmx.Close()
		return nil, fmt.Errorf("open a pseudo-terminal: %w", err)
	}
	tty, err := os.OpenFile("/dev/pts/"+strconv.FormatUint(uint64(n), 10), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		_ = ptmx.Close()
		return nil, err
	}
	defer func() { _ = tty.Close() }() // the child has its own copies
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setsid, cmd.SysProcAttr.Setctty = true, true // Ctty 0: its stdin
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL                  // as run_command's
	if err := cmd.Start(); err != nil {
		_ = ptmx.Close()
		return nil, err
	}
	return ptmx, nil
}

// control runs f on f's descriptor through SyscallConn (not Fd, which would make it
// blocking); an error when it is closed.
func control(file *os.File, f func(fd int) error) error {
	rc, err := file.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = f(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// keepEnded counts what t keeps now that it ended (its output and command line), and
// while the ended ones keep more than EndedOutputPerOwner or EndedOutput, drops the
// output of the terminals that ended first, its owner's and then anyone's; when none
// in the bound has output left, or more than MaxEndedPerOwner or MaxEnded are listed,
// it forgets the one that ended first. Kept for KeepEnded, ended terminals run without
// limit (background commands of 1 MiB of output, or of 100,000 characters of command
// line, each) would otherwise fill the memory.
func (ts *Terminals) keepEnded(t *Terminal) {
	var drop, forget []*Terminal
	ts.mu.Lock()
	if ts.byID[t.ID] != t { // forgotten already (a foreground command, closed at once)
		ts.mu.Unlock()
		return
	}
	ts.endedSeq++
	t.endedN, t.keptOut = ts.endedSeq, ringSize(t.out)
	t.kept = t.keptOut + len(t.Command)
	ts.endedBytes[t.OwnerID] += t.kept
	ts.endedAll += t.kept
	ts.endedNum[t.OwnerID]++
	ts.endedNumAll++
	for {
		owner := t.OwnerID
		mine := ts.endedBytes[owner] > ts.opts.EndedOutputPerOwner || ts.endedNum[owner] > ts.opts.MaxEndedPerOwner
		tooMany := ts.endedNum[owner] > ts.opts.MaxEndedPerOwner
		if !mine {
			if ts.endedAll <= ts.opts.EndedOutput && ts.endedNumAll <= ts.opts.MaxEnded {
				break
			}
			tooMany = ts.endedNumAll > ts.opts.MaxEnded
		}
		// The first ended with output left, and the first ended but t (a terminal is
		// forgotten by another's end, never by its own: it is not done ending).
		var firstOut, first *Terminal
		for _, o := range ts.byID {
			if o.endedN == 0 || (mine && o.OwnerID != owner) {
				continue
			}
			if o.keptOut > 0 && (firstOut == nil || o.endedN < firstOut.endedN) {
				firstOut = o
			}
			if o != t && (first == nil || o.endedN < first.endedN) {
				first = o
			}
		}
		if !tooMany && firstOut != nil {
			ts.dropOutputLocked(firstOut)
			drop = append(drop, firstOut)
		} else if first != nil {
			ts.unkeepLocked(first)
			forget = append(forget, first)
		} else {
			break
		}
	}
	ts.mu.Unlock()
	for _, o := range drop {
		dropRing(o.out)
		ts.opts.Logger.Info("terminals: dropped the output of an ended terminal, its owner's or this server's share of ended output full",
			"terminal", o.ID, "owner", o.OwnerName)
	}
	for _, o := range forget {
		// Ended: Close only forgets it (and lets its PTY go, if it has not yet).
		o.Close()
		ts.opts.Logger.Info("terminals: forgot an ended terminal, its owner's or this server's share of ended terminals full",
			"terminal", o.ID, "owner", o.OwnerName)
	}
}

// dropOutputLocked stops counting t's output among the ended terminals' (its command
// line stays counted), and says it was dropped; the caller drops it (dropRing).
func (ts *Terminals) dropOutputLocked(t *Terminal) {
	if ts.endedBytes[t.OwnerID] -= t.keptOut; ts.endedBytes[t.OwnerID] <= 0 {
		delete(ts.endedBytes, t.OwnerID)
	}
	ts.endedAll -= t.keptOut
	t.kept -= t.keptOut
	t.keptOut = 0
	t.outputDropped.Store(true)
}

// unkeepLocked stops counting t among the ended terminals.
func (ts *Terminals) unkeepLocked(t *Terminal) {
	if t.endedN == 0 {
		return
	}
	if ts.endedBytes[t.OwnerID] -= t.kept; ts.endedBytes[t.OwnerID] <= 0 {
		delete(ts.endedBytes, t.OwnerID)
	}
	ts.endedAll -= t.kept
	if ts.endedNum[t.OwnerID]--; ts.endedNum[t.OwnerID] <= 0 {
		delete(ts.endedNum, t.OwnerID)
	}
	ts.endedNumAll--
	t.kept, t.keptOut, t.endedN = 0, 0, 0
}

// ringSize is the memory r's bytes take.
func ringSize(r *ring) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return cap(r.buf)
}

// dropRing lets r's bytes go: a ring of no capacity keeps none, and its indexes go on
// (reading finds nothing before its end).
func dropRing(r *ring) {
	r.mu.Lock()
	r.buf, r.cap = nil, 0
	r.wakeLocked()
	r.mu.Unlock()
}

// OutputDropped reports whether the output of the ended terminal was dropped before
// KeepEnded, its owner's (or the server's) share of ended terminals' output full.
func (t *Terminal) OutputDropped() bool { return t.outputDropped.Load() }

// Output is the terminal's output from index from on (see ring.From).
func (t *Terminal) Output(from int64) (data []byte, at, next int64) { return t.out.From(from) }

// Notify wakes the caller when there is new output.
func (t *Terminal) Notify() (<-chan struct{}, func()) { return t.out.Notify() }

// Done closes when the terminal's process ended.
func (t *Terminal) Done() <-chan struct{} { return t.done }

// Exited reports whether the terminal's process ended.
func (t *Terminal) Exited() bool {
	select {
	case <-t.done:
		return true
	default:
		return false
	}
}

// ExitCode is the process's exit code once Exited: -1 when it was killed by a signal,
// or 128+n when confined (the namespace's init reports its death by signal n as a shell does).
func (t *Terminal) ExitCode() int {
	<-t.done
	return t.exit
}

// Size is the terminal's size.
func (t *Terminal) Size() (cols, rows uint16) {
	t.inMu.Lock()
	defer t.inMu.Unlock()
	return t.cols, t.rows
}

// Resize sets a PTY's size.
func (t *Terminal) Resize(cols, rows int) error {
	if t.ptmx == nil {
		return errors.New("a command has no terminal size; only a PTY session can be resized")
	}
	if cols < 2 || rows < 2 || cols > 1000 || rows > 1000 {
		return fmt.Errorf("size %dx%d: cols and rows must be between 2 and 1000", cols, rows)
	}
	if t.Exited() {
		return nil // nothing to lay out again; its page keeps saying how it ended
	}
	// The size shown and the kernel's are set under one lock: two windows resizing at
	// once could otherwise leave the pages showing one size and the shell laying out another.
	t.inMu.Lock()
	err := t.ptyControl(func(fd int) error {
		return unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Col: uint16(cols), Row: uint16(rows)})
	})
	if err == nil {
		t.cols, t.rows = uint16(cols), uint16(rows)
	}
	t.inMu.Unlock()
	t.out.Wake() // the pages that follow its size learn it now, not with the next output
	return err
}

// ptyControl runs f on the PTY's master. Not through Fd: the master is closed once the
// session ended, and its number may be another file's by then; this fails instead.
func (t *Terminal) ptyControl(f func(fd int) error) error {
	rc, err := t.ptmx.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = f(int(fd)) }); err != nil {
		return errors.New("the terminal has ended")
	}
	return ferr
}

// Echo reports whether what is typed shows: false at a password prompt, where the
// terminal is in canonical (line) mode with ECHO off (read -s, sudo, passwd, ssh).
// A line editor such as bash's readline turns both ICANON and ECHO off and echoes
// by itself, so that counts as echoing.
func (t *Terminal) Echo() bool {
	if t.ptmx == nil {
		return true
	}
	var tio *unix.Termios
	err := t.ptyControl(func(fd int) (err error) {
		tio, err = unix.IoctlGetTermios(fd, unix.TCGETS)
		return err
	})
	if err != nil {
		return true
	}
	return tio.Lflag&unix.ECHO != 0 || tio.Lflag&unix.ICANON == 0
}

// Input types s into a PTY. The lines it completes are recorded first (OnInput, as
// "[hidden input]" when the terminal did not echo them, or when they followed another
// line of s: TypedLine): keys that would run a command whose record cannot be written
// are not typed.
func (t *Terminal) Input(who TerminalCaller, s string) error {
	if t.ptmx == nil {
		return errors.New("a command takes no input; use a PTY session (create_session)")
	}
	if t.Exited() {
		return errors.New("the terminal has ended")
	}
	// Written and followed under one lock: two typists' keys are audited in the order
	// the shell got them.
	t.typing.Lock()
	defer t.typing.Unlock()
	// Read under typing: the state the first line of s meets, once the keys typed before
	// were handed over. What the lines after it meet depends on what the first runs.
	echo := t.Echo()
	if t.writing.Load() {
		// Checked before anything is recorded: what is refused here is neither typed nor
		// audited as typed.
		return errors.New("not typed: the terminal's program has not read what was typed before; wait for it, or interrupt it")
	}
	t.inMu.Lock()
	before, pageKeys := t.inLine.clone(), t.inPage
	t.inMu.Unlock()
	// The router rated a call's input alone; the line it joins is known here, where the
	// terminal runs (a call another replica took is forwarded here). Keys typed on the
	// page are a person's, rated by no one, so a call that joins a line holding them is
	// rated with them (an agent's Enter must not run the rm -rf a person left typed); a
	// call let through at HIGH was approved at the level every joined reason carries.
	// Rated outside inMu: only Input (under typing) changes inLine.
	if who.Source != BrowserSource && risk.Level(who.Level) != risk.High {
		if why := joinedRisk(&before, s, pageKeys); why != "" {
			return fmt.Errorf("not typed: with what its line already holds, %s, which rating each input alone "+
				"does not show; type the whole line in one send_input (Ctrl-U, \\u0015, first clears what the line "+
				"holds), so that it is rated as a whole", why)
		}
	}
	t.inMu.Lock()
	lines := t.inLine.feed([]byte(s))
	wasPage := t.inPage
	switch {
	case t.inLine.empty():
		t.inPage = false
	case who.Source == BrowserSource:
		t.inPage = true
	case risk.Level(who.Level) == risk.High:
		t.inPage = false // approved at the level of all it joined
	}
	t.inMu.Unlock()
	if f := t.ts.opts.OnInput; f != nil && len(lines) > 0 {
		typed := make([]TypedLine, len(lines))
		for i, l := range lines {
			text := l.text
			if l.shell {
				text = "[edited with the shell's history, completion or editing keys] " + text
			}
			// What the keys spell when no line editor reads them (sh, set +o emacs, a read
			// loop), when that differs: the shell may have run that instead.
			if len(l.others) > 0 {
				other := make([]string, len(l.others))
				for j, o := range l.others {
					other[j] = strconv.Quote(o)
				}
				text += " [without line editing: " + strings.Join(other, " or ") + "]"
			}
			if l.cut {
				text += fmt.Sprintf(" [cut: longer than %d characters]", maxAuditLine)
			}
			typed[i] = TypedLine{Text: text, EchoOff: !echo, AfterLine: i > 0 && text != ""}
		}
		if err := f(t, who, typed); err != nil {
			t.inMu.Lock()
			t.inLine, t.inPage = before, wasPage // not typed: the line stays as the shell has it
			t.inMu.Unlock()
			return fmt.Errorf("not typed: the line could not be recorded in the audit log (%w); try again", err)
		}
	}
	t.touch()
	w := keysWrite{b: []byte(s), done: make(chan error, 1)}
	select {
	case t.keys <- w: // at once: the writer is idle (checked above, under typing)
	case <-t.gone:
		return errors.New("the terminal has ended")
	}
	timeout := time.NewTimer(t.ts.opts.InputWait)
	defer timeout.Stop()
	select {
	case err := <-w.done:
		if err != nil {
			return fmt.Errorf("write to the terminal: %w", err)
		}
		return nil
	case <-timeout.C:
		// Recorded and handed over: it is typed once the program reads.
		return errors.New("typed, but the terminal's program is not reading it yet; more input is refused until it does")
	}
}

// Close ends the terminal: SIGTERM to its session's processes, 100 ms, SIGKILL;
// then forgets it.
func (t *Terminal) Close() {
	t.once.Do(func() {
		select {
		case <-t.gone: // ended by itself; its session id may be someone else's by now
		default:
			endSession(t.sid, t.ts.marker, closeGrace, t.done)
			select {
			case <-t.gone:
			case <-time.After(2 * time.Second):
			}
		}
		if t.ptmx != nil {
			_ = t.ptmx.Close()
		}
		t.forget()
	})
}

// End ends the terminal's process as close_session asks, and keeps the terminal listed,
// its output readable, for KeepEnded like one that ended by itself (a reviewer reads
// what it did afterwards).
func (t *Terminal) End() {
	select {
	case <-t.gone:
		return
	default:
	}
	if !t.Exited() {
		t.closed.Store(true) // set before its end is announced
	}
	endSession(t.sid, t.ts.marker, closeGrace, t.done)
	select {
	case <-t.gone:
	case <-time.After(2 * time.Second):
		t.Close() // it would not end: drop it as before
	}
}

// Closed reports whether the terminal was ended by close_session or by Toolwarden (its
// exit code then is the signal's, not the program's own).
func (t *Terminal) Closed() bool { return t.closed.Load() }

// EndedOwnerDisabled is the ended_reason of the record of a terminal Toolwarden ended
// because its owner's account was disabled.
const EndedOwnerDisabled = "owner_disabled"

// EndOwnedBy ends the running terminals of this process that userID owns, as
// close_session does, because their account was disabled: what they left running must
// not outlive their access. Each says so in its output, its record and the audit log
// (ended by the system). It returns those it ended, once they did. Until Readmit, no
// terminal of theirs starts here: one whose start was under way (its call passed the
// router before the account was disabled) is refused as it is about to be added.
func (ts *Terminals) EndOwnedBy(userID string) []*Terminal {
	if userID == "" {
		return nil // the system's terminals (started by no person)
	}
	var ended []*Terminal
	// Barred and listed under one lock: a terminal add lists before it is seen here,
	// one after is refused.
	ts.mu.Lock()
	ts.barred[userID] = true
	for _, t := range ts.byID {
		if t.OwnerID == userID && !t.Exited() {
			ended = append(ended, t)
		}
	}
	ts.mu.Unlock()
	endAll(ended, EndedOwnerDisabled, "the owner's account was disabled")
	return ended
}

// EndedOwnerRevoked is the ended_reason of the record of a terminal Toolwarden ended
// because its owner may no longer call terminal_operations (the tool or its server
// disabled, their role or their own permission changed), their account still enabled.
const EndedOwnerRevoked = "owner_revoked"

// EndRevoked ends the running terminals of this process that userID owns, as
// close_session does, because they may no longer call terminal_operations: a session
// busy with a loop, or a background command of an hour, would otherwise go on for as
// long as it runs, its idle timeout never reached. Each says so in its output, its
// record and the audit log (ended by the system). It returns those it ended, once they
// did. New ones are not barred here: the router refuses the calls that would start them.
func (ts *Terminals) EndRevoked(userID string) []*Terminal {
	if userID == "" {
		return nil
	}
	var ended []*Terminal
	ts.mu.Lock()
	for _, t := range ts.byID {
		if t.OwnerID == userID && !t.Exited() {
			ended = append(ended, t)
		}
	}
	ts.mu.Unlock()
	if len(ended) == 0 {
		return nil
	}
	endAll(ended, EndedOwnerRevoked, ended[0].OwnerName+" may no longer use "+terminalTool)
	return ended
}

// EndedByAdmin is the ended_reason of the record of a terminal an administrator ended
// from the /terminals page (EndBy).
const EndedByAdmin = "ended_by_admin"

// ErrTerminalEnded: the terminal had ended already.
var ErrTerminalEnded = errors.New("the terminal has ended")

// EndBy ends the terminal as close_session does, at by's request (an administrator on
// its page): its output, its record and the audit log (by's row, written with the
// record) say so. ErrTerminalEnded when it had ended already.
func (t *Terminal) EndBy(by audit.Actor) error {
	if t.Exited() {
		return ErrTerminalEnded
	}
	who := by.Name
	if who == "" {
		who = "an administrator"
	}
	// Before it ends: its record and audit row are written as it does.
	t.endedBy.Store(&by)
	endAll([]*Terminal{t}, EndedByAdmin, "ended by "+who)
	return nil
}

// endAll ends terms at once for reason (their records' ended_reason), each saying
// note in its output, and returns once they ended.
func endAll(terms []*Terminal, reason, note string) {
	slices.SortFunc(terms, func(a, b *Terminal) int { return a.Started.Compare(b.Started) })
	var wg sync.WaitGroup
	for _, t := range terms {
		t.endedFor.Store(&reason) // before it ends: its record is written as it does
		_, _ = t.out.Write([]byte("\n[ended: " + note + "]\n"))
		wg.Go(t.End)
	}
	wg.Wait()
}

// Readmit lets userID start terminals again, their account enabled again (EndOwnedBy
// barred them).
func (ts *Terminals) Readmit(userID string) {
	ts.mu.Lock()
	delete(ts.barred, userID)
	ts.mu.Unlock()
}

// forget drops the terminal from the list.
func (t *Terminal) forget() {
	t.ts.mu.Lock()
	gone := t.ts.byID[t.ID] == t
	if gone {
		delete(t.ts.byID, t.ID)
		t.ts.unkeepLocked(t)
	}
	t.ts.mu.Unlock()
	if gone {
		t.ts.changed(t, TerminalClosed)
	}
}

// Close ends every terminal; no new ones start (Toolwarden is stopping).
func (ts *Terminals) Close() {
	ts.mu.Lock()
	ts.closed = true
	all := make([]*Terminal, 0, len(ts.byID))
	for _, t := range ts.byID {
		all = append(all, t)
	}
	ts.mu.Unlock()
	var wg sync.WaitGroup
	for _, t := range all {
		wg.Go(t.Close)
	}
	wg.Wait()
	// What left its terminal's session (setsid, nohup with a new session) goes too.
	if n := endRun(ts.records, ts.marker); n > 0 {
		ts.opts.Logger.Warn("terminals: killed processes that left their terminal's session", "processes", n)
	}
}

// CloseWith ends the terminals when ctx ends.
func (ts *Terminals) CloseWith(ctx context.Context) {
	go func() {
		<-ctx.Done()
		ts.Close()
	}()
}

// TerminalsTopic is where every terminal's events are (administrators and auditors
// follow it); OwnerTopic is where one person's terminals' events are.
const TerminalsTopic = "terminals"

const ownerPrefix = "terminals:"

// OwnerTopic is the topic of the terminals userID owns.
func OwnerTopic(userID string) string { return ownerPrefix + userID }

// OwnerOfTopic is the person an OwnerTopic is about.
func OwnerOfTopic(topic string) (string, bool) {
	u, ok := strings.CutPrefix(topic, ownerPrefix)
	return u, ok && u != ""
}
