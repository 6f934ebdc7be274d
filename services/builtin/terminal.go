package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/toolname"
)

// Limits of run_command.
const (
	defaultCommandTimeout = 60 * time.Second
	maxCommandTimeout     = time.Hour
	defaultOutputCap      = 64 << 10
	maxOutputCap          = 1 << 20
)

// commandTimeout is how long run_command lets its command run, given its timeout
// argument in seconds (0 when absent).
func commandTimeout(seconds int) time.Duration {
	if seconds > 0 {
		return min(time.Duration(seconds)*time.Second, maxCommandTimeout)
	}
	return defaultCommandTimeout
}

// runCommandArgs are run_command's arguments.
type runCommandArgs struct {
	Command          string `json:"command"`
	Timeout          int    `json:"timeout"`
	Background       bool   `json:"background"`
	MaxOutput        int    `json:"maxOutput"`
	WorkingDirectory string `json:"workingDirectory"`
}

// CommandTimeout is how long the terminal tool's call with args waits for its
// command: true only for a foreground run_command, whose own timeout (up to an hour)
// is what bounds it, so the router must not cut it off sooner.
func CommandTimeout(args json.RawMessage) (time.Duration, bool) {
	var in struct {
		Operation string `json:"operation"`
		runCommandArgs
	}
	if json.Unmarshal(args, &in) != nil || in.Operation != "run_command" || in.Background {
		return 0, false
	}
	return commandTimeout(in.Timeout), true
}

// terminalTool is the terminal tool's name on the built-in server, and TerminalToolName
// its qualified name: typing into one of its terminals from a page takes what calling
// it takes (router.Admits).
const terminalTool = "terminal_operations"

var TerminalToolName = toolname.Join(toolname.Builtin, terminalTool)

