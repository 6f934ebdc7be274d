package registry

// Configuration as code (seed 004 scenario 4): server registrations exported to a YAML
// file that lives in version control, and imported back — from that file or from the
// files MCP clients already have (Claude Desktop, .mcp.json, VS Code) — as a reviewed
// plan applied in one transaction. Secret values never leave the database.

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/toolwarden/toolwarden/services/fault"
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
	Template         string // a template server's YAML, as written (nothing in it is expanded)
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
	b.WriteString(Printable(p.File))
	if p.Server != "" {
		fmt.Fprintf(&b, ": server %q", p.Server)
	}
	if p.Field != "" {
		b.WriteString(": " + Printable(p.Field))
	}
	b.WriteString(": " + Printable(p.Message))
	return b.String()
}

// Printable is s as a plan or a problem prints it: s itself, or quoted with every
// character that is not graphic escaped (ESC, a line break, U+202E) when it has one, so
// a name in a file cannot move a terminal's cursor or hide lines of the plan.
func Printable(s string) string {
	if !utf8.ValidString(s) || strings.IndexFunc(s, func(r rune) bool { return !strconv.IsGraphic(r) }) >= 0 {
		return strconv.QuoteToGraphic(s)
	}
	return s
}

// CodeInvalidConfig is the code of a configuration file or import plan with problems;
// the fault's details are the []Problem (see ProblemsOf).
const CodeInvalidConfig = "invalid_config"

// configError is every problem found in a configuration file or an import plan.
func configError(ps []Problem) *fault.Error {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return fault.Invalid(CodeInvalidConfig, strings.Join(lines, "\n"), ps)
}

// ProblemsOf returns the problems of a configuration file or plan that could not be
// read or applied; ok is false for other errors.
func ProblemsOf(err error) (ps []Problem, ok bool) {
	f, isFault := fault.As(err)
	if !isFault || f.Code != CodeInvalidConfig {
		return nil, false
	}
	ps, ok = f.Details.([]Problem)
	return ps, ok
}

// ErrInvalidPlan is returned by ApplyImport for a plan that has errors.
var ErrInvalidPlan = errors.New("registry: the import plan has errors; nothing was changed")
