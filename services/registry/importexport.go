package registry

// Configuration as code (seed 004 scenario 4): server registrations exported to a YAML
// file that lives in version control, and imported back — from that file or from the
// files MCP clients already have (Claude Desktop, .mcp.json, VS Code) — as a reviewed
// plan applied in one transaction. Secret values never leave the database.

import (
	"errors"
	"fmt"
	"strings"
)

// ConfigVersion is the version of the native configuration format that Export writes.
const ConfigVersion = 1

// Configuration file formats ParseConfig reads.
const (
	FormatToolwarden = "toolwarden" // Toolwarden's own YAML (Export)
	FormatClaude     = "claude"     // claude_desktop_config.json and .mcp.json: {"mcpServers": {...}}
	FormatVSCode     = "vscode"     // VS Code's mcp.json: {"servers": {...}, "inputs": [...]}
)

// formatTitles name the formats for people.
var formatTitles = map[string]string{
	FormatToolwarden: "Toolwarden YAML",
	FormatClaude:     "Claude Desktop / .mcp.json",
	FormatVSCode:     "VS Code mcp.json",
}

// Config is a configuration file, parsed. Servers are sorted by name.
type Config struct {
	File     string // as given to ParseConfig; used in messages
	Format   string // FormatToolwarden, FormatClaude or FormatVSCode
	Servers  []ServerConfig
	Warnings []Problem
}

// ServerConfig is one server as a file states it. A nil field is one the file's format
// cannot express: the stored value stays (or the default, for a new server). Files in
// the native format state every field. In Env and Headers, every name the server should
// have is listed; a nil value means "keep the stored value" — secret values are never
// exported, so a file usually says only which secrets exist.
type ServerConfig struct {
	Name             string
	Type             string
	Description      *string
	Command          string
	Args             []string
	WorkingDir       *string
	URL              string
	Env              map[string]*string
	Headers          map[string]*string
	Auth             *AuthConfig
	TimeoutMS        *int
	Retries          *int
	HealthIntervalMS *int
	Enabled          *bool
	Trusted          *bool
	AutoEnable       *bool
}

// AuthConfig is the authentication of an HTTP server. Token nil keeps the stored token.
type AuthConfig struct {
	Type   string // AuthNone, AuthBearer or AuthHeader
	Header string // for AuthHeader
	Token  *string
}

// Problem is one error or warning about a configuration file or an import plan. It
// names the file, the server (when there is one) and the field (when there is one).
type Problem struct {
	File    string `json:"file"`
	Server  string `json:"server,omitempty"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Server != "" {
		fmt.Fprintf(&b, ": server %q", p.Server)
	}
	if p.Field != "" {
		b.WriteString(": " + p.Field)
	}
	b.WriteString(": " + p.Message)
	return b.String()
}

// ConfigError is every problem found in a configuration file or an import plan.
type ConfigError struct {
	Problems []Problem
}

func (e *ConfigError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// ErrInvalidPlan is returned by ApplyImport for a plan that has errors.
var ErrInvalidPlan = errors.New("registry: the import plan has errors; nothing was changed")