// TerminalTool is the tool terminal_operations (seed 000 §5): run_command, and PTY
// sessions that keep a shell across calls, one per conversation and working directory.
func TerminalTool(ts *Terminals) Tool {
	sid := map[string]any{"type": "string", "minLength": 1, "maxLength": 64,
		"description": "the session's id (create_session's sessionId, or a background run_command's)"}
	wd := map[string]any{"type": "string", "maxLength": 1024,
		"description": "a directory inside the conversation's workspace, relative to it (default: the workspace)"}
	tool := Tool{
		Name:  terminalTool,
		Title: "Terminal",
		Description: "Run shell commands and keep interactive terminal (PTY) sessions in the conversation's workspace. " +
			"A PTY session is bash -il on a pseudo-terminal (TERM=xterm-256color); its output is kept in a bounded buffer addressed by absolute byte indexes: " +
			"read it with get_output from the nextIndex you last got. People can watch and type into it on Toolwarden's /terminals page.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: new(true), OpenWorldHint: new(true)},
	}
	tool.Operations = []Operation{
		{
			Name:        "run_command",
			Description: "run a command with bash -c in the workspace and return its output and exit code; with background, return a sessionId at once and read the output later with get_output",
			Properties: map[string]any{
				"command": map[string]any{"type": "string", "minLength": 1, "maxLength": 100000, "description": "the command line (bash)"},
				"timeout": map[string]any{"type": "integer", "minimum": 1, "maximum": int(maxCommandTimeout / time.Second),
					"description": "seconds before the command is killed (default 60)"},
				"background": map[string]any{"type": "boolean", "description": "return at once with a sessionId; the output is read with get_output"},
				"maxOutput": map[string]any{"type": "integer", "minimum": 1024, "maximum": maxOutputCap,
					"description": "bytes of output kept (the last ones; default 65536)"},
				"workingDirectory": wd,
			},
			Required: []string{"command"},
			Display:  func(a map[string]any) string { return "Running: " + clip(str(a["command"]), 60) },
			Run: func(ctx context.Context, c Call, args json.RawMessage) (*mcp.CallToolResult, error) {
				var in runCommandArgs
				if err := json.Unmarshal(args, &in); err != nil {
					return errorResult(err.Error()), nil
				}
				dir, err := workDir(c.Workspace, in.WorkingDirectory)
				if err != nil {
					return errorResult(err.Error()), nil
				}
				timeout := commandTimeout(in.Timeout)
				capBytes := defaultOutputCap
				if in.MaxOutput > 0 {
					capBytes = min(in.MaxOutput, maxOutputCap)
				}
				t, err := ts.Start(caller(c), c.ConversationID, dir, in.Command, timeout, capBytes)
				if err != nil {
					return errorResult(err.Error()), nil
				}
				if in.Background {
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "started in the background as " + t.ID + "; read its output with get_output"}},
						StructuredContent: map[string]any{"sessionId": t.ID, "background": true}}, nil
				}
				select {
				case <-t.Done():
				case <-ctx.Done():
					t.Close()
					return errorResult("the call was cancelled; the command was killed"), nil
				}
				code := t.ExitCode()
				data, at, next := t.Output(0)
				t.Close()
				text := string(data)
				if at > 0 {
					text = fmt.Sprintf("[the first %d bytes of output were dropped]\n", at) + text
				}
				res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text + fmt.Sprintf("\n[exit code %d]", code)}},
					StructuredContent: map[string]any{"exitCode": code, "output": string(data), "truncated": at > 0, "bytes": next}}
				res.IsError = code != 0
				return res, nil
			},
		},
		{
			Name:        "create_session",
			Description: "open a PTY session (bash -il) in the workspace, or return the conversation's running one when it is in the same directory; answers sessionId",
			Properties:  map[string]any{"workingDirectory": wd},
			Display:     func(map[string]any) string { return "Creating terminal session" },
			Run: func(_ context.Context, c Call, args json.RawMessage) (*mcp.CallToolResult, error) {
				var in struct {
					WorkingDirectory string `json:"workingDirectory"`
				}
				if err := json.Unmarshal(args, &in); err != nil {
					return errorResult(err.Error()), nil
				}
				dir, err := workDir(c.Workspace, in.WorkingDirectory)
				if err != nil {
					return errorResult(err.Error()), nil
				}
				t, reused, err := ts.OpenPTY(caller(c), c.ConversationID, dir)
				if err != nil {
					return errorResult(err.Error()), nil
				}
				msg := "created terminal session " + t.ID
				if reused {
					msg = "reusing terminal session " + t.ID + " (same working directory)"
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: msg}},
					StructuredContent: map[string]any{"sessionId": t.ID, "reused": reused, "nextIndex": t.out.End()}}, nil
			},
		},
		{
			Name:        "send_input",
			Description: "type input into a PTY session (end a command with \\n)",
			// writeOnly: what is typed may be a password at a hidden prompt, so the call's
			// records mask it (the router) and its line does not show it; the terminal's
			// own terminal.input entry, which knows whether echo was off, keeps the lines.
			Properties: map[string]any{"sessionId": sid,
				"input": map[string]any{"type": "string", "minLength": 1, "maxLength": 100000, "writeOnly": true, "description": "what to type"}},
			Required: []string{"sessionId", "input"},
			Display: func(a map[string]any) string {
				return fmt.Sprintf("Sending to terminal: [input, %d characters]", utf8.RuneCountInString(str(a["input"])))
			},
			Run: func(_ context.Context, c Call, args json.RawMessage) (*mcp.CallToolResult, error) {
				var in struct {
					SessionID string `json:"sessionId"`
					Input     string `json:"input"`
				}
				t, res := ts.lookup(c, args, &in, func() string { return in.SessionID })
				if res != nil {
					return res, nil
				}
				if err := t.Input(caller(c), in.Input); err != nil {
					return errorResult(err.Error()), nil
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sent"}},
					StructuredContent: map[string]any{"sessionId": t.ID, "nextIndex": t.out.End()}}, nil
			},
		},
		{
			Name:        "get_output",
			Description: "a session's output from fromIndex on (default 0), with nextIndex to ask from next time; also whether it ended and its exit code",
			Properties: map[string]any{"sessionId": sid,
				"fromIndex": map[string]any{"type": "integer", "minimum": 0, "description": "the absolute index to read from (a previous nextIndex)"}},
			Required: []string{"sessionId"},
			Display:  func(map[string]any) string { return "Reading terminal output" },
			Run: func(_ context.Context, c Call, args json.RawMessage) (*mcp.CallToolResult, error) {
				var in struct {
					SessionID string `json:"sessionId"`
					FromIndex int64  `json:"fromIndex"`
				}
				t, res := ts.lookup(c, args, &in, func() string { return in.SessionID })
				if res != nil {
					return res, nil
				}
				return outputResult(t, in.FromIndex), nil
			},
		},
		{
			Name:        "get_history",
			Description: "all the output a session still keeps",
			Properties:  map[string]any{"sessionId": sid},
			Required:    []string{"sessionId"},
			Display:     func(map[string]any) string { return "Reading terminal history" },
			Run: func(_ context.Context, c Call, args json.RawMessage) (*mcp.CallToolResult, error) {
				var in struct {
					SessionID string `json:"sessionId"`
				}
				t, res := ts.lookup(c, args, &in, func() string { return in.SessionID })
				if res != nil {
					return res, nil
				}
				return outputResult(t, 0), nil
			},
		},
		{
			Name:        "resize_session",
			Description: "set a PTY session's size in columns and rows",
			Properties: map[string]any{"sessionId": sid,
				"cols": map[string]any{"type": "integer", "minimum": 2, "maximum": 1000},
				"rows": map[string]any{"type": "integer", "minimum": 2, "maximum": 1000}},
			Required: []string{"sessionId", "cols", "rows"},
			Display:  func(a map[string]any) string { return fmt.Sprintf("Resizing terminal to %vx%v", a["cols"], a["rows"]) },
			Run: func(_ context.Context, c Call, args json.RawMessage) (*mcp.CallToolResult, error) {
				var in struct {
					SessionID  string `json:"sessionId"`
					Cols, Rows int
				}
				t, res := ts.lookup(c, args, &in, func() string { return in.SessionID })
				if res != nil {
					return res, nil
				}
				if err := t.Resize(in.Cols, in.Rows); err != nil {
					return errorResult(err.Error()), nil
				}
				return textResult(fmt.Sprintf("resized to %dx%d", in.Cols, in.Rows)), nil
			},
		},
		{
			Name:        "close_session",
			Description: "end a session or background command: SIGTERM to its processes, then SIGKILL after 100 ms",
			Properties:  map[string]any{"sessionId": sid},
			Required:    []string{"sessionId"},
			Display:     func(map[string]any) string { return "Closing terminal session" },
			Run: func(_ context.Context, c Call, args json.RawMessage) (*mcp.CallToolResult, error) {
				var in struct {
					SessionID string `json:"sessionId"`
				}
				t, res := ts.lookup(c, args, &in, func() string { return in.SessionID })
				if res != nil {
					return res, nil
				}
				t.End()
				return textResult("closed " + t.ID), nil
			},
		},
		{
			Name:        "list_sessions",
			Description: "the conversation's sessions and background commands",
			Display:     func(map[string]any) string { return "Listing terminal sessions" },
			Run: func(ctx context.Context, c Call, _ json.RawMessage) (*mcp.CallToolResult, error) {
				var out []map[string]any
				var b strings.Builder
				for _, t := range ts.List() {
					if t.ConversationID != c.ConversationID {
						continue
					}
					s := map[string]any{"sessionId": t.ID, "kind": t.Kind, "exited": t.Exited(), "command": t.Command}
					if ts.opts.Store != nil {
						s["replica"] = ts.opts.Store.Replica()
					}
					out = append(out, s)
					fmt.Fprintf(&b, "%s %s exited=%v %s\n", t.ID, t.Kind, t.Exited(), t.Command)
				}
				if ts.opts.Store != nil {
					others, err := ts.opts.Store.Others(ctx, ts.opts.KeepEnded)
					if err != nil {
						return errorResult(err.Error()), nil
					}
					for _, r := range others {
						if r.ConversationID != c.ConversationID {
							continue
						}
						out = append(out, map[string]any{"sessionId": r.ID, "kind": r.Kind, "exited": r.Ended(), "command": r.Command, "replica": r.Replica})
						fmt.Fprintf(&b, "%s %s exited=%v %s (on replica %s)\n", r.ID, r.Kind, r.Ended(), r.Command, r.Replica)
					}
				}
				if b.Len() == 0 {
					b.WriteString("no sessions")
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: b.String()}},
					StructuredContent: map[string]any{"sessions": out}}, nil
			},
		},
	}
	// The operations on one session run where the session is: this process keeps them
	// (RunOp), and a session another replica runs is sent there (Forward).
	ts.ops = map[string]func(context.Context, Call, json.RawMessage) (*mcp.CallToolResult, error){}
	for i, op := range tool.Operations {
		if !slices.Contains(sessionOps, op.Name) {
			continue
		}
		local, name := op.Run, op.Name
		ts.ops[name] = local
		tool.Operations[i].Run = func(ctx context.Context, c Call, args json.RawMessage) (*mcp.CallToolResult, error) {
			if res, ok := ts.elsewhere(ctx, c, name, args); ok {
				return res, nil
			}
			return local(ctx, c, args)
		}
	}
	return tool
}

