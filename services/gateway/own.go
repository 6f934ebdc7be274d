package gateway

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The gateway's own tools, listed after every upstream tool. The server name
// toolwarden is reserved, so no registered server's tool can take these names.
const (
	AwaitTool   = "toolwarden__await_execution"
	PendingTool = "toolwarden__list_pending"
)

var readOnly = &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)}

var ownTools = []*mcp.Tool{
	{
		Name:  AwaitTool,
		Title: "Wait for an approval",
		Description: "Wait for a person's decision on one of your calls that needed approval, and return its real result, " +
			"the rejection with the reviewer's reason, or that it still waits. Give the execution_id that a pending result named.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"execution_id":{"type":"string","format":"uuid",` +
			`"description":"The execution a pending result named"}},"required":["execution_id"],"additionalProperties":false}`),
		Annotations: readOnly,
	},
	{
		Name:        PendingTool,
		Title:       "Your calls waiting for approval",
		Description: "List your calls that wait for a person's decision in Toolwarden, with their execution ids and approval links.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`),
		Annotations: readOnly,
	},
}

func isOwn(name string) bool { return name == AwaitTool || name == PendingTool }
