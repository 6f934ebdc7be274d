package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Question is what user_collaboration asks the person behind a call.
type Question struct {
	Call               Call
	Prompt             string
	AuthorizeOperation string
	Target             string
	OneTime            bool
}

// Answer is how a question ended.
type Answer struct {
	ID       string
	Status   string // answered, declined, cancelled, expired
	Response string
	Approved bool
	GrantID  string
}

// Asker asks a person and waits for the answer (services/grants).
type Asker interface {
	Ask(ctx context.Context, q Question) (Answer, error)
}

// UserCollaboration is the tool user_collaboration (seed 000 §4): it asks the person
// behind the call and blocks until they answer in the browser (or the caller gives up).
// With authorize_operation, an approving answer grants the conversation that operation
// (optionally on target) for a while.
func UserCollaboration(a Asker) Tool {
	return Tool{
		Name:  "user_collaboration",
		Title: "Ask the user",
		// grants.Unanswered is the day a question waits (a test keeps the two in step).
		Description: "Ask the person you work for a question and wait for the answer (up to a day; unanswered, it expires). " +
			"To do something that needs their permission (a write outside the conversation's workspace), " +
			"name it in authorize_operation (\"file_operations.create_file\") and, optionally, target (the path); " +
			"an approving answer allows it for 5 minutes.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)},
		Operations: []Operation{{
			Properties: map[string]any{
				"prompt": map[string]any{"type": "string", "minLength": 1, "maxLength": 10000, "description": "the question"},
				"authorize_operation": map[string]any{"type": "string", "maxLength": 200,
					"description": "the operation to allow if the answer approves (file_operations.create_file)"},
				"target":       map[string]any{"type": "string", "maxLength": 4096, "description": "the path or command the operation is for"},
				"one_time_use": map[string]any{"type": "boolean", "description": "the permission is good for one use only"},
			},
			Required: []string{"prompt"},
			Display:  func(a map[string]any) string { return "Asking the user: " + clip(str(a["prompt"]), 60) },
			Run: func(ctx context.Context, c Call, args json.RawMessage) (*mcp.CallToolResult, error) {
				if a == nil {
					return errorResult("nobody can be asked here"), nil
				}
				var in struct {
					Prompt             string `json:"prompt"`
					AuthorizeOperation string `json:"authorize_operation"`
					Target             string `json:"target"`
					OneTime            bool   `json:"one_time_use"`
				}
				if err := json.Unmarshal(args, &in); err != nil {
					return errorResult("arguments: " + err.Error()), nil
				}
				target, err := askedTarget(in.AuthorizeOperation, in.Target, c.Workspace)
				if err != nil {
					return errorResult(err.Error()), nil
				}
				ans, err := a.Ask(ctx, Question{Call: c, Prompt: in.Prompt, AuthorizeOperation: in.AuthorizeOperation,
					Target: target, OneTime: in.OneTime})
				if err != nil {
					return errorResult(err.Error()), nil
				}
				return answerResult(ans, in.AuthorizeOperation), nil
			},
		}},
	}
}

// fileOperations are the names of file_operations' operations, read from the tool (a
// Server that runs nothing builds it; its operations only close over it).
var fileOperations = sync.OnceValue(func() []string {
	var names []string
	for _, op := range (&Server{}).FileOperations().Operations {
		names = append(names, op.Name)
	}
	return names
})

// fileOperation reports whether authorize_operation op is file_operations' (by its full
// name, with or without the builtin__ prefix, the whole tool, or a bare operation's
// name, which a grant matches too): its target is then a path the guard matches.
func fileOperation(op string) bool {
	op = strings.TrimPrefix(strings.TrimSpace(op), "builtin__")
	tool, _, dotted := strings.Cut(op, ".")
	return tool == "file_operations" || !dotted && slices.Contains(fileOperations(), op)
}

// askedTarget is the target to ask for operation op: grants store it as given, and the
// guard matches a file operation's grant against the file's clean absolute path
// (resolve), so such a target is put in that form: an absolute one cleaned (".", "..",
// a trailing slash), a relative one resolved in the call's workspace as the guard reads
// one. With no workspace a relative one is refused: stored as written it would never
// match, and the retry the person approved would be refused again. Other targets (a
// command) stay as written.
func askedTarget(op, target, workspace string) (string, error) {
	switch {
	case target == "" || !fileOperation(op):
		return target, nil
	case filepath.IsAbs(target):
		return filepath.Clean(target), nil
	case workspace == "":
		return "", fmt.Errorf("target: %q is a relative path and this call has no workspace to resolve it in: "+
			"a file operation's target is the file's absolute path, as the authorization-required message names it; "+
			"or leave target out to allow the operation on any path", clip(target, 200))
	}
	return filepath.Join(workspace, target), nil
}

// answerResult says how the question ended, in words for the agent and as structured
// content.
func answerResult(a Answer, op string) *mcp.CallToolResult {
	var b strings.Builder
	switch a.Status {
	case "answered":
		fmt.Fprintf(&b, "User response: %s", a.Response)
		if a.GrantID != "" {
			fmt.Fprintf(&b, "\nThe user approved %s for this conversation; retry it now.", op)
		}
		b.WriteString("\nACTION REQUIRED: Process the response and continue.")
	case "declined":
		fmt.Fprintf(&b, "The user declined: %s", a.Response)
		if op != "" {
			fmt.Fprintf(&b, "\n%s was not allowed; do not retry it.", op)
		}
	case "cancelled":
		b.WriteString("The question was cancelled before the user answered.")
	default:
		fmt.Fprintf(&b, "The question ended without an answer (%s).", a.Status)
	}
	res := textResult(b.String())
	res.StructuredContent = map[string]any{"collaboration_id": a.ID, "status": a.Status, "response": a.Response,
		"approved": a.Approved, "grant_id": a.GrantID}
	res.IsError = a.Status == "cancelled" || a.Status == "expired"
	return res
}