// sessionOps are the operations that name a session (sessionId).
var sessionOps = []string{"send_input", "get_output", "get_history", "resize_session", "close_session"}

// RunOp runs operation op of terminal_operations on a session of this process (a
// call another replica forwarded; docs/api.md, the internal terminal route): never
// forwarded again.
func (ts *Terminals) RunOp(ctx context.Context, c Call, op string, args json.RawMessage) (*mcp.CallToolResult, error) {
	run, ok := ts.ops[op]
	if !ok {
		return errorResult(fmt.Sprintf("operation: %q is not an operation on a session (%s)", op, strings.Join(sessionOps, ", "))), nil
	}
	return run(ctx, c, args)
}

// elsewhere runs op on the replica that runs the session args name when that is
// another replica: ok false when the session is this process's, or nobody's.
func (ts *Terminals) elsewhere(ctx context.Context, c Call, op string, args json.RawMessage) (*mcp.CallToolResult, bool) {
	store := ts.opts.Store
	if store == nil {
		return nil, false
	}
	var in struct {
		SessionID string `json:"sessionId"`
	}
	if json.Unmarshal(args, &in) != nil || in.SessionID == "" || ts.Get(in.SessionID) != nil {
		return nil, false
	}
	rec, err := store.Get(ctx, in.SessionID)
	if err != nil || rec.Local || rec.ConversationID != c.ConversationID {
		return nil, false // "no such session in this conversation"
	}
	gone := fmt.Sprintf("sessionId: session %s ran on replica %s, which stopped or is not answering (its shell or command ended with it). Create a new session with create_session", rec.ID, rec.Replica)
	if rec.EndedReason == "replica_stopped" || ts.opts.Forward == nil {
		return errorResult(gone), true
	}
	res, err := ts.opts.Forward(ctx, rec, op, c, args)
	switch {
	case errors.Is(err, ErrReplicaGone):
		return errorResult(gone), true
	case errors.Is(err, ErrOwnerForgot):
		return nil, false // no such session, as for one of this replica's
	case err != nil && (op == "send_input" || op == "close_session") && !errors.Is(err, ErrNotRun):
		// The owner may have run it before its answer was lost (a timeout, a connection
		// cut): typing the input twice, or closing twice, is not the same as once.
		return errorResult(fmt.Sprintf("sessionId: session %s runs on replica %s, which did not answer; the %s may have run there: "+
			"check with get_output before trying again", rec.ID, rec.Replica, op)), true
	case err != nil:
		// Forward logs why: the owner's address and refusal are no business of the agent.
		return errorResult(fmt.Sprintf("sessionId: session %s runs on replica %s, which did not answer; try again", rec.ID, rec.Replica)), true
	}
	return res, true
}

