package views

import (
	"bytes"
	"encoding/json"
	"strings"
)

// TokenPlaceholder stands for the token in the configurations of the "Connect an agent"
// panel when no token was just created (a token is shown only once).
const TokenPlaceholder = "<your token>"

// ConnectPanel is the "Connect an agent" panel of /tokens: ready-to-paste configuration
// for MCP clients, filled with this server's URL and, right after a token is created,
// with that token.
type ConnectPanel struct {
	MCPURL string // the streamable HTTP endpoint
	SSEURL string // the legacy SSE endpoint
	// TokenFilled: the configurations hold the token just created, not the placeholder.
	TokenFilled bool
	Clients     []ConnectClient
}

// ConnectClient is one client's configuration: a tab of the panel.
type ConnectClient struct {
	Key    string // a slug, for ids
	Label  string
	Where  string // where the configuration goes
	Config string
}

// mcpServer is one server entry of the clients' JSON files, in the order they are
// usually written.
type mcpServer struct {
	Type    string            `json:"type,omitempty"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
}

// Connect builds the panel for a server reached at origin ("https://host"); token is
// the token just created, or "" for the placeholder.
func Connect(origin, token string) ConnectPanel {
	p := ConnectPanel{MCPURL: origin + "/mcp", SSEURL: origin + "/sse", TokenFilled: token != ""}
	if token == "" {
		token = TokenPlaceholder
	}
	auth := map[string]string{"Authorization": "Bearer " + token}
	p.Clients = []ConnectClient{
		{Key: "claude-code", Label: "Claude Code", Where: "Run in a terminal:",
			Config: `claude mcp add --transport http toolwarden ` + p.MCPURL + ` --header "Authorization: Bearer ` + token + `"`},
		{Key: "vscode", Label: "VS Code", Where: "Put in .vscode/mcp.json of a workspace, or in your user mcp.json (MCP: Open User Configuration):",
			Config: indentJSON(map[string]any{"servers": map[string]mcpServer{"toolwarden": {Type: "http", URL: p.MCPURL, Headers: auth}}})},
		{Key: "cursor", Label: "Cursor", Where: "Put in ~/.cursor/mcp.json (or .cursor/mcp.json of a project):",
			Config: indentJSON(map[string]any{"mcpServers": map[string]mcpServer{"toolwarden": {URL: p.MCPURL, Headers: auth}}})},
		{Key: "json", Label: "Other clients", Where: "Most clients that read an mcpServers JSON file take this (streamable HTTP):",
			Config: indentJSON(map[string]any{"mcpServers": map[string]mcpServer{"toolwarden": {Type: "http", URL: p.MCPURL, Headers: auth}}})},
	}
	return p
}

// indentJSON is v as clients' files are written: two-space indents, and < and > as
// themselves (the placeholder), not \u003c.
func indentJSON(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
	return strings.TrimSpace(b.String())
}
