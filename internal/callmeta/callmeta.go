// Package callmeta is who makes a tool call and in which conversation, as the router
// knows it, carried to the built-in server (services/builtin) in the call's _meta: its
// workspaces, grants and collaborations are per conversation and per person. Only the
// built-in server is told (services/mcpclient); an external server learns nothing of
// Toolwarden's users.
package callmeta

import (
	"context"
	"encoding/json"
)

// Key is the _meta key of a call's Meta.
const Key = "toolwarden/call"

// Meta describes one call.
type Meta struct {
	ConversationID string `json:"conversation_id"`
	UserID         string `json:"user_id,omitempty"`
	UserName       string `json:"user_name,omitempty"`
	// ActorKind is who calls: "user" (a session) or "token" (an API token, TokenID);
	// the audit rows of what the call does name it as the call's own rows do.
	ActorKind string `json:"actor_kind,omitempty"`
	TokenID   string `json:"token_id,omitempty"`
	Role      string `json:"role,omitempty"`
	CallID    string `json:"call_id,omitempty"`
	// ExecutionID is the execution the call is a step of ("" for a direct call).
	ExecutionID string `json:"execution_id,omitempty"`
	// Source is the router's source (api, mcp, test_panel, execution).
	Source string `json:"source,omitempty"`
	// Expect is the fingerprint a previewed file write expects its file to have
	// (services/builtin, preview.go); "" for any other call.
	Expect string `json:"expect,omitempty"`
	// Level is the risk level the call was let through at (low, medium, high: approved
	// by policy, a confirm or a phrase): a terminal refuses a send_input whose joined
	// line rates above it, which the router could not see.
	Level string `json:"level,omitempty"`
}

type key struct{}

// With returns ctx carrying m.
func With(ctx context.Context, m Meta) context.Context { return context.WithValue(ctx, key{}, m) }

// From returns the Meta ctx carries.
func From(ctx context.Context) (Meta, bool) {
	m, ok := ctx.Value(key{}).(Meta)
	return m, ok
}

// Decode reads a Meta from a call's _meta map (as the SDK decoded it).
func Decode(meta map[string]any) (Meta, bool) {
	raw, ok := meta[Key]
	if !ok {
		return Meta{}, false
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return Meta{}, false
	}
	var m Meta
	if json.Unmarshal(b, &m) != nil || m.ConversationID == "" {
		return Meta{}, false
	}
	return m, true
}