func caller(c Call) TerminalCaller {
	return TerminalCaller{UserID: c.UserID, UserName: c.UserName, Source: c.Source, ActorKind: c.ActorKind, TokenID: c.TokenID, Level: c.Level}
}

// lookup decodes args into in and finds the session it names, which must be the
// conversation's own; res is the error result otherwise.
func (ts *Terminals) lookup(c Call, args json.RawMessage, in any, id func() string) (*Terminal, *mcp.CallToolResult) {
	if err := json.Unmarshal(args, in); err != nil {
		return nil, errorResult(err.Error())
	}
	t := ts.Get(id())
	if t == nil || t.ConversationID != c.ConversationID {
		return nil, errorResult(fmt.Sprintf("sessionId: there is no session %q in this conversation; create one with create_session", id()))
	}
	return t, nil
}

func outputResult(t *Terminal, from int64) *mcp.CallToolResult {
	data, at, next := t.Output(from)
	st := map[string]any{"sessionId": t.ID, "output": string(data), "fromIndex": at, "nextIndex": next,
		"truncated": at > from, "exited": t.Exited()}
	text := string(data)
	if at > from {
		text = fmt.Sprintf("[output before index %d is no longer kept]\n", at) + text
	}
	if t.OutputDropped() {
		st["outputDropped"] = true
		text += "[its output was dropped: ended terminals keep a bounded amount of output, per person and per server, and this one ended before the others]"
	}
	if t.Exited() {
		st["exitCode"] = t.ExitCode()
		text += fmt.Sprintf("\n[ended, exit code %d]", t.ExitCode())
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: st}
}

// workDir is rel inside the workspace ws (a directory that exists, no symlink out of it).
func workDir(ws, rel string) (string, error) {
	if rel == "" || rel == "." {
		return ws, nil
	}
	if !filepath.IsLocal(rel) {
		return "", errors.New("workingDirectory: must be a path inside the workspace, relative to it")
	}
	dir := filepath.Join(ws, rel)
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", fmt.Errorf("workingDirectory: %v", err)
	}
	realWS, err := filepath.EvalSymlinks(ws)
	if err != nil {
		return "", err
	}
	if r, err := filepath.Rel(realWS, real); err != nil || !filepath.IsLocal(r) && r != "." {
		return "", errors.New("workingDirectory: leads out of the workspace")
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		return "", errors.New("workingDirectory: not a directory")
	}
	return real, nil
}
